"""The job runner: rounds of replays across jobs, each replay once, jobs after their
dependencies, a failed replay one clear error."""

from __future__ import annotations

import pytest

from plansim.capacity.scheduler import JobSpec, ReplayRequest, Runner
from plansim.errors import InputError
from plansim.workers.executor import InProcessExecutor, TaskContext

CALLS: list[int] = []


def square(context: TaskContext, x: int) -> int:
    CALLS.append(x)
    if x < 0:
        raise ValueError("negative")
    return x * x


def req(x: int) -> ReplayRequest:
    return ReplayRequest(f"square {x}", square, (x,), "static")


class Recording(InProcessExecutor):
    def __init__(self) -> None:
        self.batches: list[list[str]] = []

    def run(self, tasks, context, timeout_s=None):
        self.batches.append([t.key for t in tasks])
        return super().run(tasks, context, timeout_s)


def test_jobs_share_rounds_and_a_replay_runs_once():
    CALLS.clear()

    def twice(_deps):
        a = yield [req(2), req(3)]
        b = yield [req(a[0])]
        return b[0]

    def once(_deps):
        (a,) = yield [req(3)]
        return a

    executor = Recording()
    results = Runner(executor, TaskContext("/tmp")).run(
        [JobSpec("twice", twice), JobSpec("once", once)]
    )
    assert results == {"twice": 16, "once": 9}
    assert executor.batches == [["square 2", "square 3"], ["square 4"]]
    assert sorted(CALLS) == [2, 3, 4]


def test_a_job_starts_after_its_dependencies_with_their_results():
    def first(_deps):
        (a,) = yield [req(5)]
        return a

    def second(deps):
        (b,) = yield [req(deps["first"] + 1)]
        return b

    runner = Runner(InProcessExecutor(), TaskContext("/tmp"))
    results = runner.run([JobSpec("second", second, ("first",)), JobSpec("first", first)])
    assert results["second"] == 26 * 26
    assert runner.stats.rounds == 2 and runner.stats.replays == {"static": 2}


def test_a_failed_replay_is_one_error_naming_it():
    def bad(_deps):
        yield [req(-1)]

    with pytest.raises(InputError, match="replay square -1 failed: ValueError: negative"):
        Runner(InProcessExecutor(), TaskContext("/tmp")).run([JobSpec("bad", bad)])
