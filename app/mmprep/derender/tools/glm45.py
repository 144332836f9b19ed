"""glm45 (GLM-4.5, 4.6, 4.7; vLLM's Glm47MoeParser under the name glm45):
`<tool_call>NAME<arg_key>KEY</arg_key><arg_value>VALUE</arg_value>...</tool_call>`, one call
a block. A value is kept as written and takes the type the tool's JSON schema gives its
parameter (tools/schema.py); the call must name one of the request's tools, as vLLM
validates it: a block with another comes back as content."""

from __future__ import annotations

import json
import re
from typing import Any

from . import REGISTRY
from .base import TaggedToolParser
from .json_calls import dumped_prefix
from .schema import coerce, parameter_schemas

TOOL_START, TOOL_END = "<tool_call>", "</tool_call>"
ARG_KEY_START = "<arg_key>"
_ARGUMENT = re.compile(r"<arg_key>(.*?)</arg_key>\s*<arg_value>(.*?)</arg_value>", re.DOTALL)


@REGISTRY.register
class Glm45ToolParser(TaggedToolParser):
    name = "glm45"
    blocks = ((TOOL_START, TOOL_END),)
    reasoning_ends_on = TOOL_START
    certain_after = ">"  # a parameter is whole at its closing tag

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._schemas = parameter_schemas(self.tools)

    def parse(self, raw: str, closed: bool) -> list[tuple[str, str]]:
        if not closed:
            return []
        body = raw[len(TOOL_START) : -len(TOOL_END)]
        name, arguments = self._call(body)
        # Nothing but the name, the arguments and whitespace: else it was not (only) a call.
        if name not in self._schemas or _ARGUMENT.sub("", body[body.find(name) + len(name) :]).strip():
            return []
        return [(name, json.dumps(dict(arguments), ensure_ascii=False))]

    def streaming(self, jail: str) -> list[tuple[str, str]]:
        body = jail[len(TOOL_START) :]
        if ARG_KEY_START not in body:
            return []  # the name is not over yet
        name, arguments = self._call(body)
        prefix = dumped_prefix(arguments)
        return [(name, prefix)] if name in self._schemas and prefix else []

    def _call(self, body: str) -> tuple[str, list[tuple[str, Any]]]:
        """The name (up to the first <arg_key>) and the whole arguments of a call's body."""
        at = body.find(ARG_KEY_START)
        name = (body if at < 0 else body[:at]).strip()
        schemas = self._schemas.get(name, {})
        arguments = [
            (key.strip(), coerce(value, schemas.get(key.strip()))) for key, value in _ARGUMENT.findall(body)
        ]
        return name, arguments
