"""``RayExecutor``: the retune ``Executor`` on a Ray cluster, or a local Ray instance.

Runs the same module-level task functions on the same arguments as ``SpawnPool``, so a task's
value does not depend on the backend. Differences that follow from Ray:

- Window data is shipped once: an argument object that several tasks of a group share (the same
  object, not an equal one) is ``ray.put`` once per group and handed to the tasks by reference.
- A task whose worker dies is retried once by Ray (``max_retries=1``), then fails alone. A task
  that raises is not retried: it fails alone, as in the spawn pool.
- ``run_groups`` runs several batches at once (the windows of ``plansim retune windows``), each
  with its own timeout. A group's clock starts when its first task is submitted; at most
  ``max_parallel`` tasks are in flight, so a submitted task is a running task and queueing does
  not eat into a later window's timeout. At the timeout the group's outstanding tasks are
  cancelled with ``ray.cancel(force=True)`` (their worker processes are killed); the other
  groups go on.
- ``cancel()`` (from another thread) and Ctrl-C cancel every outstanding task the same way and
  wait until Ray reports them ended, so no task keeps running.

Without an address the executor starts a local Ray instance with ``max_parallel`` CPUs, bound to
loopback, dashboard off, and shuts it down on ``close()``. With an address it connects to that
cluster, uses all of its CPUs, and leaves the cluster running on ``close()``; every node needs
plansim installed. A Ray instance already started in this process (by a test, a notebook) is
reused and left running.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from plansim.errors import InputError
from plansim.retune.executor import BatchOutcome, Task, TaskContext, TaskResult, describe_error

INSTALL_HINT = "pip install 'plansim[ray]'"
WORKER_NICENESS = 10
# How often the driver loop checks cancel() and the group deadlines while tasks run (s).
POLL_INTERVAL_S = 0.05
# How long to wait for force-cancelled tasks to end before returning anyway (s).
CANCEL_GRACE_S = 30.0
# Scalars are cheap to send with every task; only shared objects go to the object store.
_INLINE_TYPES = (type(None), bool, int, float, complex, str, bytes)


@dataclass(frozen=True, slots=True)
class TaskGroup:
    """A batch of tasks with its own timeout (wall seconds, None = no limit); ``key`` names it
    (for example the window index). Task keys are unique within a group."""

    key: str
    tasks: tuple[Task, ...]
    timeout_s: float | None = None


def import_ray(*, local: bool) -> ModuleType:
    """Import Ray, or raise ``InputError`` with one line saying how to install it.

    For a local instance, Ray must bind its services to loopback: on Linux Ray resolves
    127.0.0.1 to the host's network address unless cluster mode is off, and that switch is read
    once, when Ray is imported.
    """
    if local and "ray" not in sys.modules:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    try:
        import ray
    except ImportError:
        raise InputError(
            f"the ray backend needs Ray, which is not installed; install it with: {INSTALL_HINT}",
            field="--backend",
        ) from None
    return ray


class RayExecutor:
    """An ``Executor`` on Ray; see the module docstring.

    Not thread-safe except ``cancel()``: one thread calls ``run``/``run_groups``/``close``.
    """

    def __init__(self, max_parallel: int, address: str | None = None) -> None:
        if max_parallel < 1:
            raise ValueError("max_parallel must be at least 1")
        ray = import_ray(local=address is None)
        self._ray = ray
        self._owns_ray = False
        if not ray.is_initialized():
            init_options: dict[str, Any] = {
                "logging_level": logging.ERROR,
                "log_to_driver": False,
            }
            if address is None:
                init_options |= {"num_cpus": max_parallel, "include_dashboard": False}
            else:
                init_options["address"] = address
            try:
                ray.init(**init_options)
            except (ConnectionError, ValueError, RuntimeError) as exc:
                raise InputError(
                    f"cannot connect to the Ray cluster at {address}: {describe_error(exc)}",
                    field="--ray-address",
                ) from None
            self._owns_ray = True
        cluster_cpus = int(ray.cluster_resources().get("CPU", 0))
        self.max_parallel = cluster_cpus if cluster_cpus > 0 else max_parallel
        self._remote = ray.remote(_run_task).options(
            num_cpus=1, max_retries=1, retry_exceptions=False
        )
        self._cancel_event = threading.Event()
        self._closed = False
        self.objects_put = 0

    # -- public API -------------------------------------------------------------------------

    def run(
        self, tasks: Sequence[Task], context: TaskContext, timeout_s: float | None = None
    ) -> BatchOutcome:
        return self.run_groups([TaskGroup("batch", tuple(tasks), timeout_s)], context)[0]

    def run_groups(self, groups: Sequence[TaskGroup], context: TaskContext) -> list[BatchOutcome]:
        """Run every task of every group as an independent Ray task; one outcome per group, in
        group order, results in task order. Tasks are submitted group by group, in task order."""
        if self._closed:
            raise RuntimeError("the executor is closed")
        self._cancel_event.clear()
        run = _GroupRun(self._ray, self._remote, groups, context, self.max_parallel)
        try:
            cancelled = run.drive(self._cancel_event)
        except BaseException:
            # Ctrl-C (or a bug) in the driver: nothing we submitted may keep running.
            run.cancel_all()
            raise
        if cancelled:
            run.cancel_all()
        self.objects_put += run.objects_put
        return run.outcomes(cancelled)

    def cancel(self) -> None:
        """Stop the running batch from another thread; ``run`` cancels its tasks and returns."""
        self._cancel_event.set()

    def close(self) -> None:
        """Shut down the local Ray instance this executor started; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns_ray:
            self._ray.shutdown()

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(slots=True)
class _InFlight:
    group: int
    index: int
    submitted_at: float


