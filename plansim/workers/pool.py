"""``SpawnPool``: the default ``Executor``, worker processes on this machine.

Up to ``max_parallel`` worker processes (all started together when the pool has none and a
task comes), started with the spawn method (no inherited threads, locks or simulator state) at
niceness 10 so a sweep never starves the host, each in its own
process group so that killing a worker also kills anything it started (Prophet's Stan fits),
with SIGINT blocked (Ctrl-C is the parent's) and dying with its parent
(``plansim.lifecycle.die_with_parent``, and ``parent_lost`` when the pipe to the parent breaks
first: a killed sweep leaves no orphan and no scratch folder).
Each worker gets one task at a time over its own pipe and acknowledges it on receipt, before
unpickling and running it; the calling thread dispatches and collects. A worker that dies after
acknowledging fails only its task (a task that cannot be unpickled fails with that error). A
worker that dies before acknowledging never had the task: it was killed while idle, and its
death can show before it can be reaped (a SIGKILLed leader is a zombie while its other threads
exit, so ``is_alive()`` is still true and the send succeeds), so the task is sent again, once
more at most. Dead workers are replaced on demand. At the timeout, on ``cancel()`` and on
``close()`` every worker is killed and reaped, so no process outlives them.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.reduction import ForkingPickler
from typing import Any

from plansim.lifecycle import block_sigint_for_children, parent_lost
from plansim.workers.executor import (
    BatchOutcome,
    ExecutorBackend,
    ResultCallback,
    Task,
    TaskContext,
    TaskResult,
    describe_error,
)

WORKER_NICENESS = 10
# The worker's acknowledgement of a task it received (results are tuples).
_ACK = "ack"
# How many times one task is sent to workers that die before acknowledging it.
_MAX_SENDS = 2


def _worker_main(conn: Connection, parent: int) -> None:
    """Worker loop: receive ``(index, fn, args, sweep_dir)``, acknowledge it, run it, send the
    result ``(index, ok, value, error, wall_s, cpu_s)`` back. A broken pipe means the parent is
    gone (the pool never closes a live worker's pipe): ``parent_lost`` ends the worker as an
    orphan, so that it removes the scratch folder like its watchdog would."""
    import tempfile

    from plansim.lifecycle import die_with_parent
    from plansim.runtime import rare_collections

    rare_collections()  # a worker is a process plansim owns, replaying like the command
    os.setpgid(0, 0)
    die_with_parent(parent)
    raise_by = WORKER_NICENESS - os.getpriority(os.PRIO_PROCESS, 0)
    if raise_by > 0:
        os.nice(raise_by)
    while True:
        try:
            data = conn.recv_bytes()
            conn.send(_ACK)
        except (EOFError, OSError):
            parent_lost()
            return
        try:
            message = ForkingPickler.loads(data)
        except Exception as exc:
            if not _reply(conn, (None, False, None, describe_error(exc), 0.0, 0.0)):
                return
            continue
        if message is None:
            return
        index, fn, args, sweep_dir = message
        # Libraries that write temporary files (Prophet, cmdstan) put them in the sweep folder.
        tempfile.tempdir = sweep_dir
        os.environ["TMPDIR"] = sweep_dir
        start, cpu = time.perf_counter(), time.process_time()
        try:
            value = fn(TaskContext(sweep_dir), *args)
            ok, error = True, None
        except Exception as exc:
            ok, value, error = False, None, describe_error(exc)
        wall_s, cpu_s = time.perf_counter() - start, time.process_time() - cpu
        try:
            sent = _reply(conn, (index, ok, value, error, wall_s, cpu_s))
        except Exception as exc:
            sent = _reply(conn, (index, False, None, describe_error(exc), wall_s, cpu_s))
        if not sent:
            return


def _reply(conn: Connection, message: tuple[Any, ...]) -> bool:
    """Send ``message`` to the parent; False (after ``parent_lost``) if the pipe broke."""
    try:
        conn.send(message)
    except OSError:  # a broken pipe: the parent is gone
        parent_lost()
        return False
    return True


@dataclass(slots=True)
class _Worker:
    process: Any
    conn: Connection
    task_index: int | None = None
    acknowledged: bool = False
    sent_at: float = 0.0


class SpawnPool:
    """An ``Executor`` of spawn-method worker processes; see the module docstring.

    Not thread-safe except ``cancel()``: one thread (the sweep thread) calls ``run``/``close``.
    """

    def __init__(self, max_parallel: int) -> None:
        if max_parallel < 1:
            raise ValueError("max_parallel must be at least 1")
        self.max_parallel = max_parallel
        self._ctx = multiprocessing.get_context("spawn")
        self._workers: list[_Worker] = []
        self._cancel_read, self._cancel_write = self._ctx.Pipe(duplex=False)
        self._cancel_lock = threading.Lock()
        self._closed = False
        self.workers_started = 0

    # -- public API -------------------------------------------------------------------------

    def run(
        self,
        tasks: Sequence[Task],
        context: TaskContext,
        timeout_s: float | None = None,
        on_result: ResultCallback | None = None,
    ) -> BatchOutcome:
        """The ``Executor`` contract; ``on_result`` is called (from this thread) with each
        task's result as it comes, in completion order (progress displays, the journal)."""
        if self._closed:
            raise RuntimeError("the pool is closed")
        started = time.perf_counter()
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        pending = deque(range(len(tasks)))
        sends = [0] * len(tasks)
        results: dict[int, TaskResult] = {}
        overhead_s: list[float] = []
        timed_out = cancelled = False

        while pending or self._busy():
            self._dispatch(pending, tasks, context, sends)
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                timed_out = True
                break
            busy = self._busy()
            ready = wait(
                [w.conn for w in busy] + [w.process.sentinel for w in busy] + [self._cancel_read],
                timeout=remaining,
            )
            if self._cancel_read in ready:
                self._drain_cancel()
                cancelled = True
                break
            for worker in busy:
                if worker.conn in ready or worker.process.sentinel in ready:
                    sent_at = worker.sent_at
                    collected = self._collect(worker, tasks, pending, sends)
                    if collected is not None:
                        index, result = collected
                        results[index] = result
                        overhead_s.append(time.perf_counter() - sent_at - result.wall_s)
                        if on_result is not None:
                            on_result(result)
        return self._finish(tasks, results, timed_out, cancelled, started, overhead_s)

    def cancel(self) -> None:
        """Stop the running batch (or the next one, if none is running) from another thread;
        ``run`` kills the workers and returns with ``cancelled`` set."""
        with self._cancel_lock:
            if not self._closed:
                self._cancel_write.send_bytes(b"x")

    def close(self) -> None:
        """Kill every worker and wait for it; idempotent."""
        if self._closed:
            return
        self._kill_all()
        with self._cancel_lock:
            self._closed = True
            self._cancel_read.close()
            self._cancel_write.close()

    def __enter__(self) -> SpawnPool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def worker_pids(self) -> list[int]:
        """Process ids of the live workers (for tests and diagnostics)."""
        return [w.process.pid for w in self._workers]

    # -- internals ---------------------------------------------------------------------------

    def _busy(self) -> list[_Worker]:
        return [w for w in self._workers if w.task_index is not None]

    def _dispatch(
        self, pending: deque[int], tasks: Sequence[Task], context: TaskContext, sends: list[int]
    ) -> None:
        while pending:
            idle = next((w for w in self._workers if w.task_index is None), None)
            if idle is None:
                if len(self._workers) >= self.max_parallel:
                    return
                idle = self._start_worker()
                if len(self._workers) == 1:
                    # A pool with no worker starts them all together, so that their start-up
                    # (a new interpreter, imports) overlaps the first tasks instead of delaying
                    # the next batch's (multiprocessing.Pool starts all its workers too); past
                    # the CPU count, no more than the batch has tasks (a max_parallel far above
                    # both would start interpreters until memory runs out).
                    wanted = min(self.max_parallel, max(len(pending), os.cpu_count() or 1))
                    while len(self._workers) < wanted:
                        self._start_worker()
            if not idle.process.is_alive():
                # Died while idle (killed from outside): replace it before handing it a task.
                idle.process.join()
                self._remove(idle)
                continue
            index = pending[0]
            task = tasks[index]
            idle.sent_at = time.perf_counter()
            try:
                idle.conn.send((index, task.fn, task.args, context.sweep_dir))
            except (BrokenPipeError, ConnectionResetError):
                idle.process.join()
                self._remove(idle)
                continue
            pending.popleft()
            sends[index] += 1
            idle.task_index = index
            idle.acknowledged = False

    def _start_worker(self) -> _Worker:
        parent_conn, child_conn = self._ctx.Pipe(duplex=True)
        process = self._ctx.Process(
            target=_worker_main,
            args=(child_conn, os.getpid()),
            name="plansim-sweep-worker",
            daemon=True,
        )
        # Ctrl-C is the parent's to handle: the worker starts with SIGINT blocked (the mask is
        # inherited), so it never prints a KeyboardInterrupt of its own; the pool kills it.
        previous = block_sigint_for_children()
        try:
            process.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, previous)
        child_conn.close()
        worker = _Worker(process, parent_conn)
        self._workers.append(worker)
        self.workers_started += 1
        return worker

    def _collect(
        self, worker: _Worker, tasks: Sequence[Task], pending: deque[int], sends: list[int]
    ) -> tuple[int, TaskResult] | None:
        """Take the worker's reply, or, if it died, fail its task (or queue it again, if the
        worker never acknowledged it); a dead worker is removed. None: no result yet."""
        index = worker.task_index
        assert index is not None
        try:
            while worker.conn.poll():
                message = worker.conn.recv()
                if message == _ACK:
                    worker.acknowledged = True
                    continue
                _, ok, value, error, wall_s, cpu_s = message
                worker.task_index = None
                return index, TaskResult(tasks[index].key, ok, value, error, wall_s, cpu_s)
        except (EOFError, OSError):
            pass
        if worker.process.is_alive():
            return None
        worker.process.join()
        code = worker.process.exitcode
        self._remove(worker)
        if not worker.acknowledged and sends[index] < _MAX_SENDS:
            pending.appendleft(index)
            return None
        error = f"worker process died (exit code {code})"
        if not worker.acknowledged:
            error += f" before receiving the task, {sends[index]} times"
        return index, TaskResult(tasks[index].key, False, None, error, 0.0)

    def _finish(
        self,
        tasks: Sequence[Task],
        results: dict[int, TaskResult],
        timed_out: bool,
        cancelled: bool,
        started: float,
        overhead_s: list[float],
    ) -> BatchOutcome:
        if timed_out or cancelled:
            self._kill_all()
        ordered = tuple(results[i] for i in range(len(tasks)) if i in results)
        stats = {
            "wall_s": time.perf_counter() - started,
            "overhead_s_mean": sum(overhead_s) / len(overhead_s) if overhead_s else 0.0,
        }
        return BatchOutcome(ordered, timed_out=timed_out, cancelled=cancelled, stats=stats)

    def _remove(self, worker: _Worker) -> None:
        worker.conn.close()
        self._workers.remove(worker)

    def _kill_all(self) -> None:
        for worker in self._workers:
            _kill_group(worker.process)
        for worker in self._workers:
            worker.process.join()
            worker.conn.close()
        self._workers.clear()

    def _drain_cancel(self) -> None:
        while self._cancel_read.poll():
            self._cancel_read.recv_bytes()


def _kill_group(process: Any) -> None:
    """SIGKILL the worker's process group (the worker and anything it started)."""
    if process.pid is None:
        return
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    # The worker may not have made its own group yet; kill it directly too.
    if process.is_alive():
        process.kill()


def _build(max_parallel: int, address: str | None) -> SpawnPool:
    return SpawnPool(max_parallel)


BACKEND = ExecutorBackend(about="a spawn pool on this machine", build=_build)
