"""The held-back state machine every tool-call format shares (Dynamo's jail): content
flows out until a call opens; the call is held from there and parsed when it closes.

What a client sees of a call, as vLLM streams one: a delta naming it (its
`chatcmpl-tool-...` id and name, empty arguments), then deltas that add to its arguments.
By default a call goes out whole once it has closed and parsed, so that a call that does
not parse (malformed, or cut by the end of the answer) is content, exactly as the model
wrote it, as vLLM's whole answer gives it; a format vLLM reads over the whole answer at
once (`reads_whole_answer`: hermes) holds everything from its first call to the end, since
there one call that does not parse makes the whole answer content. With `partial`
(`--stream-partial-tool-calls`), a call is shown as soon as its name and first whole
argument are written (`streaming`), then argument by argument, each as the JSON the whole
call will have; one that breaks after it was shown cannot be taken back: it is closed with
the arguments shown (`}`), and its text is content too. Either way the stream never holds
broken JSON and adds up to the whole answer. In an answer with calls, whitespace at the
start and end of the content is dropped, as vLLM strips it (held back until text follows
it, so the stream says the same), except where a format keeps the whitespace between text
and a call (`keeps_space_before_call`).

A format says where a call opens and closes (`find_start`, `find_end`; TaggedToolParser
for the formats that have tags), how it parses (`parse`, also a call the end cut) and what
of an open call is certain (`streaming`).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar

from ..markers import earliest, partial_tail
from ..options import OutputOptions


@dataclass(frozen=True)
class ToolCallDelta:
    """What one step adds to the call numbered `index`: its first delta has its id and
    name; `arguments` is the text added to its arguments (a JSON object, when whole)."""

    index: int
    id: str | None = None
    name: str | None = None
    arguments: str = ""


def new_tool_call_id() -> str:
    """vLLM's tool call ids: chatcmpl-tool- and 16 hex digits."""
    return f"chatcmpl-tool-{uuid.uuid4().int & (2**64 - 1):016x}"


@dataclass
class _Shown:
    """A call being written that the client has been shown."""

    index: int
    name: str
    arguments: str  # what was sent of its arguments


@dataclass
class Step:
    content: list[str] = field(default_factory=list)
    calls: list[ToolCallDelta] = field(default_factory=list)

    def result(self) -> tuple[str, list[ToolCallDelta]]:
        return "".join(self.content), self.calls


