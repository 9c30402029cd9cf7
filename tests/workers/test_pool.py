"""The spawn pool (seed: Candidates and the Sweep): one task at a time per worker, dead workers
replaced, everything killed at the timeout and on close."""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time

import pool_tasks as tasks
import pytest
from proctable import alive, wait_dead

from plansim.workers import pool as pool_module
from plansim.workers.executor import Executor, Task, TaskContext, run_serially
from plansim.workers.pool import SpawnPool


@pytest.fixture
def context(tmp_path):
    return TaskContext(str(tmp_path))


def test_the_pool_implements_the_executor_interface():
    with SpawnPool(1) as pool:
        assert isinstance(pool, Executor)


def test_results_come_back_in_task_order_whatever_the_worker(context):
    batch = [Task(f"t{i}", tasks.square, (i,)) for i in range(12)]
    with SpawnPool(2) as pool:
        out = pool.run(batch, context)
    assert [r.value for r in out.results] == [i * i for i in range(12)]
    assert [r.value for r in out.results] == [r.value for r in run_serially(batch, context).results]


@pytest.mark.parametrize("max_parallel", [1, 3])
def test_results_do_not_depend_on_max_parallel(context, max_parallel):
    batch = [Task(f"t{i}", tasks.square, (i,)) for i in range(7)]
    with SpawnPool(max_parallel) as pool:
        assert [r.value for r in pool.run(batch, context).results] == [i * i for i in range(7)]
        assert pool.workers_started <= max_parallel


def test_each_result_is_handed_to_on_result_as_it_comes(context):
    batch = [Task(f"t{i}", tasks.square, (i,)) for i in range(5)]
    seen = []
    with SpawnPool(2) as pool:
        out = pool.run(batch, context, on_result=seen.append)
    assert sorted(r.key for r in seen) == [f"t{i}" for i in range(5)]
    assert {r.key: r.value for r in seen} == {r.key: r.value for r in out.results}


def test_a_pool_without_workers_starts_them_all_at_its_first_task(context):
    with SpawnPool(2) as pool:
        out = pool.run([Task("a", tasks.square, (2,))], context)
        assert out.results[0].value == 4
        assert pool.workers_started == 2 and len(pool.worker_pids()) == 2


def test_a_pool_far_larger_than_the_machine_starts_no_more_workers_than_tasks(context):
    cpus = os.cpu_count() or 1
    with SpawnPool(cpus + 50) as pool:
        out = pool.run([Task(f"t{i}", tasks.square, (i,)) for i in range(cpus + 1)], context)
        assert [r.value for r in out.results] == [i * i for i in range(cpus + 1)]
        assert pool.workers_started == cpus + 1


def test_a_worker_lost_between_batches_is_replaced_alone(context):
    with SpawnPool(2) as pool:
        pool.run([Task("a", tasks.square, (2,))], context)
        first, second = pool.worker_pids()
        os.kill(first, signal.SIGKILL)
        # Until its threads have exited, a killed leader is a zombie that is_alive() still
        # counts (the pool would send it "b" and send "b" again to the other worker): wait
        # until it is reaped, so that the pool sees one worker left.
        lost = next(w.process for w in pool._workers if w.process.pid == first)
        lost.join(timeout=5.0)
        assert not lost.is_alive()
        out = pool.run([Task("b", tasks.square, (3,)), Task("c", tasks.square, (4,))], context)
        assert [r.value for r in out.results] == [9, 16]
        assert pool.workers_started == 3 and second in pool.worker_pids()


def test_workers_run_niced_in_their_own_group_collecting_rarely_with_temp_files_in_the_sweep_folder(
    context,
):
    with SpawnPool(1) as pool:
        facts = pool.run([Task("f", tasks.worker_facts)], context).results[0].value
    assert facts["niceness"] >= 10
    assert facts["own_group"]
    assert facts["tempdir"] == context.sweep_dir
    assert facts["young_threshold"] == 10_000  # runtime.rare_collections, as in the command


def test_a_raising_task_fails_alone_with_a_one_line_error(context):
    with SpawnPool(1) as pool:
        out = pool.run([Task("bad", tasks.fail), Task("good", tasks.square, (3,))], context)
    bad, good = out.results
    assert (bad.ok, bad.error) == (False, "ValueError: no good")
    assert (good.ok, good.value) == (True, 9)


