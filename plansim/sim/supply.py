"""Where a replay's workers come from: a ``WorkerSupply`` grants each new worker its GPUs, or
refuses them, and may give them for a limited time (spot capacity).

Without a supply (the default) every worker is granted at once and kept until it is removed.
With one, the host asks ``acquire(pool, now_ms)`` before it provisions a worker (the
deployment's initial workers at 0 included) and hands the ``Lease`` back with
``release(pool, lease, now_ms)`` when the worker is gone (removed, drained or preempted). A
lease whose ``preempt_after_ms`` is finite preempts its worker that long after it was
provisioned: the worker leaves at once (its GPUs are released then), each of its ranks stops at
the end of the pass it has in flight, its requests are re-routed through the entry pool with the
tokens they already emitted appended to their prompts (Dynamo's request migration), and a
replacement is provisioned, which serves after the engine's ``startup_time``.
``refused(pool, wanted, granted, now_ms)`` reports a scale-up the supply cut short,
``preempted(pool, worker_id, now_ms)`` each preemption and ``migrated(pool, requests, now_ms)``
the requests a preempted rank handed back.

The supply draws its own preemption times (seeded), so the host needs no random stream for
them. Times are virtual ms.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from plansim.roles import Role

NEVER = float("inf")


@dataclass(frozen=True, slots=True)
class Lease:
    """A worker's GPUs as granted: their ``tier`` (``on_demand`` or ``spot``) and, for spot
    capacity, when the worker is preempted (ms after it was provisioned; inf: never)."""

    tier: str = "on_demand"
    preempt_after_ms: float = NEVER


class WorkerSupply(Protocol):
    """See the module docstring."""

    def acquire(self, pool: Role, now_ms: float) -> Lease | None:
        """The lease of one more worker of ``pool``, or None when it is refused."""
        ...

    def release(self, pool: Role, lease: Lease, now_ms: float) -> None: ...

    def refused(self, pool: Role, wanted: int, granted: int, now_ms: float) -> None:
        """A scale-up of ``pool`` to ``wanted`` serving workers stopped at ``granted``."""
        ...

    def preempted(self, pool: Role, worker_id: int, now_ms: float) -> None: ...

    def migrated(self, pool: Role, requests: int, now_ms: float) -> None: ...
