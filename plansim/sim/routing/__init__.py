"""Routing policies, keyed by the deployment's ``router.mode``.

The seam is described in ``plansim.sim.routing.base``; each policy is one module declaring its
knobs once. ``router_knobs(mode)`` lists a policy's knobs, ``all_router_knobs()`` every
policy's (one entry per name), for the deployment model, the command line and retune;
``router_mode(spelling)`` is the registry name a spelling of ``router.mode`` stands for.
"""

from __future__ import annotations

import functools
from typing import Any

from plansim.params import Param
from plansim.registry import Registry
from plansim.roles import Role
from plansim.sim.routing.base import RankLoad, Route, RoutingPolicy, recurring_blocks
from plansim.sim.seeded_draws import Draws

ROUTERS: Registry[type] = Registry(
    "router mode",
    {
        "round_robin": "plansim.sim.routing.round_robin:RoundRobin",
        "random": "plansim.sim.routing.random_choice:RandomChoice",
        "kv_router": "plansim.sim.routing.kv_router:KvRouter",
    },
)


@functools.cache
def _spellings() -> dict[str, str]:
    return {alias: mode for mode, policy in ROUTERS.items() for alias in policy.aliases}


def router_mode(value: Any) -> Any:
    """The registry name of a ``router.mode`` spelling: hyphens for underscores
    (``round-robin``) or a policy's ``aliases`` (``kv``); anything else unchanged."""
    if not isinstance(value, str) or value in ROUTERS:
        return value
    name = value.replace("-", "_")
    return name if name in ROUTERS else _spellings().get(name, value)


def router_knobs(mode: str) -> tuple[Param, ...]:
    """The knobs policy ``mode`` declares."""
    return ROUTERS.get(mode).knobs()


@functools.cache
def all_router_knobs() -> dict[str, Param]:
    """Every registered policy's knobs by name; two policies that share a knob must declare it
    alike."""
    out: dict[str, Param] = {}
    for mode, policy in ROUTERS.items():
        for knob in policy.knobs():
            seen = out.setdefault(knob.name, knob)
            if seen != knob:
                raise TypeError(
                    f"router knob {knob.name} of {mode} differs from another policy's declaration"
                )
    return out


def make_router(
    config: Any, block_size: int, rng: Draws, *, pool: Role, max_batched_tokens: int = 1 << 62
) -> RoutingPolicy:
    """The router of one pool: policy ``config.mode`` with the config's knob values;
    ``rng``: the seeded draws (one stream shared by the pools' routers: a
    ``plansim.sim.seeded_draws.SeededDraws`` or a numpy ``Generator``); ``max_batched_tokens``
    is the pool's per-rank token budget (a queue's busy rule)."""
    return ROUTERS.get(config.mode)(
        config, block_size, rng, pool=pool, max_batched_tokens=max_batched_tokens
    )


__all__ = [
    "ROUTERS",
    "RankLoad",
    "Route",
    "RoutingPolicy",
    "all_router_knobs",
    "make_router",
    "recurring_blocks",
    "router_knobs",
    "router_mode",
]
