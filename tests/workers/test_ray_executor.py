"""RayExecutor against a real local Ray instance (2 CPUs, loopback): same values as the spawn
pool, shared arguments shipped once per group, retry-once on a dead worker, per-group timeout,
cancel and Ctrl-C leave no task running, and a missing Ray is one install line."""

from __future__ import annotations

import _thread
import os
import signal
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from plansim.errors import InputError
from plansim.workers.executor import Task, TaskContext, run_serially
from plansim.workers.pool import SpawnPool
from plansim.workers.ray_executor import RayExecutor, import_ray

ray = import_ray(local=True)

pytestmark = pytest.mark.slow


# -- task functions (module level; Ray ships them by value, the spawn pool imports them) ------


def draw(context: TaskContext, seed: int, n: int) -> list[float]:
    return np.random.default_rng(seed).normal(size=n).round(12).tolist()


def weighted_sum(context: TaskContext, data: np.ndarray, weight: float) -> float:
    return float(data.sum() * weight)


def niceness(context: TaskContext) -> int:
    return os.getpriority(os.PRIO_PROCESS, 0)


def write_window(context: TaskContext, name: str, payload: bytes) -> str:
    path = os.path.join(context.sweep_dir, name)
    Path(path).write_bytes(payload)
    return path


def read_window(context: TaskContext, path: str, offset: int) -> tuple[str, bytes]:
    return os.path.dirname(path) == context.sweep_dir, Path(path).read_bytes()[offset:]


def pid_then_sleep(context: TaskContext, pid_dir: str, name: str, sleep_s: float) -> str:
    Path(pid_dir, f"{name}.pid").write_text(str(os.getpid()))
    time.sleep(sleep_s)
    return name


def die_first_time(context: TaskContext, marker_dir: str, value: int) -> int:
    attempts = sorted(Path(marker_dir).glob("attempt-*"))
    Path(marker_dir, f"attempt-{len(attempts)}").touch()
    if not attempts:
        os.kill(os.getpid(), signal.SIGKILL)
    return value


def always_die(context: TaskContext, marker_dir: str) -> None:
    attempts = sorted(Path(marker_dir).glob("attempt-*"))
    Path(marker_dir, f"attempt-{len(attempts)}").touch()
    os.kill(os.getpid(), signal.SIGKILL)


def fail(context: TaskContext, marker_dir: str) -> None:
    Path(marker_dir, "attempt-0").touch()
    raise ValueError("bad candidate")


@pytest.fixture
def context(tmp_path: Path) -> TaskContext:
    return TaskContext(str(tmp_path))


def _wait_all_dead(pids: list[int], within_s: float = 10.0) -> list[int]:
    """Pids still alive after ``within_s`` (Ray reaps killed workers asynchronously)."""
    deadline = time.monotonic() + within_s
    alive = pids
    while alive and time.monotonic() < deadline:
        alive = [pid for pid in alive if _alive(pid)]
        time.sleep(0.1)
    return alive


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "State:\tZ" not in status.read_text()


def _when_started(pid_dir: Path, count: int, action) -> None:
    """Call ``action`` once ``count`` tasks have written their pid (or after 20 s)."""
    deadline = time.monotonic() + 20
    while len(list(pid_dir.glob("*.pid"))) < count and time.monotonic() < deadline:
        time.sleep(0.05)
    action()


def _pids(pid_dir: Path) -> list[int]:
    return [int(p.read_text()) for p in pid_dir.glob("*.pid")]


def test_local_instance_is_bound_to_loopback(ray_executor: RayExecutor) -> None:
    assert ray.nodes()[0]["NodeManagerAddress"] == "127.0.0.1"
    assert ray_executor.max_parallel == 2


def test_workers_run_at_the_spawn_pools_niceness(ray_executor, context) -> None:
    outcome = ray_executor.run([Task("a", niceness), Task("b", niceness)], context)
    assert [r.value for r in outcome.results] == [10, 10]


def test_values_match_the_spawn_pool_and_serial_run(ray_executor, context) -> None:
    tasks = [Task(f"t{seed}", draw, (seed, 5)) for seed in range(6)]
    by_ray = ray_executor.run(tasks, context)
    with SpawnPool(2) as pool:
        by_pool = pool.run(tasks, context)
    serial = run_serially(tasks, context)
    assert [(r.key, r.ok, r.value) for r in by_ray.results] == [
        (r.key, r.ok, r.value) for r in by_pool.results
    ]
    assert [r.value for r in by_ray.results] == [r.value for r in serial.results]


def test_each_result_is_handed_over_as_it_arrives(ray_executor, context) -> None:
    seen = []
    outcome = ray_executor.run(
        [Task(f"t{seed}", draw, (seed, 3)) for seed in range(4)],
        context,
        on_result=lambda r: seen.append((r.key, r.value)),
    )
    assert sorted(seen) == sorted((r.key, r.value) for r in outcome.results)
    assert len(seen) == 4


def test_shared_argument_is_put_once_per_batch(ray_executor, context) -> None:
    windows = [np.arange(10.0), np.arange(100.0)]
    values = []
    for data in windows:
        before = ray_executor.objects_put
        outcome = ray_executor.run(
            [Task(f"c{c}", weighted_sum, (data, float(c))) for c in range(3)], context
        )
        assert ray_executor.objects_put - before == 1
        values.append([r.value for r in outcome.results])
    assert values == [[0.0, 45.0, 90.0], [0.0, 4950.0, 9900.0]]


