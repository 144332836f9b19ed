"""mistral (Mistral, Mixtral, Ministral...), as vLLM's MistralParser reads it: each call
opens with `[TOOL_CALLS]`, written as `NAME[ARGS]{...}` or `NAME{...}` (tokenizers v11 and
later) or as a JSON array of `{"name", "arguments"}` objects (earlier ones, and a vocabulary
without [ARGS], as Qwen's: vLLM's legacy path). No tag closes a call: its braces (the
array's brackets) do. Arguments written as an object are kept as written; the ids are
Mistral's, nine letters and digits (mistral-common refuses others in the next turn)."""

from __future__ import annotations

import json
import random
import re
import string

from ..markers import earliest, partial_tail
from . import REGISTRY
from .base import ToolParser
from .json_calls import is_object, object_end, skip_space, streaming_call, written_prefix

TOOL_CALLS, ARGS = "[TOOL_CALLS]", "[ARGS]"
_NAME = re.compile(r"\s*([^\s\[{]+)\s*(?:\[ARGS\])?\s*(?=\{)")


@REGISTRY.register
class MistralToolParser(ToolParser):
    name = "mistral"
    reasoning_ends_on = TOOL_CALLS

    def find_start(self, text: str) -> tuple[int, int] | None:
        found = earliest(text, (TOOL_CALLS,))
        return None if found is None else (found[0], found[0])

    def partial_start(self, text: str) -> int:
        return partial_tail(text, (TOOL_CALLS,))

    def could_open(self, text: str) -> bool:
        return "[" in text

    def find_end(self, jail: str, since: int) -> int | None:
        at = skip_space(jail, len(TOOL_CALLS))
        if jail.startswith("[", at) and not jail.startswith(ARGS, at):
            return object_end(jail, at, since)  # the legacy array
        name = _NAME.match(jail, len(TOOL_CALLS))
        return None if name is None else object_end(jail, name.end(), since)

    def parse(self, raw: str, closed: bool) -> list[tuple[str, str]]:
        if not closed:
            return []
        at = skip_space(raw, len(TOOL_CALLS))
        if raw.startswith("[", at):
            return _array_calls(raw[at:])
        name = _NAME.match(raw, len(TOOL_CALLS))
        arguments = raw[name.end() :] if name else ""
        return [(name.group(1), arguments)] if name and is_object(arguments) else []

    def streaming(self, jail: str) -> list[tuple[str, str]]:
        at = skip_space(jail, len(TOOL_CALLS))
        if jail.startswith("[", at):
            return _array_streaming(jail, at)
        name = _NAME.match(jail, len(TOOL_CALLS))
        prefix = written_prefix(jail[name.end() :]) if name else ""
        return [(name.group(1), prefix)] if name and prefix else []

    def identify(self, name: str) -> tuple[str, str]:
        return "".join(random.choices(string.ascii_letters + string.digits, k=9)), name


def _array_calls(text: str) -> list[tuple[str, str]]:
    try:
        parsed = json.loads(text)
    except ValueError:
        return []
    calls = []
    for call in parsed if isinstance(parsed, list) else [parsed]:
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call["name"]:
            return []
        arguments = call.get("arguments", {})
        if isinstance(arguments, str) and is_object(arguments):
            calls.append((call["name"], arguments))  # vLLM keeps a string as it is
        elif isinstance(arguments, dict):
            calls.append((call["name"], json.dumps(arguments, ensure_ascii=False)))
        else:
            return []
    return calls


def _array_streaming(text: str, at: int) -> list[tuple[str, str]]:
    """Of the legacy array being written: each call certain so far, as streaming_call says."""
    found = []
    at = skip_space(text, at + 1)
    while text.startswith("{", at):
        call = streaming_call(text, at)
        end = object_end(text, at)
        if end is not None:  # a whole call: all of its arguments but the closing `}` are certain
            whole = _array_calls(text[at:end])
            call = (whole[0][0], whole[0][1][:-1]) if whole else None
        if call is None:
            break
        found.append(call)
        if end is None:
            break
        at = skip_space(text, end)
        if not text.startswith(",", at):
            break
        at = skip_space(text, at + 1)
    return found