class ToolParser:
    """Finds the calls in one answer's content, piece by piece."""

    name: ClassVar[str]  # vLLM's --tool-call-parser name
    reasoning_ends_on: ClassVar[str | None] = None  # the marker that opens a call: reasoning ends there
    # The characters that can make more of an open call certain (JSON: a member is whole
    # at the `,` or `}` after it; tags: at a `>`): `streaming` is asked only when one comes,
    # so a long call is not re-read at every token.
    certain_after: ClassVar[str] = ",}>"
    # The whitespace between text and a call is content (vLLM's hermes gives the text before
    # the first call as it is), not dropped as vLLM's parser engine drops it.
    keeps_space_before_call: ClassVar[bool] = False
    # vLLM's parser reads the calls of the whole answer at once, and one that does not
    # parse makes all of it content (hermes): without `partial`, everything from the first
    # call on is held to the end, so the answer is that too.
    reads_whole_answer: ClassVar[bool] = False

    def __init__(
        self,
        tools: list[dict] | None = None,
        new_id: Callable[[], str] = new_tool_call_id,
        partial: bool = False,
    ):
        self.tools = tools or []
        self._new_id = new_id
        self.partial = partial  # show a call as it is written (--stream-partial-tool-calls)
        # the answer's pieces from its first call on, held to the end (reads_whole_answer)
        self._whole: list[str] | None = None
        self._holds_whole = self.reads_whole_answer and not partial
        self._held = ""  # text that could be the start of a call
        self._certain_after = frozenset(self.certain_after)
        self._jail: str | None = None  # the call being written, from where it opened
        self._shown_calls: list[_Shown] = []  # the open block's calls the client was shown
        self._space = ""  # trailing whitespace of the content, held: dropped at the end if calls came
        self._shown = False  # whether any content (other than whitespace) was given out
        self.bare = True  # nothing but whitespace given out since the start or the last call
        self.calls = 0

    @classmethod
    def adjust(cls, options: OutputOptions) -> OutputOptions:
        """The request's output options as this format needs them (vLLM's adjust_request),
        when calls are parsed."""
        return options

    # -- the format's parts ------------------------------------------------------------

    def find_start(self, text: str) -> tuple[int, int] | None:
        """Where a call opens in `text`: (end of the content before it, start of the call);
        text between the two is a separator, dropped. None: no call opens in it."""
        raise NotImplementedError

    def partial_start(self, text: str) -> int:
        """How many trailing characters of `text` could begin a call (held back)."""
        raise NotImplementedError

    def could_open(self, text: str) -> bool:
        """Whether a call could open in `text` at all (a cheap test: most pieces are text)."""
        return True

    def find_end(self, jail: str, since: int) -> int | None:
        """Where the call that `jail` holds ends (just past it); None: not yet. `since`: how
        much of it was searched before (only an end that reaches past it can be new)."""
        raise NotImplementedError

    def parse(self, raw: str, closed: bool) -> list[tuple[str, str]]:
        """The (name, arguments) of the calls in `raw`, from where it opened to where it
        closed (`closed`) or to the end of the answer (cut: what vLLM's parser makes of it);
        [] if it is not a call."""
        raise NotImplementedError

    def identify(self, name: str) -> tuple[str, str]:
        """The (id, name) a call goes out with, from the name `parse` and `streaming` give:
        a fresh vLLM-shaped id unless the format writes its own (kimi_k2)."""
        return self._new_id(), name

    def streaming(self, jail: str) -> list[tuple[str, str]]:
        """Of the block being written, each call that is certain so far (its name and first
        whole argument written): its name and the start of its arguments that is certain
        (`{` and its whole members so far, never the closing `}`: the whole call's
        arguments will begin with it). [] while none is."""
        return []

    # -- the state machine ------------------------------------------------------------

    def feed(self, text: str, token_ids: tuple[int, ...] = ()) -> tuple[str, list[ToolCallDelta]]:
        """`token_ids`: the ids this step's text came from (none for a text engine)."""
        if self._whole is not None:  # held to the end (reads_whole_answer)
            self._whole.append(text)
            return "", []
        if self._jail is None and not self._held and not self.could_open(text):  # the common case
            return self._content(text), []
        step = Step()
        text = self._held + text
        self._held = ""
        while text:
            if self._jail is not None:
                since = len(self._jail)
                self._jail += text
                text = ""
                end = self.find_end(self._jail, since)
                if end is None:
                    if self.partial and not self._certain_after.isdisjoint(self._jail[since:]):
                        self._show(step)
                    break
                raw, text = self._jail[:end], self._jail[end:]
                self._jail = None
                self._close(raw, True, step)
                continue
            found = self.find_start(text)
            if found is None:
                keep = self.partial_start(text)
                step.content.append(self._content(text[: len(text) - keep]))
                self._held = text[len(text) - keep :]
                break
            content_end, start = found
            step.content.append(self._content(text[:content_end]))
            if self._holds_whole:
                self._whole = [text[content_end:]]
                break
            self._jail, text = "", text[start:]
        return step.result()

    def finish(self) -> tuple[str, list[ToolCallDelta]]:
        step = Step()
        if self._whole is not None:
            whole, self._whole, self._holds_whole = "".join(self._whole), None, False
            if self._every_call_parses(whole):
                content, calls = self.feed(whole)  # now as any answer: its calls in order
                step.content.append(content)
                step.calls.extend(calls)
            else:  # as vLLM's whole answer: all of it is the model's text
                step.content.append(self._content(whole))
        if self._jail is not None:
            raw, self._jail = self._jail, None
            self._close(raw, False, step)
        step.content.append(self._content(self._held))
        self._held = ""
        if not self.calls:
            step.content.append(self._space)  # no call came: the whitespace was the answer's
        self._space = ""
        return step.result()

    def _every_call_parses(self, text: str) -> bool:
        """Whether each call in `text` (an answer from its first call on) parses."""
        while (found := self.find_start(text)) is not None:
            jail = text[found[1] :]
            end = self.find_end(jail, 0)
            if not self.parse(jail if end is None else jail[:end], end is not None):
                return False
            if end is None:
                break
            text = jail[end:]
        return True

    def _show(self, step: Step) -> None:
        """What became certain of the open block's calls: each one's name, then its arguments."""
        for i, (name, arguments) in enumerate(self.streaming(self._jail or "")):
            if i == len(self._shown_calls):
                self._shown_calls.append(_Shown(self._begin_call(step), name, ""))
                step.calls.append(ToolCallDelta(self._shown_calls[i].index, *self.identify(name)))
            shown = self._shown_calls[i]
            if len(arguments) > len(shown.arguments) and arguments.startswith(shown.arguments):
                step.calls.append(ToolCallDelta(shown.index, arguments=arguments[len(shown.arguments) :]))
                shown.arguments = arguments

    def _close(self, raw: str, closed: bool, step: Step) -> None:
        parsed = self.parse(raw, closed)
        shown, self._shown_calls = self._shown_calls, []
        if not parsed and not shown:
            step.content.append(self._content(raw))  # not a call after all: the model's text
            return
        if not _begun_as(shown, parsed):  # it broke after it was shown: closed as valid JSON
            step.calls.extend(ToolCallDelta(call.index, arguments="}") for call in shown)
            step.content.append(self._content(raw))  # and its text kept
            return
        for call, (_, arguments) in zip(shown, parsed, strict=False):
            step.calls.append(ToolCallDelta(call.index, arguments=arguments[len(call.arguments) :]))
        for name, arguments in parsed[len(shown) :]:
            step.calls.append(ToolCallDelta(self._begin_call(step), *self.identify(name), arguments))
        self.bare = True

    def _begin_call(self, step: Step) -> int:
        if not self._shown:
            self._space = ""  # whitespace before the first call is not content
        elif self.keeps_space_before_call:
            step.content.append(self._space)
            self._space = ""
        self.calls += 1
        return self.calls - 1

    def _content(self, text: str) -> str:
        text = self._space + text
        kept = text.rstrip()
        self._space = text[len(kept) :]
        if kept:
            self._shown, self.bare = True, False
        return kept


