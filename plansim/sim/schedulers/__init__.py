"""Engine scheduler policies, keyed by the engine's backend name (``EngineArgs.engine_type``).

The seam is described in ``plansim.sim.schedulers.base``; each backend is one module.
"""

from __future__ import annotations

from typing import Any

from plansim.registry import Registry
from plansim.sim.schedulers.base import PassBuilder, PrefixMatch, SchedulerPolicy

SCHEDULERS: Registry[type] = Registry("engine backend", {
    "vllm": "plansim.sim.schedulers.vllm:VllmScheduler",
    "sglang": "plansim.sim.schedulers.sglang:SglangScheduler",
    "trtllm": "plansim.sim.schedulers.trtllm:TrtllmScheduler",
})


def make_scheduler(args: Any) -> SchedulerPolicy:
    """A fresh policy for one rank of an engine with ``args`` (``EngineArgs``)."""
    return SCHEDULERS.get(args.engine_type)(args)


__all__ = ["SCHEDULERS", "PassBuilder", "PrefixMatch", "SchedulerPolicy", "make_scheduler"]