def test_sweep_file_is_put_once_per_batch(ray_executor, context) -> None:
    path = write_window(context, "window-0.npz", b"0123456789")
    before = ray_executor.objects_put
    outcome = ray_executor.run([Task(f"c{i}", read_window, (path, i)) for i in range(3)], context)
    assert ray_executor.objects_put - before == 1
    assert [r.value for r in outcome.results] == [
        (True, b"0123456789"),
        (True, b"123456789"),
        (True, b"23456789"),
    ]


def test_files_written_on_another_node_come_back(ray_executor, tmp_path, monkeypatch) -> None:
    # Pretend every worker runs on another node: tasks get private folders, files travel.
    monkeypatch.setattr(ray_executor, "_driver_node", "another-node")
    driver_dir = tmp_path / "driver"
    driver_dir.mkdir()
    context = TaskContext(str(driver_dir))
    written = ray_executor.run([Task("read", write_window, ("window-3.npz", b"abc"))], context)
    remote_path = written.results[0].value
    assert not remote_path.startswith(str(driver_dir))
    assert (driver_dir / "window-3.npz").read_bytes() == b"abc"
    replays = ray_executor.run(
        [Task(f"c{i}", read_window, (remote_path, i)) for i in range(2)], context
    )
    # Each replay ran in its own private folder, on the shipped copy of the window.
    assert [r.value for r in replays.results] == [(True, b"abc"), (True, b"bc")]


def test_task_whose_worker_dies_is_retried_once(ray_executor, context, tmp_path) -> None:
    once, twice = tmp_path / "once", tmp_path / "twice"
    once.mkdir()
    twice.mkdir()
    outcome = ray_executor.run(
        [Task("recovers", die_first_time, (str(once), 7)), Task("dies", always_die, (str(twice),))],
        context,
    )
    recovers, dies = outcome.results
    assert (recovers.ok, recovers.value) == (True, 7)
    assert len(list(once.glob("attempt-*"))) == 2
    assert not dies.ok and "worker process died" in dies.error
    assert len(list(twice.glob("attempt-*"))) == 2


def test_raising_task_fails_alone_without_retry(ray_executor, context, tmp_path) -> None:
    outcome = ray_executor.run(
        [Task("bad", fail, (str(tmp_path),)), Task("good", draw, (1, 2))], context
    )
    bad, good = outcome.results
    assert (bad.ok, bad.error) == (False, "ValueError: bad candidate")
    assert good.ok
    assert len(list(tmp_path.glob("attempt-*"))) == 1


def test_timeout_cancels_only_that_runs_outstanding_tasks(ray_executor, context, tmp_path) -> None:
    slow_dir = tmp_path / "slow"
    slow_dir.mkdir()
    slow = [Task(f"s{i}", pid_then_sleep, (str(slow_dir), f"s{i}", 60.0)) for i in range(3)]
    quick = [Task(f"q{i}", draw, (i, 3)) for i in range(3)]
    outcomes = {}
    # Two windows swept at once, as `plansim retune windows` does: only the slow one times out.
    slow_thread = threading.Thread(
        target=lambda: outcomes.__setitem__("slow", ray_executor.run(slow, context, timeout_s=5.0))
    )
    started = time.monotonic()
    slow_thread.start()
    outcomes["quick"] = ray_executor.run(quick, context, timeout_s=60.0)
    slow_thread.join()
    assert time.monotonic() - started < 30
    assert outcomes["slow"].timed_out and outcomes["slow"].results == ()
    assert not outcomes["quick"].timed_out
    assert [r.ok for r in outcomes["quick"].results] == [True, True, True]
    # At most two slow tasks ran at once (2 CPUs) and none outlives the timeout.
    assert 1 <= len(_pids(slow_dir)) <= 2
    assert _wait_all_dead(_pids(slow_dir)) == []


def test_cancel_from_another_thread_leaves_no_task_running(ray_executor, context, tmp_path) -> None:
    tasks = [Task(f"s{i}", pid_then_sleep, (str(tmp_path), f"s{i}", 60.0)) for i in range(4)]
    timer = threading.Thread(target=_when_started, args=(tmp_path, 2, ray_executor.cancel))
    timer.start()
    outcome = ray_executor.run(tasks, context)
    timer.join()
    assert outcome.cancelled and outcome.results == ()
    assert _pids(tmp_path) and _wait_all_dead(_pids(tmp_path)) == []


def test_ctrl_c_cancels_everything_and_reraises(ray_executor, context, tmp_path) -> None:
    tasks = [Task(f"s{i}", pid_then_sleep, (str(tmp_path), f"s{i}", 60.0)) for i in range(4)]
    timer = threading.Thread(target=_when_started, args=(tmp_path, 2, _thread.interrupt_main))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        ray_executor.run(tasks, context)
    timer.join()
    assert _pids(tmp_path) and _wait_all_dead(_pids(tmp_path)) == []
    # The executor is usable afterwards.
    assert ray_executor.run([Task("after", draw, (3, 1))], context).results[0].ok


def test_missing_ray_is_one_install_line(monkeypatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` raise ImportError
    with pytest.raises(InputError) as caught:
        RayExecutor(max_parallel=2)
    line = str(caught.value)
    assert "\n" not in line
    assert "pip install 'plansim[ray]'" in line
