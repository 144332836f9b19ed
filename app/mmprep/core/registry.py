"""The one registry idiom: the named choices of one kind (engines, tool-call parsers,
reasoning parsers), each list kept beside what it registers, in one place that the CLI and the
code that makes the chosen one read.

An entry is registered where it is defined (`@REGISTRY.register` on a class with a `name`,
as each parser's module does; its package imports every module it holds, so adding one is
adding its module), or given with its name when the registry is made (the engines, whose
registry imports their modules). A name is checked without importing anything. Where the
settings check a choice that a room above them registers (`--engine`), they hold its names
and check them with `check_name`, and a test holds the two lists to one. The families, a
library that knows nothing of mmprep's app, keep a registry of their own
(mmprep.families.registry) with the same lookups by name."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable, Mapping
from typing import Any, Generic, TypeVar, cast

T = TypeVar("T")


def check_name(kind: str, name: str | None, names: Iterable[str]) -> str | None:
    """`name` if it is one of `names` (or None), else the ValueError naming the choices."""
    choices = sorted(names)
    if name is not None and name not in choices:
        raise ValueError(f"unknown {kind} {name!r}: choose one of {', '.join(choices)}")
    return name


class Registry(Generic[T]):
    def __init__(self, kind: str, entries: Mapping[str, T] | None = None):
        self.kind = kind  # "tool call parser": how errors name what was asked for
        self._entries: dict[str, T] = dict(entries or {})

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
        """`name` if it is registered (or None), else the ValueError naming the choices."""
        return check_name(self.kind, name, self._entries)

    def get(self, name: str) -> T:
        """The entry of this name."""
        self.check(name)
        return self._entries[name]


def import_modules(package: str, path: Iterable[str]) -> None:
    """Every module of a package, so that each registers its entry."""
    for module in pkgutil.iter_modules(path):
        importlib.import_module(f"{package}.{module.name}")
