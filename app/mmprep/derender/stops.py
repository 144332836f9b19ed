"""When an answer ends: stop strings, stop token ids, the model's EOS ids, min_tokens and
max_tokens, as vLLM's StopChecker and its detokenizer's stop-string check apply them.

Text that could still be the start of a stop string is held back, and only as long as
it could (vLLM holds the longest stop string's length, always); a stop string is hidden
from the answer unless include_stop_str_in_output. `stop_reason` is what vLLM reports:
the matched string, or the stop token id (None for the tokenizer's own EOS token).
"""

from __future__ import annotations

from dataclasses import dataclass

from .detokenize import Detokenizer


@dataclass(frozen=True)
class StopRules:
    stop: tuple[str, ...] = ()
    stop_token_ids: tuple[int, ...] = ()
    # The model's EOS ids (generation_config.json's, the tokenizer's first): they end the
    # answer unless ignore_eos. The first one stops with stop_reason None, the others with
    # their id (vLLM puts them among the stop token ids).
    eos_token_ids: tuple[int, ...] = ()
    ignore_eos: bool = False
    min_tokens: int = 0
    max_tokens: int | None = None
    include_stop_str_in_output: bool = False


class StopChecker:
    """Feeds one request's output ids through a Detokenizer and says when to stop.

    `push(token_id)` returns the text that may be shown now; once `finish_reason` is set
    the answer is over and no more ids are taken (the caller closes the engine).
    """

    def __init__(self, rules: StopRules, detokenizer: Detokenizer):
        self._detokenizer = detokenizer
        self._strings = tuple(s for s in rules.stop if s)
        self._firsts = frozenset(s[0] for s in self._strings)  # no stop can begin without one
        self._hold_back = bool(self._strings) and not rules.include_stop_str_in_output
        self._include = rules.include_stop_str_in_output
        eos = () if rules.ignore_eos else rules.eos_token_ids
        self._quiet_eos = eos[0] if eos and eos[0] not in rules.stop_token_ids else None
        self._stop_ids = frozenset(rules.stop_token_ids) | frozenset(eos)
        self._min_tokens, self._max_tokens = rules.min_tokens, rules.max_tokens
        self._held = ""  # text that could be the start of a stop string
        # include_stop_str_in_output: nothing is held back, but the shown tail that could
        # begin a stop string is searched again with the next piece
        self._tail = ""
        self._shown = 0  # characters given out so far
        self._min_end = 0 if rules.min_tokens == 0 else None  # where stop strings may end, from min_tokens on
        self.tokens = 0  # output tokens taken, the stop token among them
        self.finish_reason: str | None = None
        self.stop_reason: str | int | None = None

    def push(self, token_id: int) -> str:
        self.tokens += 1
        if token_id in self._stop_ids and self.tokens > self._min_tokens:
            self._finish("stop", None if token_id == self._quiet_eos else token_id)
            piece = self._detokenizer.step(token_id) if self._include else ""
            return self._release(piece)
        piece = self._detokenizer.step(token_id)
        if self._strings:
            shown = self._check_strings(piece)
        else:
            shown = piece
        if self.finish_reason is None and self._max_tokens is not None and self.tokens >= self._max_tokens:
            self._finish("length", None)
            shown += self._release("")
        return shown

    def flush(self) -> str:
        """The engine ended: whatever was held back, since no stop string can follow."""
        return self._release("")

    def _check_strings(self, piece: str) -> str:
        if (
            not self._held
            and not self._tail
            and self.tokens > self._min_tokens
            and not any(first in piece for first in self._firsts)
        ):
            self._shown += len(piece)  # no stop string can begin in it: the common case
            return piece
        searched, self._tail = self._tail, ""
        text = searched + self._held + piece
        start = self._shown - len(searched)  # absolute offset of text[0]
        if self._min_end is None and self.tokens >= self._min_tokens:
            self._min_end = start + len(text)  # token min_tokens ends here
        if self._min_end is not None and self.tokens > self._min_tokens:
            match = self._earliest_stop(text, self._min_end - start)
            if match is not None:
                found, at = match
                self._finish("stop", found)
                self._held = ""
                shown = text[len(searched) : at + len(found)] if self._include else text[len(searched) : at]
                self._shown += len(shown)
                return shown
        keep = self._longest_partial(text)
        if self._hold_back:
            shown, self._held = text[len(searched) : len(text) - keep], text[len(text) - keep :]
        else:
            shown, self._tail = text[len(searched) :], text[len(text) - keep :]
        self._shown += len(shown)
        return shown

    def _earliest_stop(self, text: str, must_end_after: int) -> tuple[str, int] | None:
        """The stop string that completes first in `text` (ties: the first listed), among
        those ending after `must_end_after` (min_tokens' text is not searched alone)."""
        best = None
        for string in self._strings:
            at = text.find(string, max(0, must_end_after - len(string) + 1))
            if at >= 0 and (best is None or at + len(string) < best[1] + len(best[0])):
                best = (string, at)
        return best

    def _longest_partial(self, text: str) -> int:
        """How many trailing characters of `text` could begin a stop string (only where
        the stop string's first character is: most tails have none)."""
        longest = 0
        for string in self._strings:
            window = text[max(0, len(text) - len(string) + 1) :] if len(string) > 1 else ""
            at = window.find(string[0])
            while at >= 0 and len(window) - at > longest:
                if string.startswith(window[at:]):
                    longest = len(window) - at
                    break
                at = window.find(string[0], at + 1)
        return longest

    def _release(self, piece: str) -> str:
        text = self._held + piece + self._detokenizer.flush()
        self._held = ""
        self._shown += len(text)
        return text

    def _finish(self, reason: str, stop_reason: str | int | None) -> None:
        self.finish_reason, self.stop_reason = reason, stop_reason
