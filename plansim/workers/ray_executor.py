"""``RayExecutor``: the ``Executor`` on a Ray cluster, or a local Ray instance.

Runs the same module-level task functions on the same arguments as ``SpawnPool``, so a task's
value does not depend on the backend. Differences that follow from Ray:

- Window data is shipped once per batch (one window's replays) through the object store: an
  argument object that several tasks share (the same object, not an equal one) is ``ray.put``
  once and handed to the tasks by reference; so is a file of the sweep folder named by an
  argument (the window file), whose bytes are put once and read from the driver's disk once.
- The sweep folder is the driver's. A task on the driver's node uses it directly. A task on
  another node gets a private folder: the sweep files its arguments name are written into it
  from the object store, and files it writes there come back with its result into the driver's
  folder (later tasks may name them by the path the task returned).
- A task whose worker dies is retried once by Ray (``max_retries=1``), then fails alone. A task
  that raises is not retried: it fails alone, as in the spawn pool.
- ``run`` may be called from several threads at once (``plansim retune windows`` sweeps several
  windows concurrently, one thread each). At most ``max_parallel`` tasks are in flight across
  all calls (one per CPU), so a submitted task starts at once. Each call has its own timeout;
  at the timeout its outstanding tasks are cancelled with ``ray.cancel(force=True)`` (their
  worker processes are killed) while other calls go on.
- ``cancel()`` (from any thread) and Ctrl-C cancel every outstanding task the same way and wait
  until Ray reports them ended, so no task keeps running.

Without an address the executor starts a local Ray instance with ``max_parallel`` CPUs, bound to
loopback, dashboard off, workers at niceness 10, and shuts it down on ``close()``; a
``lifecycle.ProcessReaper`` kills what is left of it if the driver dies. With an
address it connects to that cluster, uses all of its CPUs, and leaves the cluster running on
``close()``; every node needs plansim installed. A Ray instance already started in this process
(by a test, a notebook) is reused and left running.
"""

from __future__ import annotations

import logging
import os
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Sequence
from types import ModuleType
from typing import Any

from plansim.errors import InputError
from plansim.io import atomic_write_bytes
from plansim.lifecycle import ProcessReaper
from plansim.workers.executor import (
    BatchOutcome,
    ExecutorBackend,
    ResultCallback,
    Task,
    TaskContext,
    TaskResult,
    describe_error,
)

INSTALL_HINT = "pip install 'plansim[ray]'"
WORKER_NICENESS = 10
# How often the driver loop checks cancel() and the deadline while tasks run (s).
POLL_INTERVAL_S = 0.05
# How long a cluster address may take to accept a connection (s).
CONNECT_TIMEOUT_S = 5.0
# How long to wait for force-cancelled tasks to end before returning anyway (s).
CANCEL_GRACE_S = 30.0
# Where a local instance keeps its session (sockets included): a short path.
_SHORT_TMP = "/tmp" if os.path.isdir("/tmp") else None
# Scalars are cheap to send with every task; only shared objects go to the object store.
_INLINE_TYPES = (type(None), bool, int, float, complex, str, bytes)


