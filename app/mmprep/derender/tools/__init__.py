"""Tool-call parsers: the calls a model writes in its answer, as OpenAI `tool_calls`, by
vLLM's `--tool-call-parser` names. base.py is the held-back state machine they share; each
other module is one format, registered in REGISTRY under its name (every module here is
imported, so a new format is a new module)."""

from __future__ import annotations

from collections.abc import Callable

from ...core.registry import Registry, import_modules
from .base import ToolCallDelta, ToolParser, new_tool_call_id

REGISTRY: Registry[type[ToolParser]] = Registry("tool call parser")
import_modules(__name__, __path__)


def make_tool_parser(
    name: str,
    tools: list[dict] | None = None,
    new_id: Callable[[], str] = new_tool_call_id,
    partial: bool = False,
) -> ToolParser:
    return REGISTRY.get(name)(tools, new_id, partial)


__all__ = ["REGISTRY", "ToolCallDelta", "ToolParser", "make_tool_parser", "new_tool_call_id"]
