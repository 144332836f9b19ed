"""minimax_m2 (MiniMax-M2, vLLM's MiniMaxM2ReasoningParser): the answer starts in reasoning
(the template opens <think>; one the model writes is dropped) and </think> ends it, as
does a tool call's opening when calls are parsed; a </think> in the answer is dropped.
Whitespace at the reasoning's end is dropped, as vLLM's parser engine drops it."""

from __future__ import annotations

from ..options import OutputOptions
from . import REGISTRY
from .base import THINK_END, ReasoningParser


@REGISTRY.register
class MinimaxM2ReasoningParser(ReasoningParser):
    name = "minimax_m2"

    @classmethod
    def start(cls, options: OutputOptions, prompt_text: str, tool_start: str | None) -> ReasoningParser:
        return cls(
            True, ends_on=(tool_start,) if tool_start else (), drop_in_content=(THINK_END,), strip_end=True
        )
