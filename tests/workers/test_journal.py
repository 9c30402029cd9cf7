"""plansim.workers.journal: records of finished tasks, read back equal (floats bit for bit),
kept as each task completes, and a resumed run that runs only what is missing."""

from __future__ import annotations

import math
import threading

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from plansim.capacity.tasks import FullReplay, SegmentReplay
from plansim.errors import InputError
from plansim.roles import Role
from plansim.workers.executor import (
    BatchOutcome,
    Task,
    TaskContext,
    TaskResult,
    run_serially,
)
from plansim.workers.journal import MISSING, Journal, JournaledExecutor, decode, encode

_scalars = (
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.text(max_size=8)
    | st.floats(allow_nan=True, allow_infinity=True)
)
_keys = st.none() | st.booleans() | st.integers() | st.text(max_size=8) | st.tuples(st.integers())
_values = st.recursive(
    _scalars,
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.tuples(inner, inner)
        | st.dictionaries(_keys, inner, max_size=4)
    ),
    max_leaves=20,
)


def _same(a, b) -> bool:
    """Equal, NaN equal to NaN, and of the same type (a tuple stays a tuple)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, float):
        return (a == b and math.copysign(1, a) == math.copysign(1, b)) or (
            math.isnan(a) and math.isnan(b)
        )
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict):
        return list(a) == list(b) and all(_same(a[k], b[k]) for k in a)
    return a == b


@given(_values)
def test_any_value_reads_back_equal_and_of_its_type(value):
    assert _same(decode(encode(value)), value)


def test_plansim_records_numpy_values_and_enums_read_back_equal():
    replay = FullReplay(
        summary={"p90_ttft_ms": 0.1 + 0.2, "nan": float("nan")},
        segment_good=(3, 0, 7),
        end_ms=1e308,
        scaling_events=2,
        worker_series=((0.0, 2.0), (10.0, 3.0)),
    )
    back = decode(encode(replay))
    assert type(back) is FullReplay and back.segment_good == (3, 0, 7)
    assert back.summary["p90_ttft_ms"] == 0.1 + 0.2 and math.isnan(back.summary["nan"])
    assert decode(encode(SegmentReplay(1, 5, -0.0))) == SegmentReplay(1, 5, -0.0)
    assert decode(encode({Role.AGG: 1}))[Role.AGG] == 1
    array = np.array([[1.5, np.nan], [np.inf, -2.0]])
    assert np.array_equal(decode(encode(array)), array, equal_nan=True)
    assert type(decode(encode(np.float64(2.5)))) is float


def test_only_plansim_types_are_rebuilt():
    with pytest.raises(ValueError, match="only plansim's types"):
        decode({"$dataclass": "subprocess:Popen", "fields": {}})
    with pytest.raises(TypeError, match="cannot record a set"):
        encode({1, 2})


def test_a_journal_is_written_with_its_first_record_and_read_back_on_resume(tmp_path):
    folder = tmp_path / "journal"
    journal = Journal.open(folder, {"trace": "abc", "seed": 1}, resume=False)
    assert not folder.exists()  # nothing recorded, nothing written
    journal.record("static @ 4", {"good": 10})
    again = Journal.open(folder, {"trace": "abc", "seed": 1}, resume=True)
    assert again.get("static @ 4") == {"good": 10} and again.get("static @ 5") is MISSING
    assert again.reused == 1
    # Without --resume (--force) the records are gone.
    assert (
        Journal.open(folder, {"trace": "abc", "seed": 1}, resume=False).get("static @ 4") is MISSING
    )


def test_resuming_with_other_inputs_is_refused_naming_them(tmp_path):
    folder = tmp_path / "out" / "journal"
    Journal.open(folder, {"trace": "abc", "seed": 1, "x": [1]}, resume=False).record("k", 1)
    with pytest.raises(InputError) as err:
        Journal.open(folder, {"trace": "abd", "seed": 1, "x": (1,)}, resume=True)
    assert str(err.value) == (
        f"--resume: the interrupted run in {tmp_path / 'out'} had other "
        "inputs (trace differ); rerun it with its own inputs, or use "
        "--force to start over"
    )


class _Counting:
    """An executor that runs tasks serially and counts them; ``stop_after`` results, it stops
    the batch as a kill would."""

    max_parallel = 1

    def __init__(self, stop_after: int | None = None) -> None:
        self.ran: list[str] = []
        self.stop_after = stop_after

    def run(self, tasks, context, timeout_s=None, on_result=None):
        def seen(result: TaskResult) -> None:
            self.ran.append(result.key)
            if on_result is not None:
                on_result(result)
            if self.stop_after is not None and len(self.ran) >= self.stop_after:
                raise KeyboardInterrupt

        return run_serially(tasks, context, seen)

    def cancel(self) -> None: ...

    def close(self) -> None: ...


def _square(context, x):
    return x * x


def _boom(context):
    raise ValueError("no")


def test_a_killed_batch_keeps_what_finished_and_the_rerun_runs_only_the_rest(tmp_path):
    context = TaskContext(str(tmp_path))
    batch = [Task(f"t{i}", _square, (i,)) for i in range(5)]
    inputs = {"run": 1}
    killed = _Counting(stop_after=2)
    with pytest.raises(KeyboardInterrupt):
        JournaledExecutor(killed, Journal.open(tmp_path / "j", inputs, resume=False)).run(
            batch, context
        )
    rerun = _Counting()
    journal = Journal.open(tmp_path / "j", inputs, resume=True)
    seen = []
    outcome = JournaledExecutor(rerun, journal).run(
        batch, context, on_result=lambda r: seen.append(r.key)
    )
    assert rerun.ran == ["t2", "t3", "t4"]
    assert [r.value for r in outcome.results] == [0, 1, 4, 9, 16]
    assert [r.value for r in outcome.results] == [
        r.value for r in run_serially(batch, context).results
    ]
    assert sorted(seen) == [f"t{i}" for i in range(5)] and journal.reused == 2


def test_failed_tasks_and_unkeyed_tasks_are_not_recorded(tmp_path):
    context = TaskContext(str(tmp_path))
    batch = [Task("fails", _boom), Task("read", _square, (3,)), Task("kept", _square, (2,))]
    JournaledExecutor(
        _Counting(),
        Journal.open(tmp_path / "j", {}, resume=False),
        key_of=lambda t: None if t.key == "read" else t.key,
    ).run(batch, context)
    rerun = _Counting()
    journal = Journal.open(tmp_path / "j", {}, resume=True)
    outcome = JournaledExecutor(
        rerun, journal, key_of=lambda t: None if t.key == "read" else t.key
    ).run(batch, context)
    assert rerun.ran == ["fails", "read"]
    assert [r.ok for r in outcome.results] == [False, True, True]


def test_records_written_from_several_threads_are_all_kept(tmp_path):
    journal = Journal.open(tmp_path / "j", {}, resume=False)
    threads = [
        threading.Thread(target=lambda k=k: [journal.record(f"{k}-{i}", i) for i in range(20)])
        for k in range(4)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    again = Journal.open(tmp_path / "j", {}, resume=True)
    assert all(again.get(f"{k}-{i}") == i for k in range(4) for i in range(20))
    assert journal.recorded == 80


def test_an_outcome_cut_short_keeps_only_finished_results(tmp_path):
    class Cut(_Counting):
        def run(self, tasks, context, timeout_s=None, on_result=None):
            first = run_serially(tasks[:1], context, on_result)
            return BatchOutcome(first.results, cancelled=True)

    journal = Journal.open(tmp_path / "j", {}, resume=False)
    outcome = JournaledExecutor(Cut(), journal).run(
        [Task("a", _square, (2,)), Task("b", _square, (3,))], TaskContext(str(tmp_path))
    )
    assert outcome.cancelled and [r.key for r in outcome.results] == ["a"]
    assert Journal.open(tmp_path / "j", {}, resume=True).get("a") == 4
