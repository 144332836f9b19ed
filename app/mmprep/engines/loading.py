"""A user's engine, named by import path: `package.module:ClassName`.

This is how a team puts its own model behind `mmprep worker` without forking mmprep: the
class is imported, made with no arguments, and must have the four methods of base.Engine.
"""

from __future__ import annotations

from ..core.imports import import_by_path
from .base import Engine

ENGINE_METHODS = ("start", "stop", "ready", "generate")


def make_engine(path: str) -> Engine:
    """An instance of the engine class at `path`, checked to have the Engine methods."""
    engine = import_by_path(path)()
    missing = [name for name in ENGINE_METHODS if not callable(getattr(engine, name, None))]
    if missing:
        raise ValueError(
            f"{path!r} is not an engine: it lacks {', '.join(missing)} (see mmprep.engines.base)"
        )
    return engine
