"""The GPUs of one inventory as the workers of one or more replays hold them: the
``WorkerSupply`` (``plansim.sim.supply``) of each model of a fleet.

A ``Ledger`` counts the GPUs held per system and the fleet's cost per hour. A model's
``member(...)`` supply grants a worker of a pool when its system still has that many GPUs
free and the fleet's cost per hour stays within the budget, else refuses it (first come, first
served: in a shared replay, in event order). Each pool runs on one tier of its system: on
demand, or spot, whose workers are preempted after exponential lifetimes at their GPUs x the
tier's preemptions per GPU-hour, drawn from a stream seeded by the ledger's seed and the
member's index, in the order the member's workers are provisioned. Without ``counts`` the
inventory is unbounded (a model replayed on its own, spot preemptions still drawn).

The ledger records every refused scale-up (when, which model and pool, the serving count
wanted and granted, the constraint that refused it), every preemption and every request a
preempted worker handed back.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from plansim.capacity.variants import Variant
from plansim.fleet.plan import SPOT, Inventory, ModelPlan, Tier
from plansim.roles import Role
from plansim.sim.supply import NEVER, Lease

_MS_PER_HOUR = 3_600_000.0


@dataclass(frozen=True, slots=True)
class PoolSupply:
    """What one pool of a member needs: its GPU system, GPUs per worker and tier."""

    system: str
    gpus_per_worker: int
    tier: Tier


def pool_supplies(
    inventory: Inventory, model: ModelPlan, variant: Variant, tier: str
) -> tuple[tuple[Role, PoolSupply], ...]:
    """Each pool of ``model``'s ``variant`` on ``tier`` (``on_demand`` or ``spot``) of its
    system."""
    layout = variant.layout
    return tuple(
        (
            pool,
            PoolSupply(
                system, g, inventory.spot(system) if tier == SPOT else inventory.on_demand(system)
            ),
        )
        for pool, system, g in zip(layout.names, model.systems(variant), layout.gpus_per_worker)
    )


@dataclass(frozen=True, slots=True)
class Refusal:
    member: int
    pool: str
    at_s: float
    wanted: int
    granted: int
    reason: str

    def to_json(self) -> dict[str, Any]:
        return {
            "at_s": self.at_s,
            "pool": self.pool,
            "wanted": self.wanted,
            "granted": self.granted,
            "reason": self.reason,
        }


class Ledger:
    """See the module docstring. ``counts``: GPUs per system (None: unbounded);
    ``budget_per_hour``: None for none."""

    def __init__(
        self, counts: Mapping[str, int] | None, budget_per_hour: float | None, seed: int
    ) -> None:
        self.counts = dict(counts) if counts is not None else None
        self.budget_per_hour = budget_per_hour
        self.seed = seed
        # Workers held per (system, tier name, price per GPU-hour): GPUs.
        self._held: dict[tuple[str, str, float], int] = {}
        self.refusals: list[Refusal] = []
        self.preemptions: list[tuple[int, str, float]] = []
        self.migrated: dict[int, int] = {}

    def member(self, index: int, pools: Mapping[Role, PoolSupply]) -> MemberSupply:
        return MemberSupply(self, index, dict(pools))

    def held(self, system: str) -> int:
        return sum(n for (s, _, _), n in self._held.items() if s == system)

    def cost_per_hour(self) -> float:
        return sum(n * price for (_, _, price), n in self._held.items())

    def _why_not(self, need: PoolSupply) -> str | None:
        gpus, system = need.gpus_per_worker, need.system
        if self.counts is not None and self.held(system) + gpus > self.counts.get(system, 0):
            return f"inventory.{system}"
        if self.budget_per_hour is not None and (
            self.cost_per_hour() + gpus * need.tier.price_per_gpu_hour
            > self.budget_per_hour * (1 + 1e-12)
        ):
            return "budget_per_hour"
        return None

    def _take(self, need: PoolSupply, sign: int) -> None:
        key = (need.system, need.tier.name, need.tier.price_per_gpu_hour)
        self._held[key] = self._held.get(key, 0) + sign * need.gpus_per_worker


class MemberSupply:
    """One model's ``WorkerSupply`` over a ``Ledger``."""

    def __init__(self, ledger: Ledger, index: int, pools: dict[Role, PoolSupply]) -> None:
        self.ledger = ledger
        self.index = index
        self.pools = pools
        self._rng = np.random.default_rng([ledger.seed, index])
        self._last_refusal: dict[Role, str] = {}

    def acquire(self, pool: Role, now_ms: float) -> Lease | None:
        need = self.pools[pool]
        why = self.ledger._why_not(need)
        if why is not None:
            self._last_refusal[pool] = why
            return None
        self.ledger._take(need, +1)
        tier = need.tier
        rate = tier.preemptions_per_gpu_hour * need.gpus_per_worker
        after = float(self._rng.exponential(_MS_PER_HOUR / rate)) if rate > 0 else NEVER
        return Lease(tier.name, after)

    def release(self, pool: Role, lease: Lease, now_ms: float) -> None:
        self.ledger._take(self.pools[pool], -1)

    def refused(self, pool: Role, wanted: int, granted: int, now_ms: float) -> None:
        self.ledger.refusals.append(
            Refusal(
                self.index,
                pool.value,
                now_ms / 1000.0,
                wanted,
                granted,
                self._last_refusal.get(pool, ""),
            )
        )

    def preempted(self, pool: Role, worker_id: int, now_ms: float) -> None:
        self.ledger.preemptions.append((self.index, pool.value, now_ms / 1000.0))

    def migrated(self, pool: Role, requests: int, now_ms: float) -> None:
        self.ledger.migrated[self.index] = self.ledger.migrated.get(self.index, 0) + requests
