"""Engine scheduler policies, keyed by the engine's backend name (``EngineArgs.engine_type``).

The seam is described in ``plansim.sim.schedulers.base``; each backend is one module, which also
declares its engine keys (``BackendKeys``). ``backend_blocks()`` and ``backend_engine_knobs()``
collect them for the engine args and the engine-config loader.
"""

from __future__ import annotations

import functools
from typing import Any

from plansim.params import Param, params_of
from plansim.registry import Registry
from plansim.sim.schedulers.base import BackendKeys, PassBuilder, PrefixMatch, SchedulerPolicy

SCHEDULERS: Registry[type] = Registry(
    "engine backend",
    {
        "vllm": "plansim.sim.schedulers.vllm:VllmScheduler",
        "sglang": "plansim.sim.schedulers.sglang:SglangScheduler",
        "trtllm": "plansim.sim.schedulers.trtllm:TrtllmScheduler",
    },
)


def make_scheduler(args: Any) -> SchedulerPolicy:
    """A fresh policy for one rank of an engine with ``args`` (``EngineArgs``)."""
    return SCHEDULERS.get(args.engine_type)(args)


@functools.cache
def backend_blocks() -> dict[str, tuple[Param, ...]]:
    """The knobs of each backend that has an engine block of its own, by backend name."""
    return {name: params_of(cls.Knobs) for name, cls in SCHEDULERS.items() if params_of(cls.Knobs)}


@functools.cache
def backend_engine_knobs() -> dict[str, tuple[Param, tuple[str, ...]]]:
    """Each top-level engine key some backend reads alone, with the backends that read it; two
    backends declaring one key must declare it alike."""
    out: dict[str, tuple[Param, tuple[str, ...]]] = {}
    for name, cls in SCHEDULERS.items():
        for knob in params_of(cls.EngineKnobs):
            seen, owners = out.get(knob.name, (knob, ()))
            if seen != knob:
                raise TypeError(
                    f"engine key {knob.name} of backend {name} differs from another "
                    "backend's declaration"
                )
            out[knob.name] = (knob, (*owners, name))
    return out


__all__ = [
    "SCHEDULERS",
    "BackendKeys",
    "PassBuilder",
    "PrefixMatch",
    "SchedulerPolicy",
    "backend_blocks",
    "backend_engine_knobs",
    "make_scheduler",
]
