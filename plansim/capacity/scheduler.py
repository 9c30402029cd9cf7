"""Running the search's jobs on an executor in rounds, every replay at most once.

A job is a generator that yields the replays it needs next (a list of ``ReplayRequest``) and
receives their results in the same order; its return value is its result. A ``JobSpec`` starts
its job once the jobs it comes ``after`` have finished, with their results. Each round gathers
the next replays of every running job into one executor batch (replays already done are served
from the cache and never run twice), so independent searches share the CPUs while each job's
own logic stays sequential. What a job sees depends only on task results, never on timing, so
the outcome is the same for any executor and worker count.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from plansim.errors import InputError
from plansim.workers.executor import Executor, Task, TaskContext


@dataclass(frozen=True, slots=True)
class ReplayRequest:
    """One replay a job needs. ``key`` names it and identifies equal work across jobs;
    ``kind`` counts it (``static``, ``segment``, ``policy``, ``seed``); ``full`` marks a whole-
    trace replay (dispatched before segment replays, which are shorter)."""

    key: str
    fn: Callable[..., Any]
    args: tuple[Any, ...]
    kind: str
    full: bool = True


Job = Generator[list[ReplayRequest], list[Any], Any]


@dataclass(frozen=True, slots=True)
class JobSpec:
    name: str
    start: Callable[[Mapping[str, Any]], Job]
    after: tuple[str, ...] = ()


@dataclass(slots=True)
class RunStats:
    """Replays run per kind, and rounds (executor batches)."""

    replays: dict[str, int] = field(default_factory=dict)
    rounds: int = 0

    @property
    def total(self) -> int:
        return sum(self.replays.values())


class Runner:
    """Runs job specs to completion on ``executor``; ``on_round(stats)`` after each batch."""

    def __init__(
        self,
        executor: Executor,
        context: TaskContext,
        on_round: Callable[[RunStats], None] | None = None,
    ) -> None:
        self._executor = executor
        self._context = context
        self._on_round = on_round
        self._cache: dict[str, Any] = {}
        self.stats = RunStats()

    def run(self, specs: Sequence[JobSpec]) -> dict[str, Any]:
        names = [spec.name for spec in specs]
        unknown = {dep for spec in specs for dep in spec.after} - set(names)
        if unknown or len(set(names)) != len(names):
            raise ValueError(f"bad job graph: unknown {sorted(unknown)} or repeated names")
        results: dict[str, Any] = {}
        waiting = list(specs)
        active: dict[str, tuple[Job, list[ReplayRequest]]] = {}
        while True:
            self._settle(waiting, active, results)
            if not active:
                break
            self._run_round([req for _, reqs in active.values() for req in reqs])
            for name in list(active):
                job, requests = active.pop(name)
                self._advance(name, job, [self._cache[r.key] for r in requests], active, results)
        return results

    def _settle(
        self,
        waiting: list[JobSpec],
        active: dict[str, tuple[Job, list[ReplayRequest]]],
        results: dict[str, Any],
    ) -> None:
        """Start every job whose dependencies are done and advance every job whose replays are
        all cached, until each running job waits for a replay not yet run."""
        progress = True
        while progress:
            progress = False
            for spec in list(waiting):
                if all(dep in results for dep in spec.after):
                    waiting.remove(spec)
                    job = spec.start({dep: results[dep] for dep in spec.after})
                    self._advance(spec.name, job, None, active, results)
                    progress = True
            for name in list(active):
                job, requests = active[name]
                if all(r.key in self._cache for r in requests):
                    del active[name]
                    self._advance(
                        name, job, [self._cache[r.key] for r in requests], active, results
                    )
                    progress = True

    def _advance(
        self,
        name: str,
        job: Job,
        sent: list[Any] | None,
        active: dict[str, tuple[Job, list[ReplayRequest]]],
        results: dict[str, Any],
    ) -> None:
        try:
            requests = next(job) if sent is None else job.send(sent)
        except StopIteration as stop:
            results[name] = stop.value
            return
        active[name] = (job, list(requests))

    def _run_round(self, requests: list[ReplayRequest]) -> None:
        todo: dict[str, ReplayRequest] = {}
        for req in requests:
            if req.key not in self._cache and req.key not in todo:
                todo[req.key] = req
        # Whole-trace replays first: the short segment replays fill in behind them.
        ordered = sorted(todo.values(), key=lambda r: not r.full)
        tasks = [Task(r.key, r.fn, r.args) for r in ordered]
        outcome = self._executor.run(tasks, self._context)
        if outcome.cancelled:
            raise KeyboardInterrupt
        by_key = outcome.by_key()
        for req in ordered:
            result = by_key.get(req.key)
            if result is None or not result.ok:
                why = result.error if result is not None else "no result"
                raise InputError(f"replay {req.key} failed: {why}")
            self._cache[req.key] = result.value
            self.stats.replays[req.kind] = self.stats.replays.get(req.kind, 0) + 1
        self.stats.rounds += 1
        if self._on_round is not None:
            self._on_round(self.stats)