def import_ray(*, local: bool) -> ModuleType:
    """Import Ray, or raise ``InputError`` with one line saying how to install it.

    For a local instance, Ray must bind its services to loopback: on Linux Ray resolves
    127.0.0.1 to the host's network address unless cluster mode is off, and that switch is read
    once, when Ray is imported.
    """
    if local and "ray" not in sys.modules:
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    if local:
        # Workers of a local instance run at the spawn pool's niceness (Ray's default is 15).
        os.environ.setdefault("RAY_worker_niceness", str(WORKER_NICENESS))
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
    """An ``Executor`` on Ray; see the module docstring. ``run`` and ``cancel`` are thread-safe;
    ``close`` is called once, after every ``run`` has returned."""

    # Several windows may be swept at once on one executor (see ``retune_runs.batch``).
    thread_safe = True

    def __init__(self, max_parallel: int, address: str | None = None) -> None:
        if max_parallel < 1:
            raise ValueError("max_parallel must be at least 1")
        ray = import_ray(local=address is None)
        self._ray = ray
        self._owns_ray = False
        self._reaper: ProcessReaper | None = None
        self._ray_dir: str | None = None
        if not ray.is_initialized():
            init_options: dict[str, Any] = {
                "logging_level": logging.ERROR,
                "log_to_driver": False,
            }
            if address is None:
                init_options |= {"num_cpus": max_parallel, "include_dashboard": False}
                # The local instance's processes (raylet, its agents, workers) die with us even
                # when we are killed (Ray's own fate sharing lets the agents outlive a killed
                # driver by a minute), and its session folder goes with them. The folder is
                # short: Ray's socket paths inside it must stay under 108 bytes.
                self._ray_dir = tempfile.mkdtemp(prefix="plansim-ray-", dir=_SHORT_TMP)
                self._reaper = ProcessReaper(folders=[self._ray_dir])
                init_options["_temp_dir"] = self._ray_dir
            else:
                _check_reachable(address)
                init_options["address"] = address
            try:
                ray.init(**init_options)
            except (ConnectionError, ValueError, RuntimeError) as exc:
                self._close_reaper()
                if address is None:
                    raise InputError(
                        f"cannot start a local Ray instance: {describe_error(exc)}",
                        field="--backend",
                    ) from None
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
        self._driver_node = ray.get_runtime_context().get_node_id()
        # A path a task returned from another node's private folder -> its copy in ours.
        self._file_aliases: dict[str, str] = {}
        # One slot per CPU, shared by concurrent runs: a submitted task is a running task, so
        # nothing waits in Ray's queue and a window's timeout is not spent there.
        self._slots = threading.BoundedSemaphore(self.max_parallel)
        self._lock = threading.Lock()
        self._cancel_generation = 0
        self._closed = False
        self.objects_put = 0

    # -- public API -------------------------------------------------------------------------

    def run(
        self,
        tasks: Sequence[Task],
        context: TaskContext,
        timeout_s: float | None = None,
        on_result: ResultCallback | None = None,
    ) -> BatchOutcome:
        """Run ``tasks`` as independent Ray tasks, submitted in list order; results in task
        order, each also handed to ``on_result`` (in this thread) as it arrives."""
        if self._closed:
            raise RuntimeError("the executor is closed")
        with self._lock:
            generation = self._cancel_generation
        batch = _Batch(self, tasks, context, on_result)
        try:
            finished = batch.drive(timeout_s, lambda: self._cancel_generation != generation)
        except BaseException:
            # Ctrl-C (or a bug) in the driver: nothing we submitted may keep running.
            batch.cancel_outstanding()
            raise
        batch.cancel_outstanding()
        with self._lock:
            self.objects_put += batch.objects_put
        return batch.outcome(timed_out=finished == "timeout", cancelled=finished == "cancelled")

    def cancel(self) -> None:
        """Stop every running ``run`` (from any thread): each cancels its tasks and returns."""
        with self._lock:
            self._cancel_generation += 1

    def close(self) -> None:
        """Shut down the local Ray instance this executor started; idempotent."""
        if self._closed:
            return
        self._closed = True
        if self._owns_ray:
            self._ray.shutdown()
        self._close_reaper()

    def _close_reaper(self) -> None:
        if self._reaper is not None:
            self._reaper.close()
            self._reaper = None
        if self._ray_dir is not None:
            shutil.rmtree(self._ray_dir, ignore_errors=True)
            self._ray_dir = None

    def __enter__(self) -> RayExecutor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


BACKEND = ExecutorBackend(
    about="Ray, a cluster or a local instance", build=RayExecutor, takes_address=True
)


