"""Calls written as JSON objects, `{"name": ..., "arguments": {...}}` (hermes, llama3_json):
the whole call parsed, and what is certain of one still being written."""

from __future__ import annotations

import json
import re
from typing import Any

_DECODER = json.JSONDecoder()
_SPACE = re.compile(r"[ \t\n\r]*")


def skip_space(text: str, at: int) -> int:
    match = _SPACE.match(text, at)
    return match.end() if match else at


def parse_call(body: str, argument_keys: tuple[str, ...] = ("arguments",)) -> tuple[str, str] | None:
    """(name, arguments as vLLM writes them: json.dumps, non-ASCII kept) of one call's JSON
    text, or None if it is not one."""
    try:
        call = json.loads(body)
    except ValueError:
        return None
    if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call["name"]:
        return None
    key = next((k for k in argument_keys if k in call), None)
    arguments = call[key] if key else {}
    if isinstance(arguments, str):  # some models write the object as a string
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    return call["name"], json.dumps(arguments, ensure_ascii=False)


def members(text: str, at: int) -> tuple[list[tuple[str, Any]], int, int | None]:
    """The whole members of the JSON object opening at text[at], in order; where the last
    of them ends (at + 1 if none); and where the first unfinished one starts (None: the
    object closed). A value is whole once a `,` or `}` follows it (a number at the end
    may go on)."""
    found: list[tuple[str, Any]] = []
    last_end = at + 1
    at = skip_space(text, at + 1)
    while True:
        start = at
        if text.startswith("}", at):
            return found, last_end, None
        try:
            key, at = _DECODER.raw_decode(text, at)
            at = skip_space(text, at)
            if not text.startswith(":", at):
                return found, last_end, start
            value, at = _DECODER.raw_decode(text, skip_space(text, at + 1))
        except ValueError:
            return found, last_end, start
        end, at = at, skip_space(text, at)
        if not isinstance(key, str) or at >= len(text) or text[at] not in ",}":
            return found, last_end, start
        found.append((key, value))
        last_end = end
        if text[at] == "}":
            return found, last_end, None
        at = skip_space(text, at + 1)


def streaming_call(
    text: str, at: int, argument_keys: tuple[str, ...] = ("arguments",)
) -> tuple[str, str] | None:
    """Of the call whose JSON opens at text[at] and is still being written: its name (once
    whole, written first) and its arguments' whole members so far, as json.dumps will
    write them (None until there is one)."""
    if not text.startswith("{", at):
        return None
    top, _, rest = members(text, at)
    if (
        rest is None
        or len(top) != 1
        or top[0][0] != "name"
        or not isinstance(top[0][1], str)
        or not top[0][1]
    ):
        return None
    try:
        key, at = _DECODER.raw_decode(text, rest)
    except ValueError:
        return None
    at = skip_space(text, at)
    if key not in argument_keys or not text.startswith(":", at):
        return None
    at = skip_space(text, at + 1)
    if not text.startswith("{", at):
        return None
    prefix = dumped_prefix(members(text, at)[0])
    return (top[0][1], prefix) if prefix else None


def dumped_prefix(pairs: list[tuple[str, Any]]) -> str:
    """json.dumps(dict(pairs), ensure_ascii=False) but its `}`: the same separators, so
    the whole call's arguments begin with it. "" for none (no pairs, or a key twice: the
    whole call keeps the last one's value, in the first one's place)."""
    if not pairs or len(dict(pairs)) != len(pairs):
        return ""
    return json.dumps(dict(pairs), ensure_ascii=False)[:-1]


def object_end(text: str, at: int, since: int = 0) -> int | None:
    """Just past the JSON object (or array) opening at text[at], by its brackets (strings
    skipped); None while it is open. `since`: how much of `text` was read before, without
    the object closing (it can close only at a bracket after that)."""
    if not any(bracket in text[max(at, since) :] for bracket in "}]"):
        return None
    depth, in_string, escaped = 0, False, False
    for i in range(at, len(text)):
        char = text[i]
        if in_string:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == '"':
                in_string = False
        elif char == '"':
            in_string = True
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return i + 1
    return None


def written_prefix(arguments: str) -> str:
    """Of arguments kept as the model writes them (not rewritten by json.dumps): the text up
    to the end of their last whole member ("" for none)."""
    at = skip_space(arguments, 0)
    if not arguments.startswith("{", at):
        return ""
    pairs, end, _ = members(arguments, at)
    return arguments[:end] if pairs else ""


def is_object(text: str) -> bool:
    try:
        return isinstance(json.loads(text), dict)
    except ValueError:
        return False
