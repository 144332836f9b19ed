"""derender: what an engine produced, as the OpenAI answer's parts. Token ids to text
(DecodeStream), stop strings and ids, reasoning and tool-call parsers, logprobs. Knows
the tokenizers library and the answer's pieces, nothing of HTTP."""

from .pipeline import Delta, Derenderer, Derendering, ModelFacts, OutputOptions
from .reasoning import REASONING_PARSERS
from .tools import TOOL_PARSERS, ToolCall

__all__ = [
    "REASONING_PARSERS",
    "TOOL_PARSERS",
    "Delta",
    "Derenderer",
    "Derendering",
    "ModelFacts",
    "OutputOptions",
    "ToolCall",
]
