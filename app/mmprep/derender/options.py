"""The request's fields about its answer's text, as derendering reads them (a tool-call
parser may adjust them: ToolParser.adjust)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class OutputOptions:
    """The request's fields about its answer's text, beyond SamplingParams (validated by
    app/mmprep/api/common/chat_protocol.py)."""

    include_stop_str_in_output: bool = False
    # None: the model's default (its generation config's skip_special_tokens, as vLLM reads it; else true)
    skip_special_tokens: bool | None = None
    spaces_between_special_tokens: bool = True
    tools: tuple[dict, ...] = ()
    tool_choice: str | dict | None = None
    enable_thinking: bool = True  # chat_template_kwargs.enable_thinking
    chat_template_kwargs: dict[str, Any] = field(default_factory=dict)  # as the request gave them
    include_reasoning: bool = True  # vLLM's: false drops the reasoning from the answer
    parallel_tool_calls: bool = True  # false: only the first call is kept, as vLLM keeps it
    # logprobs name tokens token_id:N (vllm serve --return-tokens-as-token-ids, or the request's own)
    return_tokens_as_token_ids: bool = False
