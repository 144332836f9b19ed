"""deepseek_v31 (DeepSeek-V3.1), as vLLM's DeepSeekV31ToolParser reads it:
`<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}<｜tool▁call▁end｜>...<｜tool▁calls▁end｜>`.
The arguments are kept as the model wrote them (vLLM does not rewrite them), and must be
a JSON object: a block with one that is not comes back as content."""

from __future__ import annotations

import re

from . import REGISTRY
from .base import TaggedToolParser
from .json_calls import is_object, written_prefix

CALLS_START, CALLS_END = "<｜tool▁calls▁begin｜>", "<｜tool▁calls▁end｜>"
CALL_START, SEPARATOR, CALL_END = "<｜tool▁call▁begin｜>", "<｜tool▁sep｜>", "<｜tool▁call▁end｜>"
_CALL = re.compile(rf"{CALL_START}(.*?){SEPARATOR}(.*?){CALL_END}", re.DOTALL)
_OPEN_CALL = re.compile(rf"{CALL_START}(.*?){SEPARATOR}", re.DOTALL)


@REGISTRY.register
class DeepSeekV31ToolParser(TaggedToolParser):
    name = "deepseek_v31"
    blocks = ((CALLS_START, CALLS_END),)
    reasoning_ends_on = CALLS_START

    def parse(self, raw: str, closed: bool) -> list[tuple[str, str]]:
        calls = [(name, arguments) for name, arguments in _CALL.findall(raw)]
        if not calls or not all(name and is_object(arguments) for name, arguments in calls):
            return []
        return calls

    def streaming(self, jail: str) -> list[tuple[str, str]]:
        found = []
        for match in _OPEN_CALL.finditer(jail):
            end = jail.find(CALL_END, match.end())
            prefix = written_prefix(jail[match.end() : end if end >= 0 else len(jail)])
            if not match.group(1) or not prefix:
                break  # the calls after it wait for it
            found.append((match.group(1), prefix))
        return found
