"""deepseek_v3 (DeepSeek-V3.1 and later, vLLM's DeepSeekV3ReasoningParser): deepseek_r1's
split when the request turned thinking on (chat_template_kwargs `thinking` or
`enable_thinking` true: these models' templates think only when told), else no reasoning
at all: the whole answer is content."""

from __future__ import annotations

from ..options import OutputOptions
from . import REGISTRY
from .base import ReasoningParser


@REGISTRY.register
class DeepSeekV3ReasoningParser(ReasoningParser):
    name = "deepseek_v3"

    @classmethod
    def start(cls, options: OutputOptions, prompt_text: str, tool_start: str | None) -> ReasoningParser:
        kwargs = options.chat_template_kwargs
        return cls(bool(kwargs.get("thinking")) or bool(kwargs.get("enable_thinking")))
