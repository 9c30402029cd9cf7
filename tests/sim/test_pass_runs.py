"""Runs of passes: how an arrival cuts a run, which passes an observation counts, and how long a
decode run may be before KV runs short (the runs themselves are checked against pass-by-pass
simulation in test_decode_runs.py)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from plansim.sim.pass_runs import DecodeRun, PromptRun, kv_limit
from plansim.sim.pass_window import PassRecord

_HEAD = PassRecord(0.005, 1, 100, 0, 0, (0, 0, 0, 0))


def _decode_run(head: PassRecord | None = None) -> DecodeRun:
    # Passes 0, 1, 2 run 5-10, 10-20, 20-30 ms.
    return DecodeRun(2, 200, [10.0, 20.0, 30.0], [5.0, 10.0, 10.0], 5.0, head)


def test_an_arrival_keeps_the_passes_started_before_it_and_the_one_in_flight():
    run, end = _decode_run().cut(15.0)  # pass 1 (from 10) in flight
    assert (list(run.ends_ms), list(run.dts_ms), end) == ([10.0, 20.0], [5.0, 10.0], 20.0)
    assert _decode_run().cut(20.5) is None  # the last pass is under way: nothing to cut
    # An arrival at the run's start: the first pass is already running.
    run, end = _decode_run().cut(5.0)
    assert (list(run.ends_ms), end) == ([10.0], 10.0)


def test_an_arrival_at_a_head_runs_start_keeps_the_composed_pass_alone():
    run, end = _decode_run(_HEAD).cut(5.0)
    assert (list(run.ends_ms), run.head, end) == ([], _HEAD, 5.0)
    run, end = _decode_run(_HEAD).cut(5.5)
    assert (list(run.ends_ms), run.head, end) == ([10.0], _HEAD, 10.0)


def test_an_observation_counts_the_passes_ended_by_it_a_head_first():
    assert [_decode_run().ended_by(t) for t in (5.0, 10.0, 29.9, 30.0)] == [0, 1, 2, 3]
    assert [_decode_run(_HEAD).ended_by(t) for t in (4.9, 5.0, 10.0, 30.0)] == [0, 1, 2, 4]


def test_a_prompt_runs_grants_by_an_observation_are_the_chunks_of_the_passes_started():
    run = PromptRun(
        3, 2000, (512, 512, 100), [10.0, 20.0, 30.0], [10.0, 10.0, 10.0], (_HEAD,) * 3, 0.0
    )
    assert [run.granted_by(t) for t in (0.0, 9.9, 10.0, 10.1, 25.0)] == [512, 512, 512, 1024, 1124]
    assert [run.ended_by(t) for t in (9.9, 10.0, 30.0)] == [0, 1, 3]
    cut, end = run.cut(12.0)
    assert (cut.chunks, cut.ends_ms, cut.fpms, end) == (
        (512, 512),
        [10.0, 20.0],
        (_HEAD,) * 2,
        20.0,
    )
    assert run.cut(0.0)[0].chunks == (512,)
    assert run.cut(20.5) is None


@settings(max_examples=300, deadline=None)
@given(
    first=st.lists(st.integers(-5, 40), min_size=1, max_size=40),
    avail=st.integers(0, 60),
    k=st.integers(1, 50),
    bs=st.sampled_from([1, 3, 16, 64]),
)
def test_a_decode_runs_kv_limit_is_the_longest_run_whose_new_blocks_fit(first, avail, k, bs):
    # Request i needs a new block at passes f_i, f_i + bs, ... (f_i < 0: from the first pass);
    # a run of L passes needs those before pass L. Both the list and the array path are drawn.
    def needed(passes: int) -> int:
        return sum(len(range(max(f, 0), passes, bs)) for f in first)

    longest = max(length for length in range(k + 1) if needed(length) <= avail)
    assert kv_limit(np.array(first, dtype=np.int64), avail, k, bs) == longest