def _begun_as(shown: list[_Shown], parsed: list[tuple[str, str]]) -> bool:
    """Whether the parsed calls begin as the shown ones did."""
    return len(parsed) >= len(shown) and all(
        name == call.name and arguments.startswith(call.arguments)
        for call, (name, arguments) in zip(shown, parsed, strict=False)
    )


class TaggedToolParser(ToolParser):
    """A format whose calls run from an opening tag to its closing one."""

    blocks: ClassVar[tuple[tuple[str, str], ...]]  # (opening, closing) pairs

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._starts = tuple(start for start, _ in self.blocks)
        self._firsts = frozenset(start[0] for start in self._starts)
        self._ends = dict(self.blocks)

    def find_start(self, text: str) -> tuple[int, int] | None:
        found = earliest(text, self._starts)
        return None if found is None else (found[0], found[0])

    def partial_start(self, text: str) -> int:
        return partial_tail(text, self._starts)

    def could_open(self, text: str) -> bool:
        return not self._firsts.isdisjoint(text)

    def find_end(self, jail: str, since: int) -> int | None:
        start = next(s for s in self._starts if jail.startswith(s))
        end = self._ends[start]
        at = jail.find(end, max(len(start), since - len(end) + 1))  # the end may straddle pieces
        return None if at < 0 else at + len(end)
