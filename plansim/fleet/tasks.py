"""The fleet's task functions beside capacity's static replays: module-level and pure apart
from reading the trace files in the run folder, so every executor gets the same results.

- ``replay_member_task``: one model on its own, its workers from an unbounded ``Ledger`` (spot
  workers preempted, seeded): a spot candidate, or an autoscaled model without the others (what
  refused scale-ups cost it);
- ``replay_fleet_task``: every model on one virtual clock, their workers from one ``Ledger``
  of the inventory and the budget (the autoscaled fleet).

Both return compact ``MemberReplay`` records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from plansim.capacity.tasks import WORKER_SERIES_STEP_S, FullReplay
from plansim.fleet.ledger import Ledger, PoolSupply, Refusal
from plansim.retune.tasks import load_window
from plansim.roles import Role
from plansim.sim.deployment import Deployment
from plansim.sim.summary import good_mask, without_host_keys
from plansim.workers.executor import TaskContext


@dataclass(frozen=True, slots=True)
class MemberTask:
    """One model in a replay: its trace file, its deployment (worker counts set), each pool's
    GPU supply, and its planner block (None: static)."""

    trace_path: str
    deployment: Deployment
    pools: tuple[tuple[Role, PoolSupply], ...]
    planner: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class MemberReplay:
    """One model's replay: ``full`` as capacity's static replays (one segment), its GPUs
    provisioned every ``WORKER_SERIES_STEP_S`` (``(time_s, GPUs)``), the scale-ups refused,
    its workers preempted and the requests they handed back."""

    full: FullReplay
    gpu_series: tuple[tuple[float, float], ...]
    refusals: tuple[Refusal, ...]
    preemptions: int
    migrated: int


def replay_member_task(
    context: TaskContext, member: MemberTask, seed: int, index: int
) -> MemberReplay:
    """``member`` on its own (unbounded GPUs), preemptions seeded by ``(seed, index)``."""
    del context
    ledger = Ledger(None, None, seed)
    return _replay(((index, member),), ledger)[0]


def replay_fleet_task(
    context: TaskContext,
    members: Sequence[MemberTask],
    counts: Mapping[str, int],
    budget_per_hour: float | None,
    seed: int,
) -> tuple[MemberReplay, ...]:
    """Every member on one clock, their workers from one ledger of ``counts`` GPUs per system
    and ``budget_per_hour``; member ``k``'s preemptions are seeded by ``(seed, k)``."""
    del context
    return _replay(tuple(enumerate(members)), Ledger(counts, budget_per_hour, seed))


def _replay(members: Sequence[tuple[int, MemberTask]], ledger: Ledger) -> tuple[MemberReplay, ...]:
    from plansim import api

    runs = []
    for index, member in members:
        supply = ledger.member(index, dict(member.pools))
        setup = api.setup(member.deployment, member.planner)
        runs.append((load_window(member.trace_path), setup, supply))
    if len(runs) == 1:
        workload, setup, supply = runs[0]
        results = [api.replay(workload, setup, supply=supply)]
    else:
        results = api.replay_shared(runs)
    out = []
    for (index, member), result in zip(members, results):
        good = int(good_mask(result.requests, member.deployment.sla).sum())
        full = FullReplay(
            summary=without_host_keys(result.summary),
            segment_good=(good,),
            end_ms=float(result.summary["duration_ms"]),
            scaling_events=len(result.scaling_events),
        )
        out.append(
            MemberReplay(
                full=full,
                gpu_series=_gpu_series(result.timeseries, dict(member.pools)),
                refusals=tuple(r for r in ledger.refusals if r.member == index),
                preemptions=sum(1 for p in ledger.preemptions if p[0] == index),
                migrated=ledger.migrated.get(index, 0),
            )
        )
    return tuple(out)


def _gpu_series(
    timeseries: Any, pools: Mapping[Role, PoolSupply]
) -> tuple[tuple[float, float], ...]:
    """GPUs provisioned (ready + starting + draining workers x GPUs each), summed over pools,
    every ``WORKER_SERIES_STEP_S`` seconds of the replay's time series."""
    if timeseries is None or not len(timeseries):
        return ()
    frame = timeseries[timeseries["time_s"] % WORKER_SERIES_STEP_S == 0]
    gpus = {pool.value: supply.gpus_per_worker for pool, supply in pools.items()}
    per_row = (frame["ready"] + frame["starting"] + frame["draining"]) * frame["pool"].map(
        gpus
    ).astype(np.float64)
    total = per_row.groupby(frame["time_s"]).sum()
    return tuple((float(t), float(g)) for t, g in total.items())