class _Batch:
    """The driver side of one ``run``: submission with backpressure, collection, the deadline
    and cancellation."""

    def __init__(
        self,
        executor: RayExecutor,
        tasks: Sequence[Task],
        context: TaskContext,
        on_result: ResultCallback | None = None,
    ) -> None:
        self._executor = executor
        self._on_result = on_result
        self._ray = executor._ray
        self._tasks = tasks
        self._context = context
        self._slots = executor._slots
        self._queue = deque(range(len(tasks)))
        self._inflight: dict[Any, tuple[int, float]] = {}  # ref -> (task index, submitted at)
        self._results: dict[int, TaskResult] = {}
        self._overhead_s: list[float] = []
        self._shared_refs: dict[int, tuple[Any, Any]] = {}  # id(arg) -> (arg, ref)
        self._file_refs: dict[str, Any] = {}  # sweep file path -> ref of its bytes
        self._started = time.perf_counter()
        self.objects_put = 0

    def drive(self, timeout_s: float | None, cancelled: Callable[[], bool]) -> str:
        """Run until every task has a result (``"done"``), the timeout, or a cancel."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while self._queue or self._inflight:
            self._submit()
            if cancelled():
                return "cancelled"
            now = time.monotonic()
            if deadline is not None and now >= deadline:
                return "timeout"
            wait_s = POLL_INTERVAL_S if deadline is None else min(POLL_INTERVAL_S, deadline - now)
            if not self._inflight:
                # Every CPU is busy with another window's tasks: wait for a free slot.
                time.sleep(wait_s)
                continue
            ready, _ = self._ray.wait(list(self._inflight), num_returns=1, timeout=wait_s)
            if ready:
                # Take everything that has finished, not only the first.
                ready, _ = self._ray.wait(
                    list(self._inflight), num_returns=len(self._inflight), timeout=0
                )
            for ref in ready:
                self._collect(ref)
        return "done"

    def cancel_outstanding(self) -> None:
        """Force-cancel every task still in flight (killing its worker), wait until Ray reports
        them ended, and drop the tasks not yet submitted."""
        self._queue.clear()
        refs = list(self._inflight)
        for ref in refs:
            self._ray.cancel(ref, force=True)
        if refs:
            self._ray.wait(refs, num_returns=len(refs), timeout=CANCEL_GRACE_S)
        for _ in refs:
            self._slots.release()
        self._inflight.clear()
        self._shared_refs.clear()

    def outcome(self, *, timed_out: bool, cancelled: bool) -> BatchOutcome:
        overhead = self._overhead_s
        stats = {
            "wall_s": time.perf_counter() - self._started,
            "overhead_s_mean": sum(overhead) / len(overhead) if overhead else 0.0,
            "objects_put": float(self.objects_put),
        }
        ordered = tuple(self._results[i] for i in range(len(self._tasks)) if i in self._results)
        return BatchOutcome(ordered, timed_out=timed_out, cancelled=cancelled, stats=stats)

    # -- internals ---------------------------------------------------------------------------

    def _submit(self) -> None:
        while self._queue and self._slots.acquire(blocking=False):
            index = self._queue.popleft()
            try:
                ref = self._submit_one(self._tasks[index])
            except BaseException:
                self._slots.release()
                raise
            self._inflight[ref] = (index, time.perf_counter())

    def _submit_one(self, task: Task) -> Any:
        args, shipped = [], []
        for position, arg in enumerate(task.args):
            file_ref = self._sweep_file(arg)
            if file_ref is not None:
                shipped.append((position, arg))
                args.append(file_ref)
            else:
                args.append(self._shared(arg))
        return self._executor._remote.remote(
            task.fn, self._context.sweep_dir, self._executor._driver_node, tuple(shipped), *args
        )

    def _sweep_file(self, arg: Any) -> Any:
        """The reference to the bytes of the sweep-folder file ``arg`` names, put once per
        batch; None when ``arg`` names no such file."""
        if not isinstance(arg, str):
            return None
        with self._executor._lock:
            path = self._executor._file_aliases.get(arg, arg)
        sweep_dir = os.path.realpath(self._context.sweep_dir)
        if os.path.dirname(os.path.realpath(path)) != sweep_dir or not os.path.isfile(path):
            return None
        if path not in self._file_refs:
            with open(path, "rb") as fh:
                self._file_refs[path] = self._ray.put(fh.read())
            self.objects_put += 1
        return self._file_refs[path]

    def _shared(self, arg: Any) -> Any:
        """The object-store reference for an argument that several tasks of the batch share
        (the same object); the argument itself otherwise."""
        if isinstance(arg, _INLINE_TYPES) or _is_empty(arg):
            return arg
        if id(arg) in self._shared_refs:
            return self._shared_refs[id(arg)][1]
        if sum(any(a is arg for a in task.args) for task in self._tasks) < 2:
            return arg
        ref = self._ray.put(arg)
        self.objects_put += 1
        # Keep the argument alive beside its reference so that its id() is not reused.
        self._shared_refs[id(arg)] = (arg, ref)
        return ref

    def _collect(self, ref: Any) -> None:
        index, submitted_at = self._inflight.pop(ref)
        self._slots.release()
        key = self._tasks[index].key
        try:
            ok, value, error, wall_s, private_dir, files = self._ray.get(ref)
        except self._ray.exceptions.TaskCancelledError:
            return
        except self._ray.exceptions.RayTaskError as exc:
            # The task's value could not be sent back (for example, it is not picklable).
            result = TaskResult(key, False, None, _ray_error_line(exc), 0.0)
        except self._ray.exceptions.RayError as exc:
            result = TaskResult(
                key, False, None, f"worker process died, retried once: {type(exc).__name__}", 0.0
            )
        else:
            self._receive_files(private_dir, files)
            result = TaskResult(key, ok, value, error, wall_s)
            self._overhead_s.append(time.perf_counter() - submitted_at - wall_s)
        self._results[index] = result
        if self._on_result is not None:
            self._on_result(result)

    def _receive_files(self, private_dir: str | None, files: dict[str, bytes]) -> None:
        """Store the files a task wrote on another node in the driver's sweep folder."""
        for name, data in files.items():
            target = os.path.join(self._context.sweep_dir, name)
            atomic_write_bytes(target, data)
            with self._executor._lock:
                self._executor._file_aliases[os.path.join(private_dir or "", name)] = target


