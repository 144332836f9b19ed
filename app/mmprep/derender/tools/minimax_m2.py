"""minimax_m2 (MiniMax-M2), as vLLM's MinimaxM2Parser reads it:
`<minimax:tool_call><invoke name="NAME"><parameter name="KEY">VALUE</parameter>...</invoke>
...</minimax:tool_call>` (an <invoke> without the wrapper too; names quoted with " or ', or
bare). Each <invoke> is one call; a value is kept as written (the whitespace around it is
the value's) and takes the type the tool's JSON schema gives its parameter
(tools/schema.py). A call must name one of the request's tools, as vLLM validates it: a
block with another comes back as content."""

from __future__ import annotations

import json
import re
from typing import Any

from . import REGISTRY
from .base import TaggedToolParser
from .json_calls import dumped_prefix
from .schema import coerce, parameter_schemas

TOOL_START, TOOL_END = "<minimax:tool_call>", "</minimax:tool_call>"
INVOKE_START, INVOKE_END = "<invoke name=", "</invoke>"
_NAME = r"""(?:"([^"]*)"|'([^']*)'|([^>\s]+))\s*>"""
_OPEN_INVOKE = re.compile(rf"<invoke\s+name\s*=\s*{_NAME}")
_PARAMETER = re.compile(
    rf"<\s*parameter\s+name\s*=\s*{_NAME}(.*?)(?:<\s*/\s*parameter\s*>|(?=<\s*parameter\s+name\s*=))",
    re.DOTALL,
)


@REGISTRY.register
class MinimaxM2ToolParser(TaggedToolParser):
    name = "minimax_m2"
    blocks = ((TOOL_START, TOOL_END), (INVOKE_START, INVOKE_END))
    reasoning_ends_on = TOOL_START
    certain_after = ">"  # a parameter is whole at its closing tag

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self._schemas = parameter_schemas(self.tools)

    def parse(self, raw: str, closed: bool) -> list[tuple[str, str]]:
        calls, leftover = [], raw
        for name, body, whole in self._invokes(raw):
            if not whole or name not in self._schemas:
                return []
            calls.append((name, json.dumps(dict(self._parameters(name, body)), ensure_ascii=False)))
            leftover = leftover.replace(body, "", 1)
        # Nothing but the tags and whitespace may be left: else it was not (only) calls.
        leftover = re.sub(rf"{_OPEN_INVOKE.pattern}|{INVOKE_END}|{TOOL_START}|{TOOL_END}", "", leftover)
        return [] if leftover.strip() or not calls else calls

    def streaming(self, jail: str) -> list[tuple[str, str]]:
        found = []
        for name, body, whole in self._invokes(jail):
            prefix = dumped_prefix(self._parameters(name, body if whole else _whole_parameters(body)))
            if name not in self._schemas or not prefix:
                break  # the calls after it wait for it
            found.append((name, prefix))
        return found

    def _invokes(self, text: str) -> list[tuple[str, str, bool]]:
        """(name, body, whether its </invoke> came) of each <invoke> in `text`, in order."""
        found = []
        for match in _OPEN_INVOKE.finditer(text):
            end = text.find(INVOKE_END, match.end())
            name = next(group for group in match.groups() if group is not None).strip()
            found.append((name, text[match.end() : end if end >= 0 else len(text)], end >= 0))
            if end < 0:
                break
        return found

    def _parameters(self, name: str, body: str) -> list[tuple[str, Any]]:
        schemas = self._schemas.get(name, {})
        found = []
        for parameter in _PARAMETER.finditer(body):
            key = next(group for group in parameter.groups()[:3] if group is not None).strip()
            if key:
                found.append(
                    (
                        key,
                        coerce(parameter.group(4), schemas.get(key))
                        if schemas.get(key)
                        else parameter.group(4),
                    )
                )
        return found


def _whole_parameters(body: str) -> str:
    """Of an open <invoke>'s body, the part whose parameters are certain: up to the last
    </parameter> (a value still being written may go on)."""
    at = body.rfind("</parameter>")
    return body[: at + len("</parameter>")] if at >= 0 else ""