class _GroupRun:
    """The driver side of one ``run_groups`` call: submission with backpressure, collection,
    per-group deadlines and cancellation."""

    def __init__(
        self,
        ray: ModuleType,
        remote: Any,
        groups: Sequence[TaskGroup],
        context: TaskContext,
        capacity: int,
    ) -> None:
        self._ray = ray
        self._remote = remote
        self._groups = groups
        self._context = context
        self._capacity = capacity
        self._queue = deque((g, i) for g, group in enumerate(groups) for i in range(len(group.tasks)))
        self._inflight: dict[Any, _InFlight] = {}
        self._results: list[dict[int, TaskResult]] = [{} for _ in groups]
        self._overhead_s: list[list[float]] = [[] for _ in groups]
        self._started_at: dict[int, float] = {}
        self._ended_at: dict[int, float] = {}
        self._deadline: dict[int, float] = {}
        self._timed_out: set[int] = set()
        self._shared_refs: dict[int, dict[int, Any]] = {}
        self.objects_put = 0

    def drive(self, cancel_event: threading.Event) -> bool:
        """Run until every group has finished or timed out; True when cancelled."""
        while self._queue or self._inflight:
            self._submit()
            if cancel_event.is_set():
                return True
            self._expire(time.monotonic())
            if not self._inflight:
                continue
            ready, _ = self._ray.wait(
                list(self._inflight), num_returns=1, timeout=self._wait_s(time.monotonic())
            )
            if ready:
                # Take everything that has finished, not only the first.
                ready, _ = self._ray.wait(
                    list(self._inflight), num_returns=len(self._inflight), timeout=0
                )
            for ref in ready:
                self._collect(ref)
        return cancel_event.is_set()

    def cancel_all(self) -> None:
        self._queue.clear()
        self._cancel(list(self._inflight))

    def outcomes(self, cancelled: bool) -> list[BatchOutcome]:
        outcomes = []
        for g, group in enumerate(self._groups):
            results = self._results[g]
            finished = len(results) == len(group.tasks)
            overhead = self._overhead_s[g]
            start = self._started_at.get(g)
            stats = {
                "wall_s": (self._ended_at.get(g, time.monotonic()) - start) if start else 0.0,
                "overhead_s_mean": sum(overhead) / len(overhead) if overhead else 0.0,
            }
            outcomes.append(
                BatchOutcome(
                    tuple(results[i] for i in range(len(group.tasks)) if i in results),
                    timed_out=g in self._timed_out,
                    cancelled=cancelled and not finished and g not in self._timed_out,
                    stats=stats,
                )
            )
        return outcomes

    # -- internals ---------------------------------------------------------------------------

    def _submit(self) -> None:
        while self._queue and len(self._inflight) < self._capacity:
            g, i = self._queue.popleft()
            if g in self._timed_out:
                continue
            task = self._groups[g].tasks[i]
            now = time.monotonic()
            if g not in self._started_at:
                self._started_at[g] = now
                timeout_s = self._groups[g].timeout_s
                if timeout_s is not None:
                    self._deadline[g] = now + timeout_s
            args = [self._shared(g, arg) for arg in task.args]
            ref = self._remote.remote(task.fn, self._context.sweep_dir, *args)
            self._inflight[ref] = _InFlight(g, i, time.perf_counter())
        for g in list(self._shared_refs):
            if self._group_done(g):
                # Let Ray free the group's shared objects once no task needs them.
                del self._shared_refs[g]

    def _shared(self, g: int, arg: Any) -> Any:
        """The object-store reference for an argument that several tasks of group ``g`` share;
        the argument itself otherwise."""
        if isinstance(arg, _INLINE_TYPES):
            return arg
        refs = self._shared_refs.setdefault(g, {})
        if id(arg) in refs:
            return refs[id(arg)][1]
        users = sum(
            any(a is arg for a in task.args) for task in self._groups[g].tasks
        )
        if users < 2:
            return arg
        ref = self._ray.put(arg)
        self.objects_put += 1
        # Keep the argument alive with its reference so its id() cannot be reused meanwhile.
        refs[id(arg)] = (arg, ref)
        return ref

    def _collect(self, ref: Any) -> None:
        flight = self._inflight.pop(ref)
        key = self._groups[flight.group].tasks[flight.index].key
        try:
            ok, value, error, wall_s = self._ray.get(ref)
        except self._ray.exceptions.TaskCancelledError:
            return
        except self._ray.exceptions.RayTaskError as exc:
            # The task's return value could not be sent back (e.g. it is not picklable).
            result = TaskResult(key, False, None, _ray_error_line(exc), 0.0)
        except self._ray.exceptions.RayError as exc:
            result = TaskResult(
                key, False, None, f"worker process died, retried once: {type(exc).__name__}", 0.0
            )
        else:
            result = TaskResult(key, ok, value, error, wall_s)
            self._overhead_s[flight.group].append(
                time.perf_counter() - flight.submitted_at - wall_s
            )
        self._results[flight.group][flight.index] = result
        if self._group_done(flight.group):
            self._ended_at[flight.group] = time.monotonic()

    def _expire(self, now: float) -> None:
        for g, deadline in self._deadline.items():
            if g in self._timed_out or self._group_done(g) or now < deadline:
                continue
            self._timed_out.add(g)
            self._ended_at[g] = now
            self._cancel([ref for ref, flight in self._inflight.items() if flight.group == g])

    def _cancel(self, refs: list[Any]) -> None:
        """Force-cancel ``refs`` (killing their workers) and wait until Ray reports them ended."""
        if not refs:
            return
        for ref in refs:
            self._ray.cancel(ref, force=True)
        self._ray.wait(refs, num_returns=len(refs), timeout=CANCEL_GRACE_S)
        for ref in refs:
            self._inflight.pop(ref, None)

    def _wait_s(self, now: float) -> float:
        pending = [d for g, d in self._deadline.items() if g not in self._timed_out]
        nearest = min(pending, default=now + POLL_INTERVAL_S)
        return max(0.0, min(POLL_INTERVAL_S, nearest - now))

    def _group_done(self, g: int) -> bool:
        if g in self._timed_out:
            return True
        return len(self._results[g]) == len(self._groups[g].tasks)


