"""deepseek_r1 (vLLM's DeepSeekR1ReasoningParser): everything up to </think> is reasoning,
whatever the request says; <think> is dropped. With no </think>, all of the answer is
reasoning."""

from __future__ import annotations

from ..options import OutputOptions
from . import REGISTRY
from .base import ReasoningParser


@REGISTRY.register
class DeepSeekR1ReasoningParser(ReasoningParser):
    name = "deepseek_r1"

    @classmethod
    def start(cls, options: OutputOptions, prompt_text: str, tool_start: str | None) -> ReasoningParser:
        return cls(True)
