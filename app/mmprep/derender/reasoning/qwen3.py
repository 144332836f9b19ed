"""qwen3 (vLLM 0.33's Qwen3Parser): the answer starts in reasoning (Qwen3's templates open
<think> in the prompt, or the model writes it, and it is dropped) unless the prompt already
closed the block (`</think>` after the last <|im_start|>); </think> ends it, and so does a
tool call's opening when calls are parsed (a call is never left inside the reasoning); a
second </think> in the answer is dropped. With no </think>, all of the answer is reasoning.
A request that turned thinking off (chat_template_kwargs.enable_thinking: false) gets the
answer's text untouched, <think></think> included where the model wrote them anyway, as
vLLM's whole answer gives it."""

from __future__ import annotations

from ..options import OutputOptions
from . import REGISTRY
from .base import THINK_END, ReasoningParser

# Qwen's chat-template turn marker: the family's token name, kept here for the one rule that
# reads the prompt (the model families' own modules name the rest)
TURN_START = "<|im_start|>"


@REGISTRY.register
class Qwen3ReasoningParser(ReasoningParser):
    name = "qwen3"

    @classmethod
    def start(cls, options: OutputOptions, prompt_text: str, tool_start: str | None) -> ReasoningParser:
        if not options.enable_thinking:
            return cls(False)  # nothing dropped in the content: the text as the model wrote it
        return cls(
            not prompt_closes_reasoning(prompt_text),
            ends_on=(tool_start,) if tool_start else (),
            drop_in_content=(THINK_END,),
        )


def prompt_closes_reasoning(prompt_text: str) -> bool:
    """Whether the rendered prompt closed this turn's thinking already (Qwen3's template
    with enable_thinking false writes an empty <think></think> block)."""
    turn = prompt_text[prompt_text.rfind(TURN_START) + 1 :]
    return THINK_END in turn
