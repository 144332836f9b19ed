"""derender: what an engine produced, as the OpenAI answer's parts. Token ids to text
(DecodeStream), stop strings and ids, reasoning and tool-call parsers (packages of their
own, one module per format, registered by vLLM's names), logprobs. Knows the tokenizers
library and the answer's pieces, nothing of HTTP."""

from .options import OutputOptions
from .pipeline import Delta, Derenderer, Derendering, ModelFacts
from .reasoning import REGISTRY as REASONING_PARSERS
from .tools import REGISTRY as TOOL_PARSERS
from .tools import ToolCallDelta

__all__ = [
    "REASONING_PARSERS",
    "TOOL_PARSERS",
    "Delta",
    "Derenderer",
    "Derendering",
    "ModelFacts",
    "OutputOptions",
    "ToolCallDelta",
]
