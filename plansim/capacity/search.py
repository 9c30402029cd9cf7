"""``search``: the cheapest static deployment that meets a goodput target on a trace, the
hindsight lower bound on any scaling policy, and planner policies side by side.

``prepare`` (``plan``) validates everything that does not need the trace; ``run`` replays the
plan's job graph (``jobs``) on an executor (the retune spawn pool by default, or Ray), every
replay at most once, and assembles the answer (``assemble``).

Columns of ``CapacityResult.points`` (one row per replay): ``kind`` (``static``: a count of the
static search, ``seed``: a chosen point at another router seed, ``segment``: a segment replay of
the bound, ``schedule``: the bound's schedule replayed, ``policy``: a planner replay),
``variant`` and one column per search key, ``mode``, ``num_workers`` / ``num_prefill_workers`` /
``num_decode_workers`` (a policy's or the schedule's starting counts), ``gpus``, ``seed``,
``segment`` (-1 for whole-trace replays), ``policy`` ("" unless a policy), ``requests``,
``good_requests``, ``goodput_ratio``, ``meets_target``, ``within_budget``, ``gpu_hours``,
``cost`` and the latency percentiles (NaN for segment rows), ``scaling_events``.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable
from typing import Any

from plansim.capacity.assemble import Assembly
from plansim.capacity.jobs import RunJobs
from plansim.capacity.plan import Plan, prepare
from plansim.capacity.result import CapacityResult
from plansim.capacity.scheduler import Runner, RunStats
from plansim.capacity.segments import cut, replay_arrivals_ms
from plansim.errors import InputError
from plansim.sim.deployment import Deployment
from plansim.workers.executor import Executor, TaskContext


def search(
    workload: Any,
    deployment: Deployment,
    target: float = 0.95,
    *,
    executor: Executor | None = None,
    max_parallel: int | None = None,
    on_round: Callable[[RunStats], None] | None = None,
    **options: Any,
) -> CapacityResult:
    """The capacity answer for ``workload`` on ``deployment`` (see ``prepare`` for
    ``options``: ``search``, ``planner_configs``, ``default_policies``, ``max_gpu_budget``,
    ``segment_s``, ``lead_in_s``, ``seeds``, ``objective``, ``max_bound_rounds``)."""
    plan = prepare(deployment, target, **options)
    return run(plan, workload, executor=executor, max_parallel=max_parallel, on_round=on_round)


def run(
    plan: Plan,
    workload: Any,
    *,
    executor: Executor | None = None,
    max_parallel: int | None = None,
    on_round: Callable[[RunStats], None] | None = None,
) -> CapacityResult:
    """Replay ``plan`` on ``workload``. Without ``executor`` a spawn pool of ``max_parallel``
    workers (default: the CPU count) is started and closed."""
    if len(workload) == 0:
        raise InputError("the trace has no requests", field="TRACE")
    notes = list(plan.notes)
    if getattr(workload, "graph", None) is not None:
        # Segments and their lead-ins cut sessions apart; every replay runs the same open loop.
        workload = workload.open_loop()
        notes.append(
            "the trace's sessions were replayed open loop: every request at its "
            "recorded arrival, not released by the turn before it"
        )
    started = time.perf_counter()
    arrivals = replay_arrivals_ms(workload.arrival_ms, plan.deployment.arrival_speedup_ratio)
    segments = cut(arrivals, plan.segment_s)
    own_executor = executor is None
    if executor is None:
        from plansim.workers.pool import SpawnPool

        executor = SpawnPool(max_parallel or os.cpu_count() or 1)
    try:
        with tempfile.TemporaryDirectory(prefix="plansim-capacity-") as folder:
            from plansim.retune.tasks import save_window

            trace_path = os.path.join(folder, "trace.npz")
            save_window(trace_path, workload)
            jobs = RunJobs(plan, segments, trace_path)
            runner = Runner(executor, TaskContext(folder), on_round)
            results = runner.run(jobs.jobs())
    finally:
        if own_executor:
            executor.close()
    return Assembly(jobs).result(
        results, runner.stats, arrivals, time.perf_counter() - started, notes
    )
