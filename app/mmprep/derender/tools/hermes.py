"""hermes (Qwen2.5, Qwen3, Hermes): `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`,
as vLLM's Hermes2ProToolParser reads it: the calls of the whole answer at once, so that one
whose JSON does not parse (malformed, or cut by max_tokens) makes the answer content."""

from __future__ import annotations

from dataclasses import replace

from ..options import OutputOptions
from . import REGISTRY
from .base import TaggedToolParser
from .json_calls import parse_call, skip_space, streaming_call

TOOL_START, TOOL_END = "<tool_call>", "</tool_call>"


@REGISTRY.register
class HermesToolParser(TaggedToolParser):
    name = "hermes"
    blocks = ((TOOL_START, TOOL_END),)
    reasoning_ends_on = TOOL_START
    keeps_space_before_call = True
    reads_whole_answer = True

    @classmethod
    def adjust(cls, options: OutputOptions) -> OutputOptions:
        # as vLLM: some models mark <tool_call> special, and a decode that skipped it
        # would leave the parser nothing to find
        return replace(options, skip_special_tokens=False)

    def parse(self, raw: str, closed: bool) -> list[tuple[str, str]]:
        body = raw[len(TOOL_START) :]
        call = parse_call(body[: -len(TOOL_END)] if closed else body)
        return [call] if call else []

    def streaming(self, jail: str) -> list[tuple[str, str]]:
        found = streaming_call(jail, skip_space(jail, len(TOOL_START)))
        return [found] if found else []