def _ray_error_line(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)
    return describe_error(cause) if isinstance(cause, BaseException) else describe_error(exc)


_priority_lowered = False


def _run_task(fn: Callable[..., Any], sweep_dir: str, *args: Any) -> tuple[bool, Any, str | None, float]:
    """Runs in a Ray worker: ``fn(TaskContext, *args)`` -> ``(ok, value, error, wall_s)``.

    A raising task returns its error instead of raising, so Ray does not retry it (only a dead
    worker is retried). On a node without the driver's sweep folder the task gets a private
    temporary folder, removed when it ends.
    """
    global _priority_lowered
    if not _priority_lowered:
        raise_by = WORKER_NICENESS - os.getpriority(os.PRIO_PROCESS, 0)
        if raise_by > 0:
            os.nice(raise_by)
        _priority_lowered = True
    private_dir = None
    if not os.path.isdir(sweep_dir):
        private_dir = tempfile.mkdtemp(prefix="plansim-sweep-")
        sweep_dir = private_dir
    saved_tempdir, saved_tmpdir = tempfile.tempdir, os.environ.get("TMPDIR")
    # Libraries that write temporary files (Prophet, cmdstan) put them in the sweep folder.
    tempfile.tempdir = sweep_dir
    os.environ["TMPDIR"] = sweep_dir
    start = time.perf_counter()
    try:
        value = fn(TaskContext(sweep_dir), *args)
        return True, value, None, time.perf_counter() - start
    except Exception as exc:  # noqa: BLE001 - the task fails, the worker lives on
        return False, None, describe_error(exc), time.perf_counter() - start
    finally:
        tempfile.tempdir = saved_tempdir
        if saved_tmpdir is None:
            os.environ.pop("TMPDIR", None)
        else:
            os.environ["TMPDIR"] = saved_tmpdir
        if private_dir is not None:
            shutil.rmtree(private_dir, ignore_errors=True)
