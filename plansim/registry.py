"""``Registry``: the one table of an extension point (engine schedulers, routing policies, load
predictors, timing models, scaling policies, trace formats, folder reports, executor backends),
name -> ``"module:attribute"``.

Entries are imported on first use, so naming a heavy extension (one that pulls in statsmodels
or prophet) costs nothing until it is chosen. Adding an extension is one module and one line in
its registry's table.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterator, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def load_target(target: str) -> Any:
    """The object a ``"module:attribute"`` target names (its module imported now)."""
    module_name, _, attr = target.partition(":")
    return getattr(importlib.import_module(module_name), attr)


class Registry(Generic[T]):
    """Names of one extension point, in registration order. ``what`` names the kind in
    errors (``"engine backend"``)."""

    def __init__(self, what: str, entries: Mapping[str, str]) -> None:
        self.what = what
        self._targets = dict(entries)
        self._loaded: dict[str, T] = {}

    def names(self) -> tuple[str, ...]:
        return tuple(self._targets)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self._targets  # a user's list is no name

    def __iter__(self) -> Iterator[str]:
        return iter(self._targets)

    def get(self, name: str) -> T:
        """The registered object; ``KeyError`` (naming the known ones) for an unknown name."""
        loaded = self._loaded.get(name)
        if loaded is not None:
            return loaded
        target = self._targets.get(name)
        if target is None:
            raise KeyError(self.unknown(name))
        obj: Any = load_target(target)
        self._loaded[name] = obj
        return obj

    def items(self) -> list[tuple[str, T]]:
        """Every entry, loaded."""
        return [(name, self.get(name)) for name in self._targets]

    def unknown(self, name: object) -> str:
        """The message for a name that is not registered."""
        return f"unknown {self.what} {name!r} (known: {', '.join(self._targets)})"
