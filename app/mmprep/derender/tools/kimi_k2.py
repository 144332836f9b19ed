"""kimi_k2 (Kimi K2), as vLLM's KimiK2Parser reads it:
`<|tool_calls_section_begin|><|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{...}
<|tool_call_end|>...<|tool_calls_section_end|>`. The header is the call's id (Kimi's
templates read it back in the next turn, so it goes out as the call's id, as vLLM sends it)
and names the function before its `:N`; the arguments are kept as written and must be a
JSON object, else the section comes back as content."""

from __future__ import annotations

import re
from dataclasses import replace

from ..options import OutputOptions
from . import REGISTRY
from .base import TaggedToolParser
from .json_calls import is_object, written_prefix

SECTION_START, SECTION_END = "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>"
CALL_START, ARGUMENTS_START, CALL_END = (
    "<|tool_call_begin|>",
    "<|tool_call_argument_begin|>",
    "<|tool_call_end|>",
)
_CALL = re.compile(
    rf"{re.escape(CALL_START)}(.*?){re.escape(ARGUMENTS_START)}(.*?){re.escape(CALL_END)}", re.DOTALL
)
_OPEN_CALL = re.compile(rf"{re.escape(CALL_START)}(.*?){re.escape(ARGUMENTS_START)}", re.DOTALL)
_HEADER = re.compile(r".+:\d+")


@REGISTRY.register
class KimiK2ToolParser(TaggedToolParser):
    name = "kimi_k2"
    blocks = ((SECTION_START, SECTION_END),)
    reasoning_ends_on = SECTION_START

    @classmethod
    def adjust(cls, options: OutputOptions) -> OutputOptions:
        # as vLLM's: the section's tokens are special in Kimi's vocabulary
        return replace(options, skip_special_tokens=False)

    def parse(self, raw: str, closed: bool) -> list[tuple[str, str]]:
        calls = [(header.strip(), arguments.strip()) for header, arguments in _CALL.findall(raw)]
        if not calls or not all(_HEADER.fullmatch(h) and is_object(a) for h, a in calls):
            return []
        return calls

    def streaming(self, jail: str) -> list[tuple[str, str]]:
        found = []
        for match in _OPEN_CALL.finditer(jail):
            end = jail.find(CALL_END, match.end())
            header = match.group(1).strip()
            prefix = written_prefix(jail[match.end() : end if end >= 0 else len(jail)].lstrip())
            if not _HEADER.fullmatch(header) or not prefix:
                break  # the calls after it wait for it
            found.append((header, prefix))
        return found

    def identify(self, name: str) -> tuple[str, str]:
        """`functions.get_weather:0`: that id, and get_weather."""
        return name, name.split(":")[0].removeprefix("functions.")
