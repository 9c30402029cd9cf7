"""``run``: replay a fleet plan's job graph (``jobs``) on an executor, every replay at most
once (capacity's ``Runner``), and assemble the answer (``result``).

Each model's trace is written once into the run's folder; a closed-loop trace (sessions, agent
graphs) is replayed open loop, as ``plansim capacity`` does (a note says so). Every model's
trace starts at 0 on the virtual clock of the autoscaled fleet.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Any

from plansim.capacity.scheduler import Runner, RunStats
from plansim.errors import InputError
from plansim.fleet.jobs import FleetJobs
from plansim.fleet.plan import FleetPlan
from plansim.fleet.result import FleetResult, assemble
from plansim.workers.executor import Executor, TaskContext


def run(
    plan: FleetPlan,
    workloads: Sequence[Any],
    *,
    executor: Executor | None = None,
    max_parallel: int | None = None,
    on_round: Callable[[RunStats], None] | None = None,
) -> FleetResult:
    """Search every model of ``plan`` on its workload (in model order), choose the fleet and,
    with planners, replay it autoscaled. Without ``executor`` a spawn pool of
    ``max_parallel`` workers (default: the CPU count) is started and closed."""
    if len(workloads) != len(plan.models):
        raise ValueError(f"{len(plan.models)} models but {len(workloads)} workloads")
    notes = list(plan.notes)
    started = time.perf_counter()
    own_executor = executor is None
    if executor is None:
        from plansim.workers.pool import SpawnPool

        executor = SpawnPool(max_parallel or os.cpu_count() or 1)
    try:
        with tempfile.TemporaryDirectory(prefix="plansim-fleet-") as folder:
            from plansim.retune.tasks import save_window

            paths = []
            for m, workload in zip(plan.models, workloads):
                if len(workload) == 0:
                    raise InputError(
                        f"{m.name}: the trace has no requests", field=f"models.{m.index}.trace"
                    )
                if getattr(workload, "graph", None) is not None:
                    workload = workload.open_loop()
                    notes.append(
                        f"{m.name}: the trace's sessions were replayed open loop: "
                        "every request at its recorded arrival"
                    )
                path = os.path.join(folder, f"trace-{m.index}.npz")
                save_window(path, workload)
                paths.append(path)
            jobs = FleetJobs(plan, paths, [len(w) for w in workloads])
            runner = Runner(executor, TaskContext(folder), on_round)
            results = runner.run(jobs.jobs())
    finally:
        if own_executor:
            executor.close()
    return assemble(jobs, results, runner.stats, notes, time.perf_counter() - started)
