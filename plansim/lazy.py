"""Package namespaces that import their members on first use, so that importing one light
submodule (``plansim.sim.routing``, ``plansim.planner_core.predictors.factory``) does not load
the whole package (pandas)."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any


def lazy_getattr(namespace: dict[str, Any], exports: Mapping[str, str]) -> Callable[[str], Any]:
    """A module ``__getattr__``: ``exports`` maps a public name to the module defining it; the
    first access imports that module and caches the value in ``namespace``."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {namespace['__name__']!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        namespace[name] = value
        return value

    return __getattr__
