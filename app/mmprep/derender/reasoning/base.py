"""The state machine reasoning parsers share: the answer's text, piece by piece, as
(reasoning, content), split at <think> and </think> (markup held back while the tail could
be its start). A format says where the answer starts (in reasoning or not), which markers
also end the reasoning (a tool call's, kept in the content) and which are dropped from the
content."""

from __future__ import annotations

from typing import ClassVar

from ..markers import earliest, partial_tail
from ..options import OutputOptions

THINK_START, THINK_END = "<think>", "</think>"


class ReasoningParser:
    """Splits one answer's text, piece by piece, into (reasoning, content)."""

    name: ClassVar[str]  # vLLM's --reasoning-parser name

    @classmethod
    def start(cls, options: OutputOptions, prompt_text: str, tool_start: str | None) -> ReasoningParser:
        """This parser for one answer: the request's options, the rendered prompt and the
        marker that opens a tool call (when calls are parsed)."""
        raise NotImplementedError

    def __init__(
        self,
        reasoning: bool,
        ends_on: tuple[str, ...] = (),
        drop_in_content: tuple[str, ...] = (),
        strip_end: bool = False,
        tags: tuple[str, str] = (THINK_START, THINK_END),
        opens_in_content: bool = False,
    ):
        self._reasoning = reasoning
        self._start, self._end = tags
        self._reasoning_markers = (self._start, self._end, *ends_on)  # ends_on: end it, stay in the content
        # opens_in_content: the opening tag starts reasoning in the answer too (mistral's);
        # else it is text there
        self._content_markers = (*drop_in_content, *((self._start,) if opens_in_content else ()))
        self._firsts = frozenset(marker[0] for marker in (*self._reasoning_markers, *self._content_markers))
        self._held = ""
        # strip_end: whitespace at the end of the reasoning is dropped (vLLM's parser engine's
        # strip_trailing_reasoning_whitespace), held until more reasoning follows it
        self._strip_end = strip_end
        self._space = ""

    @property
    def in_reasoning(self) -> bool:
        return self._reasoning

    def feed(self, text: str, token_ids: tuple[int, ...] = ()) -> tuple[str, str]:
        """`token_ids`: the ids this step's text came from (none for a text engine)."""
        reasoning, content = self._split(text)
        return self._trimmed(reasoning), content

    def finish(self) -> tuple[str, str]:
        held, self._held = self._held, ""
        if not self._reasoning:
            return "", held
        reasoning, self._space = self._trimmed(held), ""  # nothing follows: the end's whitespace goes
        return reasoning, ""

    def _trimmed(self, reasoning: str) -> str:
        if not self._strip_end:
            return reasoning
        reasoning = self._space + reasoning
        kept = reasoning.rstrip()
        self._space = reasoning[len(kept) :] if self._reasoning else ""
        return kept

    def _split(self, text: str) -> tuple[str, str]:
        if not self._held and self._firsts.isdisjoint(text):  # no marker can start here: the common case
            return (text, "") if self._reasoning else ("", text)
        text = self._held + text
        self._held = ""
        reasoning: list[str] = []
        content: list[str] = []
        while text:
            markers = self._reasoning_markers if self._reasoning else self._content_markers
            found = earliest(text, markers) if markers else None
            if found is None:
                keep = partial_tail(text, markers) if markers else 0
                (reasoning if self._reasoning else content).append(text[: len(text) - keep])
                self._held = text[len(text) - keep :]
                break
            at, marker = found
            (reasoning if self._reasoning else content).append(text[:at])
            if not self._reasoning:  # dropped; the opening tag starts reasoning again
                self._reasoning, text = marker == self._start, text[at + len(marker) :]
            elif marker == self._start:
                text = text[at + len(marker) :]
            elif marker == self._end:
                self._reasoning, text = False, text[at + len(marker) :]
            else:  # a tool call: the reasoning is over, the call is the answer's
                self._reasoning, text = False, text[at:]
        return "".join(reasoning), "".join(content)
