"""The executor interface: run a batch of picklable tasks, get their results.

A retune sweep is a few dependent batches (read the window, pre-sweep the predictors, then
prepare the predictor and replay the candidates), a capacity search a graph of them; each batch
goes through ``Executor.run``. Implementations: ``workers.pool.SpawnPool`` (the default, one
machine), ``workers.ray_executor.RayExecutor`` and ``InProcessExecutor`` (below). All must run
the same task functions on the same arguments and return the same values, so a task's result
never depends on which worker ran it.

Task functions are module-level, pure functions of their arguments (picklable by reference); a
task's only side effects are files under the folder it is handed (``TaskContext.sweep_dir``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable


@dataclass(frozen=True, slots=True)
class TaskContext:
    """What every task receives besides its arguments: the sweep folder for its files (window
    data, temporary model files). The folder exists for the whole sweep and is removed after it."""

    sweep_dir: str


@dataclass(frozen=True, slots=True)
class Task:
    """One unit of candidate work: ``fn(context, *args)``. ``key`` is unique within a batch and
    names the task in results and errors."""

    key: str
    fn: Callable[..., Any]
    args: tuple[Any, ...] = ()


@dataclass(frozen=True, slots=True)
class TaskResult:
    """The outcome of one task. ``ok`` False: ``error`` says why (the task raised, or its worker
    died); ``value`` is then None. ``wall_s`` is the task's run time inside the worker, ``cpu_s``
    the CPU time it used there (0 when the executor does not measure it)."""

    key: str
    ok: bool
    value: Any = None
    error: str | None = None
    wall_s: float = 0.0
    cpu_s: float = 0.0


@dataclass(frozen=True, slots=True)
class BatchOutcome:
    """Results in task order. ``timed_out`` / ``cancelled``: the batch was cut short; tasks that did
    not finish have no entry in ``results``."""

    results: tuple[TaskResult, ...]
    timed_out: bool = False
    cancelled: bool = False
    stats: dict[str, float] = field(default_factory=dict)

    def by_key(self) -> dict[str, TaskResult]:
        return {r.key: r for r in self.results}


ResultCallback = Callable[[TaskResult], None]


@dataclass(frozen=True, slots=True)
class ExecutorBackend:
    """One ``--backend`` choice (``workers.backends.EXECUTORS``): ``about`` says where tasks run
    (for the option's help), ``build(max_parallel, address)`` returns the ``Executor``;
    ``takes_address`` says whether it accepts ``--ray-address`` (a cluster to connect to)."""

    about: str
    build: Callable[[int, str | None], Executor]
    takes_address: bool = False


@runtime_checkable
class Executor(Protocol):
    """Runs batches of tasks on worker processes.

    - ``run(tasks, context, timeout_s, on_result)`` blocks until every task has a result, the
      timeout (wall seconds, None = no limit) expires, or ``cancel()`` is called from another
      thread. Tasks are dispatched in list order (earlier tasks start first). ``on_result``, when
      given, is called in the calling thread with each ``TaskResult`` as it arrives (completion
      order), before ``run`` returns: a caller can keep each result the moment it exists
      (``workers.journal``). On timeout or cancel every worker is killed; the executor starts
      fresh workers on the next ``run``.
    - A task that raises, or whose worker dies, fails alone (``TaskResult.ok`` False); the other
      tasks of the batch still run, and a dead worker is replaced.
    - ``close()`` kills every worker and waits for them; the executor cannot be used afterwards.
    """

    max_parallel: int

    def run(
        self,
        tasks: Sequence[Task],
        context: TaskContext,
        timeout_s: float | None = None,
        on_result: ResultCallback | None = None,
    ) -> BatchOutcome: ...

    def cancel(self) -> None: ...

    def close(self) -> None: ...


def run_serially(
    tasks: Sequence[Task], context: TaskContext, on_result: ResultCallback | None = None
) -> BatchOutcome:
    """Run tasks one after the other in this process: the reference against which executors are
    checked (same functions, same arguments, so the same values)."""
    import time

    results = []
    for task in tasks:
        start, cpu = time.perf_counter(), time.thread_time()
        try:
            value = task.fn(context, *task.args)
        except Exception as exc:
            ok, value, error = False, None, describe_error(exc)
        else:
            ok, error = True, None
        results.append(
            TaskResult(
                task.key, ok, value, error, time.perf_counter() - start, time.thread_time() - cpu
            )
        )
        if on_result is not None:
            on_result(results[-1])
    return BatchOutcome(tuple(results))


def describe_error(exc: BaseException) -> str:
    """One line naming the error type and message (what a decision record keeps)."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")


class InProcessExecutor:
    """An ``Executor`` that runs every task in the calling process, one after the other (the
    serial baseline of ``bench/sweep.py``; no timeout, no isolation)."""

    max_parallel = 1

    def run(
        self,
        tasks: Sequence[Task],
        context: TaskContext,
        timeout_s: float | None = None,
        on_result: ResultCallback | None = None,
    ) -> BatchOutcome:
        return run_serially(tasks, context, on_result)

    def cancel(self) -> None:
        """Nothing to stop between tasks: a serial batch runs to its end."""

    def close(self) -> None:
        """No workers to kill."""
