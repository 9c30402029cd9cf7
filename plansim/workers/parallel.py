"""``parallel_map(fn, tasks, jobs)``: ``[fn(*task) for task in tasks]`` on a spawn pool, for work
that needs no executor of its own (``predict compare``'s backtests)."""

from __future__ import annotations

import tempfile
from collections.abc import Callable, Sequence
from typing import Any

from plansim.workers.executor import Task, TaskContext
from plansim.workers.pool import SpawnPool


def parallel_map(
    fn: Callable[..., Any],
    tasks: Sequence[tuple[Any, ...]],
    jobs: int,
    on_done: Callable[[], None] | None = None,
) -> list[Any]:
    """``[fn(*task) for task in tasks]`` on up to ``jobs`` worker processes of a ``SpawnPool``
    (workers that die with us, never see Ctrl-C, and are killed when the map ends or is
    interrupted), in task order. ``fn`` must be a module-level function. ``on_done()`` is
    called as each task ends (progress displays)."""
    with SpawnPool(jobs) as pool:
        outcome = pool.run(
            [Task(str(i), _call, (fn, *task)) for i, task in enumerate(tasks)],
            TaskContext(tempfile.gettempdir()),
            on_result=None if on_done is None else lambda _: on_done(),
        )
    failed = [r for r in outcome.results if not r.ok]
    if failed or len(outcome.results) != len(tasks):
        raise RuntimeError(
            f"parallel task {failed[0].key} failed: {failed[0].error}"
            if failed
            else "parallel map ended early"
        )
    return [r.value for r in outcome.results]


def _call(context: Any, fn: Callable[..., Any], *args: Any) -> Any:
    return fn(*args)
