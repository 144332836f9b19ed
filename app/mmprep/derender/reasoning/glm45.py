"""glm45 (GLM-4.5 to 4.7, vLLM's Glm47MoeParser): the answer starts in reasoning unless the
request's chat_template_kwargs turn `thinking` or `enable_thinking` off (both unsaid:
on); then </think> ends it, and so does a tool call's opening when calls are parsed; a
<think> the model writes and a </think> in the answer are dropped. Whitespace at the
reasoning's end is dropped, as vLLM's parser engine drops it. With thinking off, no
reasoning is split off."""

from __future__ import annotations

from ..options import OutputOptions
from . import REGISTRY
from .base import THINK_END, ReasoningParser


@REGISTRY.register
class Glm45ReasoningParser(ReasoningParser):
    name = "glm45"

    @classmethod
    def start(cls, options: OutputOptions, prompt_text: str, tool_start: str | None) -> ReasoningParser:
        if not thinking(options.chat_template_kwargs):
            return cls(False)
        return cls(
            True, ends_on=(tool_start,) if tool_start else (), drop_in_content=(THINK_END,), strip_end=True
        )


def thinking(kwargs: dict) -> bool:
    """vLLM's rule: on unless `thinking` or `enable_thinking` is given, then either true."""
    given = [kwargs.get(key) for key in ("thinking", "enable_thinking") if kwargs.get(key) is not None]
    return not given or any(bool(value) for value in given)
