"""Reasoning parsers: the model's thinking (<think>...</think>) apart from its answer, as
vLLM's `--reasoning-parser qwen3` and `deepseek_r1` split it.

qwen3 (vLLM 0.33's Qwen3Parser): the answer starts in reasoning (Qwen3's templates open
<think> in the prompt, or the model writes it, and it is dropped) unless the request
turned thinking off (chat_template_kwargs.enable_thinking: false) or the prompt already
closed the block (`</think>` after the last <|im_start|>); </think> ends it, and so does
a <tool_call> when tool calls are parsed (a call is never left inside the reasoning); a
second </think> in the answer is dropped. deepseek_r1 (vLLM's DeepSeekR1ReasoningParser):
everything up to </think> is reasoning, whatever the request says; <think> is dropped.
With no </think>, all of the answer is reasoning, in both.
"""

from __future__ import annotations

from .markers import earliest, partial_tail

THINK_START, THINK_END = "<think>", "</think>"
REASONING_PARSERS = ("qwen3", "deepseek_r1")


class ReasoningParser:
    """Splits one answer's text, piece by piece, into (reasoning, content)."""

    def __init__(self, reasoning: bool, ends_on: tuple[str, ...] = (), drop_in_content: tuple[str, ...] = ()):
        self._reasoning = reasoning
        self._ends_on = ends_on  # markers that end reasoning and stay in the content
        self._reasoning_markers = (THINK_START, THINK_END, *ends_on)
        self._content_markers = drop_in_content
        self._held = ""

    @property
    def in_reasoning(self) -> bool:
        return self._reasoning

    def feed(self, text: str) -> tuple[str, str]:
        if not self._held and "<" not in text:  # no marker can start here: the common case
            return (text, "") if self._reasoning else ("", text)
        text = self._held + text
        self._held = ""
        reasoning = []
        while self._reasoning and text:
            found = earliest(text, self._reasoning_markers)
            if found is None:
                keep = partial_tail(text, self._reasoning_markers)
                reasoning.append(text[: len(text) - keep])
                self._held = text[len(text) - keep :]
                return "".join(reasoning), ""
            at, marker = found
            reasoning.append(text[:at])
            if marker == THINK_START:
                text = text[at + len(marker) :]
            elif marker == THINK_END:
                self._reasoning, text = False, text[at + len(marker) :]
            else:  # a tool call: the reasoning is over, the call is the answer's
                self._reasoning, text = False, text[at:]
        return "".join(reasoning), self._content(text)

    def finish(self) -> tuple[str, str]:
        held, self._held = self._held, ""
        return (held, "") if self._reasoning else ("", held)

    def _content(self, text: str) -> str:
        if not self._content_markers:
            return text
        pieces = []
        while True:
            found = earliest(text, self._content_markers)
            if found is None:
                break
            at, marker = found
            pieces.append(text[:at])
            text = text[at + len(marker) :]
        keep = partial_tail(text, self._content_markers)
        pieces.append(text[: len(text) - keep])
        self._held = text[len(text) - keep :]
        return "".join(pieces)


def make_reasoning_parser(
    name: str, *, enable_thinking: bool = True, prompt_closed: bool = False, tool_start: str | None = None
) -> ReasoningParser:
    """`tool_start`: the tool parser's opening marker, when tool calls are parsed."""
    if name == "qwen3":
        return ReasoningParser(
            enable_thinking and not prompt_closed,
            ends_on=(tool_start,) if tool_start else (),
            drop_in_content=(THINK_END,),
        )
    if name == "deepseek_r1":
        return ReasoningParser(True)
    raise ValueError(f"unknown reasoning parser {name!r}: choose one of {', '.join(REASONING_PARSERS)}")


def prompt_closes_reasoning(prompt_text: str) -> bool:
    """Whether the rendered prompt closed this turn's thinking already (Qwen3's template
    with enable_thinking false writes an empty <think></think> block)."""
    turn = prompt_text[prompt_text.rfind("<|im_start|>") + 1 :]
    return THINK_END in turn