def test_a_killed_worker_fails_only_its_task_and_is_replaced(context):
    batch = [
        Task("a", tasks.square, (2,)),
        Task("dies", tasks.die),
        Task("b", tasks.square, (3,)),
        Task("c", tasks.square, (4,)),
    ]
    with SpawnPool(1) as pool:
        out = pool.run(batch, context)
        assert pool.workers_started == 2  # the dead worker was replaced
        again = pool.run([Task("d", tasks.square, (5,))], context)
    results = out.by_key()
    assert not results["dies"].ok and "died" in results["dies"].error
    assert [results[k].value for k in ("a", "b", "c")] == [4, 9, 16]
    assert again.results[0].value == 25


def test_timeout_kills_every_worker_and_their_children(context, tmp_path):
    pid_file = tmp_path / "grandchild.pid"
    batch = [
        Task("hang", tasks.start_child_and_hang, (str(pid_file),)),
        Task("slow", tasks.sleep_then, (600, 1)),
    ]
    with SpawnPool(2) as pool:
        # 3 s is ample for the hanging task to start its grandchild before the kill.
        out = pool.run(batch, context, timeout_s=3.0)
        assert out.timed_out and out.results == ()
        assert pool.worker_pids() == []
    grandchild = int(pid_file.read_text())
    assert wait_dead([grandchild])


def test_close_kills_the_workers(context):
    pool = SpawnPool(2)
    pool.run([Task("a", tasks.square, (1,)), Task("b", tasks.square, (2,))], context)
    pids = pool.worker_pids()
    assert len(pids) == 2 and all(alive(p) for p in pids)
    pool.close()
    assert wait_dead(pids)


def test_cancel_from_another_thread_stops_the_batch(context):
    import threading

    with SpawnPool(1) as pool:
        timer = threading.Timer(0.5, pool.cancel)
        timer.start()
        out = pool.run([Task("slow", tasks.sleep_then, (600, 1))], context)
        timer.join()
        assert out.cancelled and pool.worker_pids() == []


def test_a_worker_killed_between_batches_is_replaced(context):
    with SpawnPool(1) as pool:
        pool.run([Task("a", tasks.square, (2,))], context)
        (pid,) = pool.worker_pids()
        os.kill(pid, signal.SIGKILL)
        assert wait_dead([pid])
        out = pool.run([Task("b", tasks.square, (3,))], context)
        assert out.results[0].value == 9 and pool.workers_started == 2


def test_a_cancel_between_batches_stops_the_next_batch_only(context):
    with SpawnPool(1) as pool:
        pool.cancel()
        assert pool.run([Task("a", tasks.square, (2,))], context).cancelled
        out = pool.run([Task("b", tasks.square, (3,))], context)
        assert not out.cancelled and out.results[0].value == 9


def kill_busy_workers(pool: SpawnPool, count: int) -> threading.Thread:
    """Start a thread that SIGKILLs each worker once it has been sent a task, ``count`` times
    (or until 30 s have passed, so a pool that sends fewer tasks fails the test, not hangs it)."""

    def kill() -> None:
        killed: set[int] = set()
        deadline = time.monotonic() + 30.0
        while len(killed) < count and time.monotonic() < deadline:
            # The pool's own record of which worker holds a task: the send has happened.
            for worker in pool._busy():
                if worker.process.pid not in killed:
                    os.kill(worker.process.pid, signal.SIGKILL)
                    killed.add(worker.process.pid)
            time.sleep(0.01)

    thread = threading.Thread(target=kill, daemon=True)
    thread.start()
    return thread


def test_a_task_sent_to_a_worker_that_dies_before_receiving_it_is_sent_again(context):
    with SpawnPool(1) as pool:
        pool.run([Task("a", tasks.square, (2,))], context)
        (pid,) = pool.worker_pids()
        # Stopped, the worker is alive when the task is sent and never reads it before the kill
        # (as a SIGKILLed worker whose threads are still exiting).
        os.kill(pid, signal.SIGSTOP)
        killer = kill_busy_workers(pool, 1)
        out = pool.run([Task("b", tasks.square, (3,))], context)
        killer.join()
        assert (out.results[0].ok, out.results[0].value) == (True, 9)
        assert pool.workers_started == 2


