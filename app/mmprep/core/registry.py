"""The one registry idiom: the named choices of one kind (engines, tool-call parsers,
reasoning parsers), each list kept in one place that the CLI, the settings and the code that
makes the chosen one all read.

An entry is registered where it is defined (`@REGISTRY.register` on a class with a `name`,
as each parser's module does; its package imports every module it holds, so adding one is
adding its module), or named lazily as `"package.module:attribute"`, imported only when it is
chosen (the engines: the transformers engine needs torch). A name is checked without
importing anything. The families, a library that knows nothing of mmprep's app, keep a
registry of their own (mmprep.families.registry) with the same lookups by name."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Mapping
from typing import Any, Generic, TypeVar, cast

from .imports import import_by_path

T = TypeVar("T")


class Registry(Generic[T]):
    def __init__(self, kind: str, lazy: Mapping[str, str] | None = None):
        self.kind = kind  # "tool call parser": how errors name what was asked for
        self._entries: dict[str, T | str] = dict(lazy or {})  # a str is "module:attribute", not yet imported

    def register(self, entry: T) -> T:
        """A class decorator: `entry` under its `name`."""
        name: str = cast(Any, entry).name
        if name in self._entries:
            raise ValueError(f"two {self.kind}s named {name!r}")
        self._entries[name] = entry
        return entry

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._entries))

    def check(self, name: str | None) -> str | None:
        """`name` if it is registered (or None), else the ValueError naming the choices;
        nothing is imported."""
        if name is not None and name not in self._entries:
            raise ValueError(f"unknown {self.kind} {name!r}: choose one of {', '.join(self.names())}")
        return name

    def get(self, name: str) -> T:
        """The entry of this name, imported now if it was named lazily."""
        self.check(name)
        entry = self._entries[name]
        if isinstance(entry, str):
            entry = self._entries[name] = cast(T, import_by_path(entry))
        return entry


def import_modules(package: str, path: Iterable[str]) -> None:
    """Every module of a package, so that each registers its entry."""
    for module in pkgutil.iter_modules(path):
        importlib.import_module(f"{package}.{module.name}")