def _check_reachable(address: str) -> None:
    """Fail in seconds, with one line, when a ``host:port`` cluster address does not answer
    (``ray.init`` would retry for minutes). Other forms (``auto``, ``ray://...``) go to Ray."""
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit() or "://" in address:
        return
    try:
        socket.create_connection((host.strip("[]"), int(port)), timeout=CONNECT_TIMEOUT_S).close()
    except OSError as exc:
        raise InputError(
            f"cannot reach the Ray cluster at {address}: {exc.strerror or exc}",
            field="--ray-address",
        ) from None


def _is_empty(arg: Any) -> bool:
    try:
        return len(arg) == 0
    except TypeError:
        return False


def _ray_error_line(exc: BaseException) -> str:
    cause = getattr(exc, "cause", None)
    return describe_error(cause) if isinstance(cause, BaseException) else describe_error(exc)


_priority_lowered = False


def _run_task(
    fn: Callable[..., Any],
    sweep_dir: str,
    driver_node: str,
    shipped: tuple[tuple[int, str], ...],
    *args: Any,
) -> tuple[bool, Any, str | None, float, str | None, dict[str, bytes]]:
    """Runs in a Ray worker: ``fn(TaskContext, *args)`` -> ``(ok, value, error, wall_s,
    private_dir, files)``.

    ``shipped`` lists ``(position, driver path)`` of the arguments that arrive as the bytes of a
    sweep-folder file. On the driver's node the task uses the driver's folder and those paths;
    elsewhere it gets a private folder holding the shipped files, and the files it wrote there
    (top level) are returned. A raising task returns its error instead of raising, so Ray does
    not retry it (only a dead worker is retried).
    """
    global _priority_lowered
    if not _priority_lowered:
        raise_by = WORKER_NICENESS - os.getpriority(os.PRIO_PROCESS, 0)
        if raise_by > 0:
            os.nice(raise_by)
        _priority_lowered = True
    import ray

    args_list = list(args)
    private_dir = None
    # The driver's node, unless its folder is missing here (a Ray Client driver runs elsewhere).
    if ray.get_runtime_context().get_node_id() == driver_node and os.path.isdir(sweep_dir):
        for position, path in shipped:
            args_list[position] = path
    else:
        private_dir = tempfile.mkdtemp(prefix="plansim-sweep-")
        sweep_dir = private_dir
        for position, path in shipped:
            local = os.path.join(private_dir, os.path.basename(path))
            with open(local, "wb") as fh:
                fh.write(args_list[position])
            args_list[position] = local
    received = set(os.listdir(sweep_dir)) if private_dir else set()
    saved_tempdir, saved_tmpdir = tempfile.tempdir, os.environ.get("TMPDIR")
    # Libraries that write temporary files (Prophet, cmdstan) put them in the sweep folder.
    tempfile.tempdir = sweep_dir
    os.environ["TMPDIR"] = sweep_dir
    start = time.perf_counter()
    try:
        value = fn(TaskContext(sweep_dir), *args_list)
        outcome: tuple[bool, Any, str | None] = (True, value, None)
    except Exception as exc:
        outcome = (False, None, describe_error(exc))
    wall_s = time.perf_counter() - start
    tempfile.tempdir = saved_tempdir
    if saved_tmpdir is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = saved_tmpdir
    files: dict[str, bytes] = {}
    if private_dir is not None:
        for name in sorted(set(os.listdir(private_dir)) - received):
            path = os.path.join(private_dir, name)
            if os.path.isfile(path):
                with open(path, "rb") as fh:
                    files[name] = fh.read()
        shutil.rmtree(private_dir, ignore_errors=True)
    return (*outcome, wall_s, private_dir, files)
