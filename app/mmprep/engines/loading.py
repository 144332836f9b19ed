"""The engine the settings name: `--engine`'s, from registry.py's ENGINES (each an engine
module's `from_settings`), or a user's own class by import path, `--engine-class
package.module:ClassName`.

The latter is how a team puts its own model behind `mmprep worker` without forking mmprep:
the class is imported, made with no arguments, and must have the four methods of the Engine
protocol (mmprep.interface.engine). A fact it does not declare (`accepted_fields`,
`gives_logprobs`) is taken as not said (None), as NothingToStart declares it.
"""

from __future__ import annotations

from ..core.config import Settings
from ..core.imports import import_by_path
from ..interface.engine import ENGINE_FACTS, Engine
from .registry import ENGINES

ENGINE_METHODS = ("start", "stop", "ready", "generate")


def build_engine(settings: Settings) -> Engine:
    """The engine the settings name: --engine-class's, else --engine's (names checked when
    the settings load)."""
    if settings.engine_class is not None:
        return make_engine(settings.engine_class)
    return ENGINES.get(settings.engine)(settings)


def make_engine(path: str) -> Engine:
    """An instance of the engine class at `path`, checked to have the Engine methods, with
    the facts it leaves out set to their defaults."""
    engine = import_by_path(path)()
    missing = [name for name in ENGINE_METHODS if not callable(getattr(engine, name, None))]
    if missing:
        raise ValueError(
            f"{path!r} is not an engine: it lacks {', '.join(missing)} (see mmprep.interface.engine)"
        )
    for fact, default in ENGINE_FACTS.items():
        if not hasattr(engine, fact):
            try:
                setattr(engine, fact, default)
            except AttributeError as error:  # __slots__ without it
                raise ValueError(f"{path!r} has no {fact!r} and takes none: declare it") from error
    return engine
