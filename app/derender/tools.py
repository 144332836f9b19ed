"""Tool-call parsers: the calls a model writes in its answer, as OpenAI `tool_calls`, by
vLLM's `--tool-call-parser` names.

hermes (Qwen2.5, Qwen3, Hermes): `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`;
the arguments as vLLM writes them (json.dumps, non-ASCII kept).
qwen3_coder (Qwen3-Coder, vLLM 0.33's Qwen3 XML format):
`<tool_call><function=NAME><parameter=KEY>VALUE</parameter>...</function></tool_call>`
(the <tool_call> wrapper may be missing); each value loses one wrapping newline and takes
the type the tool's JSON schema gives its parameter (integer, number, boolean, null,
object, array), else stays a string.

A call is held back from its opening tag until it closes (Dynamo's jail), then parsed:
a call comes whole, and one that does not parse, or is cut by the end of the answer,
comes back as content, exactly as the model wrote it: never lost. In an answer with calls,
whitespace at the start and end of the content is dropped, as vLLM strips it (whitespace
is held back until text follows it, so the stream says the same).
"""

from __future__ import annotations

import json
import math
import re
import uuid
from dataclasses import dataclass
from typing import Any

from .markers import earliest, partial_tail

TOOL_PARSERS = ("hermes", "qwen3_coder")
TOOL_START, TOOL_END = "<tool_call>", "</tool_call>"
FUNCTION_START, FUNCTION_END = "<function=", "</function>"


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str  # a JSON object, as text


def new_tool_call_id() -> str:
    """vLLM's tool call ids: chatcmpl-tool- and 16 hex digits."""
    return f"chatcmpl-tool-{uuid.uuid4().int & (2**64 - 1):016x}"


class ToolParser:
    """Finds the calls in one answer's content, piece by piece."""

    # (opening marker, closing marker) pairs; a call runs from one to the other
    blocks: tuple[tuple[str, str], ...] = ((TOOL_START, TOOL_END),)

    def __init__(self, tools: list[dict] | None = None, new_id=new_tool_call_id):
        self._schemas = _parameter_schemas(tools or [])
        self._new_id = new_id
        self._starts = tuple(start for start, _ in self.blocks)
        self._held = ""  # text that could be the start of an opening marker
        self._jail: str | None = None  # the call being written, from its opening marker
        self._end: str = ""
        self._space = ""  # trailing whitespace of the content, held: dropped at the end if calls came
        self._shown = False  # whether any content (other than whitespace) was given out
        self.calls = 0

    @property
    def start_marker(self) -> str:
        return self.blocks[0][0]

    def feed(self, text: str) -> tuple[str, list[ToolCall]]:
        if self._jail is None and not self._held and "<" not in text:  # the common case
            return self._content(text), []
        content: list[str] = []
        calls: list[ToolCall] = []
        text = self._held + text
        self._held = ""
        while text:
            if self._jail is not None:
                searched = max(0, len(self._jail) - len(self._end) + 1)  # the end may straddle pieces
                self._jail += text
                text = ""
                at = self._jail.find(self._end, searched)
                if at < 0:
                    break
                raw, text = self._jail[: at + len(self._end)], self._jail[at + len(self._end) :]
                self._jail = None
                self._close(raw, True, content, calls)
                continue
            found = earliest(text, self._starts)
            if found is None:
                keep = partial_tail(text, self._starts)
                content.append(self._content(text[: len(text) - keep]))
                self._held = text[len(text) - keep :]
                break
            at, marker = found
            content.append(self._content(text[:at]))
            self._jail, self._end = "", dict(self.blocks)[marker]
            text = text[at:]
        return "".join(content), calls

    def finish(self) -> tuple[str, list[ToolCall]]:
        content: list[str] = []
        calls: list[ToolCall] = []
        if self._jail is not None:
            raw, self._jail = self._jail, None
            self._close(raw, False, content, calls)
        content.append(self._content(self._held))
        self._held = ""
        if not self.calls:
            content.append(self._space)  # no call came: the whitespace was the answer's
        self._space = ""
        return "".join(content), calls

    def _close(self, raw: str, closed: bool, content: list[str], calls: list[ToolCall]) -> None:
        parsed = self.parse(raw, closed)
        if not parsed:
            content.append(self._content(raw))  # not a call after all: the model's text
            return
        if not self._shown:
            self._space = ""  # whitespace before the first call is not content
        for name, arguments in parsed:
            calls.append(ToolCall(self._new_id(), name, arguments))
        self.calls += len(parsed)

    def _content(self, text: str) -> str:
        text = self._space + text
        kept = text.rstrip()
        self._space = text[len(kept) :]
        self._shown = self._shown or bool(kept)
        return kept

    def parse(self, raw: str, closed: bool) -> list[tuple[str, str]]:
        """The (name, arguments) of the calls in `raw`, from its opening marker to its
        closing one (`closed`) or to the end of the answer; [] if it is not a call."""
        raise NotImplementedError


