"""mistral (Magistral and other Mistral models with thinking, vLLM's MistralParser): the
answer starts as content; `[THINK]` opens reasoning (anywhere, as often as written) and
`[/THINK]` ends it, as does `[TOOL_CALLS]` when calls are parsed. Whitespace at the
reasoning's end is dropped, as vLLM's parser engine drops it. (vLLM reads `<think>` for
v11 tokenizers and nothing for one without [THINK]; this parser reads the v13 tags as text,
whatever the vocabulary.)"""

from __future__ import annotations

from ..options import OutputOptions
from . import REGISTRY
from .base import ReasoningParser

THINK_START, THINK_END = "[THINK]", "[/THINK]"


@REGISTRY.register
class MistralReasoningParser(ReasoningParser):
    name = "mistral"

    @classmethod
    def start(cls, options: OutputOptions, prompt_text: str, tool_start: str | None) -> ReasoningParser:
        return cls(
            False,
            ends_on=(tool_start,) if tool_start else (),
            drop_in_content=(THINK_END,),
            strip_end=True,
            tags=(THINK_START, THINK_END),
            opens_in_content=True,
        )
