"""llama3_json (Llama 3.1-3.3 and 4 with vLLM's tool_chat_template_llama*_json templates):
the answer is the calls, JSON objects `{"name": ..., "parameters": {...}}` ("arguments" is
read too), each maybe after `<|python_tag|>`, several joined by `;`, as vLLM's
Llama3JsonToolParser reads them.

No tag opens a call: one opens where the answer starts with `{` or `<|python_tag|>` (after
whitespace, or after a call and its `;`), as vLLM's streaming parser looks for one, and
closes where its braces do. vLLM's whole-answer parser also takes a call after text, then
drops the text (and drops text after the calls); here text before a call is content and a
`{` inside it is text, so the stream can say at once what is content.
"""

from __future__ import annotations

from . import REGISTRY
from .base import ToolParser
from .json_calls import object_end, parse_call, skip_space, streaming_call

PYTHON_TAG = "<|python_tag|>"  # Llama's; in another vocabulary it is plain text, read the same
ARGUMENT_KEYS = ("arguments", "parameters")


@REGISTRY.register
class Llama3JsonToolParser(ToolParser):
    name = "llama3_json"

    def find_start(self, text: str) -> tuple[int, int] | None:
        if not self.bare:
            return None
        at = self._after_separator(text)
        if at is None:
            return None
        if text.startswith("{", at) or text.startswith(PYTHON_TAG, at):
            return len(text) - len(text.lstrip()), at  # whitespace is content (dropped with calls); `;` not
        return None

    def partial_start(self, text: str) -> int:
        if not self.bare:
            return 0
        at = self._after_separator(text)
        if at is None:
            return 0
        rest = text[at:]
        # all of it could still open a call: whitespace, a `;` after a call, a piece of the tag
        return len(text) if not rest or PYTHON_TAG.startswith(rest) else 0

    def could_open(self, text: str) -> bool:
        return self.bare  # after text, no call opens

    def find_end(self, jail: str, since: int) -> int | None:
        return object_end(jail, self._body(jail), since)

    def parse(self, raw: str, closed: bool) -> list[tuple[str, str]]:
        call = parse_call(raw[self._body(raw) :], ARGUMENT_KEYS) if closed else None
        return [call] if call else []

    def streaming(self, jail: str) -> list[tuple[str, str]]:
        found = streaming_call(jail, self._body(jail), ARGUMENT_KEYS)
        return [found] if found else []

    def _after_separator(self, text: str) -> int | None:
        """Where a call could open in `text`: past whitespace, and past one `;` after a call."""
        at = skip_space(text, 0)
        if self.calls and text.startswith(";", at):
            at = skip_space(text, at + 1)
        elif self.calls and at == len(text):
            return at
        elif self.calls:
            return None  # after a call, only `;` leads to the next
        return at

    @staticmethod
    def _body(jail: str) -> int:
        return skip_space(jail, len(PYTHON_TAG)) if jail.startswith(PYTHON_TAG) else 0
