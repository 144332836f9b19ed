"""A user's class by import path, `package.module:ClassName`: how a team names its own
engine without forking mmprep."""

from __future__ import annotations

import importlib


def import_by_path(path: str):
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
        raise ValueError(f"{path!r} is not a class")  # settings report ValueErrors
    return engine_class
