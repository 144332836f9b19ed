"""Engines: what turns a prepared request into text. See base.Engine."""

from .base import Engine, EngineError, EngineOutput
from .echo import EchoEngine

__all__ = ["EchoEngine", "Engine", "EngineError", "EngineOutput", "build_engine"]


def build_engine(settings) -> Engine:
    """The engine the settings name (the names are checked when settings load)."""
    if settings.engine == "echo":
        return EchoEngine(settings.echo_chars_per_token)
    raise ValueError(f"unknown engine {settings.engine!r}")