def test_a_task_is_sent_at_most_twice_to_workers_that_die_before_receiving_it(context, monkeypatch):
    monkeypatch.setattr(pool_module, "_worker_main", tasks.never_acknowledges)
    with SpawnPool(1) as pool:
        killer = kill_busy_workers(pool, 2)
        out = pool.run([Task("b", tasks.square, (3,))], context)
        killer.join()
        assert pool.workers_started == 2
    (result,) = out.results
    assert not result.ok
    assert result.error == "worker process died (exit code -9) before receiving the task, 2 times"


def test_a_task_that_ends_its_worker_while_unpickled_fails_once_without_a_retry(context):
    with SpawnPool(1) as pool:
        out = pool.run(
            [
                Task("boom", tasks.square, (tasks.ExitsWhenUnpickled(),)),
                Task("b", tasks.square, (3,)),
            ],
            context,
        )
        assert pool.workers_started == 2  # the first worker, and one replacement for "b"
    boom, good = out.results
    assert (boom.ok, boom.error) == (False, "worker process died (exit code 9)")
    assert (good.ok, good.value) == (True, 9)


def test_a_task_that_cannot_be_unpickled_fails_with_that_error_and_the_worker_lives(context):
    with SpawnPool(1) as pool:
        out = pool.run(
            [
                Task("bad", tasks.square, (tasks.RaisesWhenUnpickled(),)),
                Task("b", tasks.square, (3,)),
            ],
            context,
        )
        assert pool.workers_started == 1
    bad, good = out.results
    assert (bad.ok, bad.error) == (False, "ImportError: no module named 'elsewhere'")
    assert (good.ok, good.value) == (True, 9)


# A parent that dies the way a SIGKILLed one does, in slow motion: its pipes to the workers
# close first (the kernel closes a dying process's files before it re-parents its children),
# then, once the worker has had ample time to react to the broken pipe, the process is killed.
_DYING_PARENT = """
import os, signal, sys, time
sys.path.insert(0, sys.argv[2])
import pool_tasks as tasks
from plansim.workers.executor import Task, TaskContext
from plansim.workers.pool import SpawnPool

scratch = os.environ["PLANSIM_SCRATCH"]
pool = SpawnPool(1)
pool.run([Task("warm", tasks.square, (2,))], TaskContext(scratch))
worker = pool._workers[0]
if sys.argv[1] == "writer":  # the worker's group holds a process writing into the scratch
    writer = pool.run([Task("w", tasks.start_writer, (scratch,))], TaskContext(scratch))
    while not os.path.exists(os.path.join(scratch, "fit", "out.csv")):
        time.sleep(0.01)
    print(worker.process.pid, writer.results[0].value, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)
if sys.argv[1] == "busy":  # a task in flight: its reply will find the pipe broken
    worker.conn.send((0, tasks.sleep_then, (0.5, 1), scratch))
    assert worker.conn.recv() == "ack"
print(worker.process.pid, flush=True)
worker.conn.close()
worker.process.join(timeout=2.0)
os.kill(os.getpid(), signal.SIGKILL)
"""


def _dying_parent(state: str, scratch) -> subprocess.Popen[str]:
    import subprocess
    import sys
    from pathlib import Path

    from plansim.lifecycle import SCRATCH_ENV

    return subprocess.Popen(
        [sys.executable, "-c", _DYING_PARENT, state, str(Path(tasks.__file__).parent)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, SCRATCH_ENV: str(scratch)},
    )


@pytest.mark.parametrize("state", ["idle", "busy"])
def test_a_worker_that_sees_its_pipe_break_before_its_parent_is_gone_removes_the_scratch(
    tmp_path, state
):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    (scratch / "window.parquet").write_bytes(b"x")
    parent = _dying_parent(state, scratch)
    out, err = parent.communicate(timeout=120)  # returns once the worker, too, has ended
    assert parent.returncode == -signal.SIGKILL, err
    assert wait_dead([int(out)])
    # The worker removes the folder before it exits: nothing to wait for.
    assert not scratch.exists()
    assert "Traceback" not in err


def test_an_orphaned_worker_kills_its_group_and_removes_the_scratch(tmp_path):
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    parent = _dying_parent("writer", scratch)
    worker, writer = map(int, parent.stdout.readline().split())
    try:
        _, err = parent.communicate(timeout=60)  # returns once the writer, too, has ended
        assert parent.returncode == -signal.SIGKILL, err
        assert wait_dead([worker, writer])
        assert not scratch.exists()
    finally:
        if alive(writer):
            os.kill(writer, signal.SIGKILL)
