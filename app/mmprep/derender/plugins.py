"""The registry a family of parsers (tool-call, reasoning) is kept in: each format's module
registers its class under vLLM's name for it, and its package imports every module it holds,
so adding a parser is adding its module. The CLI and the service read the names from here."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable
from typing import ClassVar, Generic, Protocol, TypeVar


class Named(Protocol):
    name: ClassVar[str]


T = TypeVar("T", bound=Named)


class Registry(Generic[T]):
    def __init__(self, kind: str):
        self.kind = kind  # "tool call parser": how errors name what was asked for
        self._classes: dict[str, type[T]] = {}

    def register(self, cls: type[T]) -> type[T]:
        """A class decorator: `cls` under its `name`."""
        if cls.name in self._classes:
            raise ValueError(f"two {self.kind}s named {cls.name!r}")
        self._classes[cls.name] = cls
        return cls

    def names(self) -> tuple[str, ...]:
        return tuple(sorted(self._classes))

    def get(self, name: str) -> type[T]:
        if name not in self._classes:
            raise ValueError(f"unknown {self.kind} {name!r}: choose one of {', '.join(self.names())}")
        return self._classes[name]

    def check(self, name: str | None) -> str | None:
        """`name` if it is registered (or None), else the ValueError naming the choices."""
        if name is not None:
            self.get(name)
        return name


def import_modules(package: str, path: Iterable[str]) -> None:
    """Every module of a package, so that each registers its parser."""
    for module in pkgutil.iter_modules(path):
        importlib.import_module(f"{package}.{module.name}")
