"""Reasoning parsers: the model's thinking apart from its answer, by vLLM's
`--reasoning-parser` names. base.py is the state machine they share; each other module is
one format, registered in REGISTRY under its name (every module here is imported, so a new
format is a new module)."""

from __future__ import annotations

from ...core.registry import Registry, import_modules
from ..options import OutputOptions
from .base import ReasoningParser

REGISTRY: Registry[type[ReasoningParser]] = Registry("reasoning parser")
import_modules(__name__, __path__)


def make_reasoning_parser(
    name: str, options: OutputOptions, prompt_text: str = "", tool_start: str | None = None
) -> ReasoningParser:
    return REGISTRY.get(name).start(options, prompt_text, tool_start)


__all__ = ["REGISTRY", "ReasoningParser", "make_reasoning_parser"]
