"""A user's engine, named by import path: `package.module:ClassName`.

This is how a team puts its own model behind `mmprep worker` without forking mmprep: the
class is imported, made with no arguments, and must have the four methods of base.Engine.
"""

from __future__ import annotations

import importlib

from .base import Engine

ENGINE_METHODS = ("start", "stop", "ready", "generate")


def load_engine_class(path: str):
    """The class (or any callable that makes an engine) at `path`; ValueError says why not."""
    module_name, colon, attribute = path.partition(":")
    if not colon or not module_name or not attribute:
        raise ValueError(f"{path!r} is not of the form package.module:ClassName")
    try:
        module = importlib.import_module(module_name)
    except Exception as error:  # the user's module may fail in any way while importing
        raise ValueError(f"cannot import {module_name!r}: {type(error).__name__}: {error}") from error
    engine_class = getattr(module, attribute, None)
    if engine_class is None:
        raise ValueError(f"module {module_name!r} has no {attribute!r}")
    if not callable(engine_class):
        raise ValueError(f"{path!r} is not a class")  # noqa: TRY004 - settings report ValueErrors
    return engine_class


def make_engine(path: str) -> Engine:
    """An instance of the engine class at `path`, checked to have the Engine methods."""
    engine = load_engine_class(path)()
    missing = [name for name in ENGINE_METHODS if not callable(getattr(engine, name, None))]
    if missing:
        raise ValueError(f"{path!r} is not an engine: it lacks {', '.join(missing)} (see app/workers/base.py)")
    return engine
