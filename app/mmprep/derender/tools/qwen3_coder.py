"""qwen3_coder (Qwen3-Coder, vLLM 0.33's Qwen3 XML format):
`<tool_call><function=NAME><parameter=KEY>VALUE</parameter>...</function></tool_call>`
(the <tool_call> wrapper may be missing). Each value loses one wrapping newline and takes
the type the tool's JSON schema gives its parameter (tools/schema.py), else stays a string.
A call cut by the end of the answer (max_tokens) is read as vLLM 0.33's parser engine reads
it: a call with the parameters whose end was written (none: `{}`), its name as far as it
was written."""

from __future__ import annotations

import json
import re
from typing import Any

from . import REGISTRY
from .base import TaggedToolParser
from .json_calls import dumped_prefix
from .schema import coerce, parameter_schemas

TOOL_START, TOOL_END = "<tool_call>", "</tool_call>"
FUNCTION_START, FUNCTION_END = "<function=", "</function>"
_FUNCTION = re.compile(r"<function=([^>]*)>(.*?)</function>", re.DOTALL)
_OPEN_FUNCTION = re.compile(r"<function=([^>]*)>")
_CUT_FUNCTION = re.compile(r"<function=([^>]*)>?(.*)\Z", re.DOTALL)  # the last one, cut
_PARAMETER = re.compile(r"<parameter=([^>]*)>(.*?)(?:</parameter>|(?=<parameter=)|\Z)", re.DOTALL)


@REGISTRY.register
class Qwen3CoderToolParser(TaggedToolParser):
    name = "qwen3_coder"
    blocks = ((TOOL_START, TOOL_END), (FUNCTION_START, FUNCTION_END))
    reasoning_ends_on = TOOL_START
    certain_after = ">"  # a parameter is whole at its closing tag

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._schemas = parameter_schemas(self.tools)

    def parse(self, raw: str, closed: bool) -> list[tuple[str, str]]:
        calls = []
        rest = raw
        for match in _FUNCTION.finditer(raw):
            name = match.group(1).strip()
            if not name:
                return []
            arguments = dict(self._parameters(name, match.group(2), whole_only=False))
            calls.append((name, json.dumps(arguments, ensure_ascii=False)))
            rest = rest.replace(match.group(0), "", 1)
        cut = None if closed else _CUT_FUNCTION.search(rest)
        if cut is not None:  # the end came inside a function: its whole parameters
            name = cut.group(1).strip()
            if not name:
                return []
            arguments = dict(self._parameters(name, cut.group(2), whole_only=True))
            calls.append((name, json.dumps(arguments, ensure_ascii=False)))
            rest = rest[: cut.start()]
        if not calls:
            return []
        # Nothing but the wrapper and whitespace may be left: else it was not (only) calls.
        leftover = rest.replace(TOOL_START, "", 1).replace(TOOL_END, "", 1).strip()
        return [] if leftover else calls

    def streaming(self, jail: str) -> list[tuple[str, str]]:
        found = []
        for match in _OPEN_FUNCTION.finditer(jail):
            name = match.group(1).strip()
            end = jail.find(FUNCTION_END, match.end())
            body = jail[match.end() : end if end >= 0 else len(jail)]
            prefix = dumped_prefix(self._parameters(name, body, whole_only=end < 0))
            if not name or not prefix:
                break  # the calls after it wait for it
            found.append((name, prefix))
        return found

    def _parameters(self, name: str, body: str, whole_only: bool) -> list[tuple[str, Any]]:
        """The (key, typed value) of each parameter in a function's body; `whole_only`: of
        an open body, only those whose end was written (the last one may go on)."""
        schemas = self._schemas.get(name, {})
        found = []
        for parameter in _PARAMETER.finditer(body):
            if (
                whole_only
                and parameter.end() == len(body)
                and not parameter.group(0).endswith("</parameter>")
            ):
                break
            key = parameter.group(1).strip()
            found.append((key, coerce(_unwrap(parameter.group(2)), schemas.get(key))))
        return found


def _unwrap(value: str) -> str:
    """One leading and one trailing newline are the template's, not the value's."""
    return value.removeprefix("\n").removesuffix("\n")
