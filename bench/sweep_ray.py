"""Spawn pool vs Ray (local instance) for multi-window sweeps: wall time and per-task overhead.

    python bench/sweep_ray.py [--windows 4] [--candidates 16] [--max-parallel 2] [--work-ms 200]
    python bench/sweep_ray.py --config examples/retune.yaml [--windows 4] [--max-parallel 2]

Without ``--config``: ``windows`` x ``candidates`` synthetic tasks that each burn ``work-ms`` of
CPU, submitted the way ``plansim retune windows`` submits replays (spawn pool: one window after
another; Ray: several windows at once, one thread each). With ``--config``: the real thing,
``retune_runs.batch.score_windows`` on the config's first ``windows`` windows, each with the
config's candidates (the 16 replays of the issue need a 14-point grid).

Printed per backend: wall time; task time (the sum of the tasks' own run times); the ideal wall
time on ``max-parallel`` CPUs (task time / CPUs); per-task overhead measured by the executor
(submit -> result, minus the task's own run time, mean); and the idle CPU time per task
((wall x CPUs - task time) / tasks), which also counts start-up and the stragglers at window ends.
Ray's start-up (``ray.init``) is timed separately and not in the wall time.
"""

from __future__ import annotations

import argparse
import math
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from typing import Any

from plansim.workers.executor import BatchOutcome, Executor, Task, TaskContext


def burn(context: TaskContext, window: int, candidate: int, work_s: float) -> int:
    """A synthetic candidate replay: ``work_s`` of CPU."""
    end = time.perf_counter() + work_s
    spins = 0
    while time.perf_counter() < end:
        spins += 1
    return window * 1000 + candidate


def synthetic(executor: Executor, windows: int, candidates: int, work_s: float) -> dict[str, float]:
    """Every window is one batch; batches run one at a time unless the executor is thread-safe,
    then as many at once as ``retune_runs.batch.windows_in_flight`` would sweep."""
    lanes = 1
    if getattr(executor, "thread_safe", False):
        lanes = min(windows, math.ceil(executor.max_parallel / candidates) + 1)
    outcomes: list[BatchOutcome] = []
    lock = threading.Lock()
    next_window = iter(range(windows))

    def lane(context: TaskContext) -> None:
        while True:
            with lock:
                k = next(next_window, None)
            if k is None:
                return
            tasks = [Task(f"w{k}c{c}", burn, (k, c, work_s)) for c in range(candidates)]
            outcome = executor.run(tasks, context)
            with lock:
                outcomes.append(outcome)

    with tempfile.TemporaryDirectory(prefix="plansim-bench-") as sweep_dir:
        context = TaskContext(sweep_dir)
        started = time.perf_counter()
        threads = [threading.Thread(target=lane, args=(context,)) for _ in range(lanes)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        wall_s = time.perf_counter() - started
    results = [r for o in outcomes for r in o.results]
    assert all(r.ok for r in results) and len(results) == windows * candidates
    overheads = [o.stats["overhead_s_mean"] for o in outcomes]
    return _figures(
        wall_s, [r.wall_s for r in results], sum(overheads) / len(overheads), executor.max_parallel
    )


class _Recording:
    """The executor, keeping every batch outcome (the sweep reports no per-task figures)."""

    def __init__(self, executor: Executor) -> None:
        self._executor = executor
        self.max_parallel = executor.max_parallel
        self.thread_safe = getattr(executor, "thread_safe", False)
        self.outcomes: list[BatchOutcome] = []
        self._lock = threading.Lock()

    def run(self, tasks: Any, context: TaskContext, timeout_s: float | None = None) -> BatchOutcome:
        outcome = self._executor.run(tasks, context, timeout_s)
        with self._lock:
            self.outcomes.append(outcome)
        return outcome

    def cancel(self) -> None:
        self._executor.cancel()

    def close(self) -> None:
        self._executor.close()


def real(executor: Executor, config: str, windows: int) -> dict[str, float]:
    """``score_windows`` on the config's first ``windows`` windows."""
    from plansim.commands.retune_windows import load_window_plans
    from plansim.retune_runs.batch import score_windows

    _, plans = load_window_plans(config, first=0, last=windows - 1)
    recording = _Recording(executor)
    started = time.perf_counter()
    results = score_windows(plans, recording)
    wall_s = time.perf_counter() - started
    assert all(r.report.outcome != "failed" for r in results), [r.report.reason for r in results]
    tasks = [r for o in recording.outcomes for r in o.results]
    # Task-weighted mean of the executor's per-batch overhead.
    overhead_s = sum(o.stats["overhead_s_mean"] * len(o.results) for o in recording.outcomes)
    figures = _figures(
        wall_s, [r.wall_s for r in tasks], overhead_s / len(tasks), executor.max_parallel
    )
    replay_s = [
        r.wall_s for o in recording.outcomes for r in o.results if r.key.startswith("replay")
    ]
    figures["replays"] = float(len(replay_s))
    figures["mean_replay_s"] = sum(replay_s) / len(replay_s)
    return figures


def _figures(wall_s: float, task_s: list[float], overhead_s: float, cpus: int) -> dict[str, float]:
    busy_s = sum(task_s)
    return {
        "wall_s": wall_s,
        "task_s": busy_s,
        "ideal_s": busy_s / cpus,
        "mean_task_s": busy_s / len(task_s),
        "overhead_ms": overhead_s * 1000.0,
        "idle_per_task_ms": (wall_s * cpus - busy_s) / len(task_s) * 1000.0,
    }


def _timed(label: str, make: Callable[[], Executor], run: Callable[[Executor], dict[str, Any]]):
    started = time.perf_counter()
    executor = make()
    startup_s = time.perf_counter() - started
    try:
        figures = run(executor)
    finally:
        executor.close()
    print(
        f"{label:<6} start-up {startup_s:6.2f} s  "
        + "  ".join(
            f"{k} {v:.3f}" if not k.endswith("_ms") else f"{k} {v:.1f}" for k, v in figures.items()
        )
    )
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--windows", type=int, default=4)
    parser.add_argument("--candidates", type=int, default=16)
    parser.add_argument("--max-parallel", type=int, default=2)
    parser.add_argument("--work-ms", type=float, default=200.0)
    parser.add_argument("--config", help="a retune config: bench real window sweeps")
    args = parser.parse_args(argv)

    from plansim.workers.pool import SpawnPool
    from plansim.workers.ray_executor import RayExecutor

    if args.config:

        def run(ex: Executor) -> dict[str, Any]:
            return real(ex, args.config, args.windows)

        what = f"{args.windows} windows of {args.config}"
    else:

        def run(ex: Executor) -> dict[str, Any]:
            return synthetic(ex, args.windows, args.candidates, args.work_ms / 1000.0)

        what = f"{args.windows} windows x {args.candidates} tasks of {args.work_ms:g} ms CPU"
    print(f"sweep_ray: {what}, max_parallel {args.max_parallel}")
    spawn = _timed("spawn", lambda: SpawnPool(args.max_parallel), run)
    ray = _timed("ray", lambda: RayExecutor(args.max_parallel), run)
    print(f"ray/spawn wall: {ray['wall_s'] / spawn['wall_s']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