class HermesToolParser(ToolParser):
    def parse(self, raw: str, closed: bool) -> list[tuple[str, str]]:
        body = raw[len(TOOL_START) :]
        if closed:
            body = body[: -len(TOOL_END)]
        try:
            call = json.loads(body)
        except ValueError:
            return []
        if not isinstance(call, dict) or not isinstance(call.get("name"), str) or not call["name"]:
            return []
        arguments = call.get("arguments", {})
        if isinstance(arguments, str):  # some models write the object as a string
            try:
                arguments = json.loads(arguments)
            except ValueError:
                return []
        if not isinstance(arguments, dict):
            return []
        return [(call["name"], json.dumps(arguments, ensure_ascii=False))]


_FUNCTION = re.compile(r"<function=([^>]*)>(.*?)</function>", re.DOTALL)
_PARAMETER = re.compile(r"<parameter=([^>]*)>(.*?)(?:</parameter>|(?=<parameter=)|$)", re.DOTALL)


class Qwen3CoderToolParser(ToolParser):
    blocks = ((TOOL_START, TOOL_END), (FUNCTION_START, FUNCTION_END))

    def parse(self, raw: str, closed: bool) -> list[tuple[str, str]]:
        calls = []
        rest = raw
        for match in _FUNCTION.finditer(raw):
            name = match.group(1).strip()
            if not name:
                return []
            arguments = {}
            for parameter in _PARAMETER.finditer(match.group(2)):
                key = parameter.group(1).strip()
                value = _unwrap(parameter.group(2))
                arguments[key] = _coerce(value, self._schemas.get(name, {}).get(key))
            calls.append((name, json.dumps(arguments, ensure_ascii=False)))
            rest = rest.replace(match.group(0), "", 1)
        if not calls:
            return []
        # Nothing but the wrapper and whitespace may be left: else it was not (only) calls.
        leftover = rest.replace(TOOL_START, "", 1).replace(TOOL_END, "", 1).strip()
        return [] if leftover else calls


def _unwrap(value: str) -> str:
    """One leading and one trailing newline are the template's, not the value's."""
    value = value.removeprefix("\n")
    value = value.removesuffix("\n")
    return value


def _parameter_schemas(tools: list[dict]) -> dict[str, dict[str, Any]]:
    """tool name -> parameter name -> its JSON schema, from the request's tools."""
    schemas = {}
    for tool in tools:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            parameters = function.get("parameters") or {}
            properties = parameters.get("properties") if isinstance(parameters, dict) else None
            schemas[function["name"]] = properties if isinstance(properties, dict) else {}
    return schemas


def _schema_types(schema: Any) -> set[str]:
    if not isinstance(schema, dict):
        return set()
    kind = schema.get("type")
    types = (
        {kind}
        if isinstance(kind, str)
        else {t for t in kind if isinstance(t, str)}
        if isinstance(kind, list)
        else set()
    )
    for key in ("anyOf", "oneOf"):
        for option in schema.get(key) or []:
            types |= _schema_types(option)
    return {
        "integer" if t == "int" else "number" if t == "float" else "boolean" if t == "bool" else t
        for t in types
    }


def _coerce(value: str, schema: Any) -> Any:
    """A parameter's text as its schema's type, in vLLM's order of preference (null,
    integer, number, boolean, object, array, string); the text itself if none fits."""
    types = _schema_types(schema)
    if "null" in types and value.lower() == "null":
        return None
    if "integer" in types:
        try:
            return int(value)
        except ValueError:
            pass
    if "number" in types:
        try:
            return int(value)
        except ValueError:
            pass
        try:
            number = float(value)
            if math.isfinite(number):
                return int(number) if number == int(number) else number
        except ValueError:
            pass
    if "boolean" in types:
        if value.strip().lower() in ("true", "1"):
            return True
        if value.strip().lower() in ("false", "0"):
            return False
    for kind, python in (("object", dict), ("array", list)):
        if kind in types:
            try:
                parsed = json.loads(value)
            except ValueError:
                continue
            if isinstance(parsed, python):
                return parsed
    return value


def make_tool_parser(name: str, tools: list[dict] | None = None, new_id=new_tool_call_id) -> ToolParser:
    parsers = {"hermes": HermesToolParser, "qwen3_coder": Qwen3CoderToolParser}
    if name not in parsers:
        raise ValueError(f"unknown tool call parser {name!r}: choose one of {', '.join(TOOL_PARSERS)}")
    return parsers[name](tools, new_id)
