"""What a replay records: the per-second time series and the token-gap samples."""

from __future__ import annotations

from array import array

import numpy as np
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from simkit import run

from plansim.sim import batch as soa
from plansim.sim import recorder as recorder_module
from plansim.sim.recorder import Recorder


def test_time_series_counts_tokens_arrivals_and_prefix_reuse_per_second():
    # A (50 tokens) finishes within second 0; B arrives at 1.0 s reusing 1024 of 1500 tokens.
    r = run([(0.0, 1500, 50, [1, 2, 3]), (1000.0, 1500, 50, [1, 2, 4])])
    ts = r.timeseries.set_index("time_s")
    assert ts.loc[1.0, "output_tok_s"] == 50.0  # A's tokens, all in second 0
    assert ts.loc[1.0, "arrivals"] == 1  # B, in (0 s, 1 s]
    assert ts.loc[2.0, "output_tok_s"] == 50.0  # B's tokens, all in second 1
    assert ts.loc[2.0, "prefix_reuse"] == pytest.approx(1024 / 1500)
    assert set(ts["ready"]) == {1}


def test_every_token_gap_is_sampled_once():
    r = run([(0.0, 1000, 10, [1, 2]), (5.0, 700, 7, [3, 4])], num_workers=1)
    # gaps = sum(osl - 1); their mean is the token-weighted mean TPOT. Gaps are kept to the
    # microsecond, so the mean agrees within half a microsecond.
    n_gaps = 9 + 6
    req = r.requests
    total = (req["last_token_ms"] - req["first_token_ms"]).sum()
    assert r.summary["mean_itl_ms"] == pytest.approx(total / n_gaps, abs=5e-4)


_GAPS = st.lists(
    st.tuples(
        st.sampled_from([0.0, 0.0004, 0.0006, 1.0, 5.8125, 7.0, 80.0])
        | st.floats(0, 100, allow_nan=False),
        st.integers(1, 50),
    ),
    max_size=40,
)


@settings(max_examples=80, deadline=None)
@given(st.lists(_GAPS, min_size=1, max_size=4), st.sampled_from([0, 1, 10**5]))
@example([[(0.001, 2), (2e6, 1), (0.001, 3)]], 1)  # a 2000 s gap: sorted, not counted over
def test_gap_samples_are_each_microsecond_value_with_its_total_count(batches, span):
    # Gaps arrive in batches, each compacted into what came before (as the recorder does
    # every million samples and at the end); totalled by sorting (span 0), by counting over
    # the values' span (10**5), or as their spread decides.
    rec = Recorder(1, np.zeros(1), np.zeros(1, dtype=np.int64))
    expected: dict[int, int] = {}
    with pytest.MonkeyPatch.context() as m:
        m.setattr(recorder_module, "DENSE_SPAN_PER_SAMPLE", span)
        for batch in batches:
            for value_ms, count in batch:
                rec.gap_value.append(value_ms)
                rec.gap_count.append(count)
                us = int(np.rint(value_ms * 1000.0))
                expected[us] = expected.get(us, 0) + count
            rec._compact_gaps()
            assert len(rec.gap_value) == 0 and rec.gap_count == array("q")
        values, counts = rec.itl_samples()
    assert (values * 1000.0).round().astype(np.int64).tolist() == sorted(expected)
    assert counts.tolist() == [expected[k] for k in sorted(expected)]


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(-(10**4), 10**4) | st.integers(0, 10**9), st.integers(1, 10**6)),
        min_size=1,
        max_size=60,
    ),
    st.sampled_from([0, 1, 3, 10**5]),
    st.sampled_from([np.int64, np.float64]),
)
def test_distinct_totals_are_uniques_and_their_summed_weights_whatever_the_spread(
    pairs, span, weight_dtype
):
    # Counted over the span, sorted, or counted below the cut with a sorted tail above it: the
    # same distinct values and totals as a plain dict of sums, whether the weights come as
    # ints or as the floats bincount weighs.
    values = np.array([v for v, _ in pairs], dtype=np.int64)
    weights = np.array([w for _, w in pairs], dtype=weight_dtype)
    expected: dict[int, int] = {}
    for v, w in pairs:
        expected[v] = expected.get(v, 0) + w
    with pytest.MonkeyPatch.context() as m:
        m.setattr(recorder_module, "DENSE_SPAN_PER_SAMPLE", span)
        distinct, totals = recorder_module._distinct_totals(values, weights)
    assert distinct.tolist() == sorted(expected)
    assert totals.tolist() == [expected[v] for v in sorted(expected)]
    assert distinct.dtype == totals.dtype == np.int64


@st.composite
def _runs(draw):
    # Runs, each a few ascending pass ends (some across seconds), on fresh requests or on the
    # previous run's (then past their first tokens); request ids as a list or an array, ends
    # as a list or an array, and the first end given apart (``first_ms``: a run that follows
    # on from a composed pass) or not.
    runs, t, rid = [], 0.0, 0
    rids: list[int] = []
    for _ in range(draw(st.integers(1, 8))):
        if not rids or draw(st.booleans()):
            n = draw(st.integers(1, 3))
            rids = list(range(rid, rid + n))
            rid += n
        gaps = draw(st.lists(st.floats(0.5, 900.0), min_size=1, max_size=20))
        ends = []
        for g in gaps:
            t += g
            ends.append(t)
        head = len(ends) > 1 and draw(st.booleans())
        runs.append((rids, ends, draw(st.booleans()), draw(st.booleans()), head))
    return runs, rid


@settings(max_examples=100, deadline=None)
@given(_runs(), st.sampled_from([1, 5, 1 << 16]))
def test_a_run_records_what_its_passes_one_by_one_would(case, flush_at):
    # Recorder.run (stamps at once; gaps and tokens per second totalled every flush_at
    # passes) against Recorder.tokens pass by pass: the same stamps, gaps and rates.
    runs, n = case
    by_run = Recorder(n, np.zeros(n), np.zeros(n, dtype=np.int64))
    by_pass = Recorder(n, np.zeros(n), np.zeros(n, dtype=np.int64))
    with pytest.MonkeyPatch.context() as m:
        m.setattr(recorder_module, "_FLUSH_RUNS_AT", flush_at)
        for rids, ends, ids_as_array, ends_as_array, head in runs:
            ids = np.array(rids, dtype=np.int64)
            run_ends = ends[1:] if head else ends
            by_run.run(
                ids if ids_as_array else list(rids),
                np.array(run_ends) if ends_as_array else run_ends,
                ends[0] if head else None,
            )
            for end in ends:
                by_pass.tokens(ids, end)
        for name in ("n_tokens", "first_token", "second_token", "last_token"):
            np.testing.assert_array_equal(getattr(by_run, name), getattr(by_pass, name))
        for a, b in zip(by_run.itl_samples(), by_pass.itl_samples()):
            np.testing.assert_array_equal(a, b)
        by_run._flush_runs()
        rates_run, rates_pass = by_run._tok_per_s, by_pass._tok_per_s
        width = max(rates_run.shape[0], rates_pass.shape[0])
        np.testing.assert_array_equal(
            np.pad(rates_run, (0, width - rates_run.shape[0])),
            np.pad(rates_pass, (0, width - rates_pass.shape[0])),
        )


@settings(max_examples=400, deadline=None)
@given(st.lists(st.floats(-1e12, 1e12, allow_nan=False) | st.floats(0, 1), max_size=140))
def test_the_mean_of_the_ranks_kv_usage_is_numpys_mean_to_the_bit(values):
    # numpy sums up to 128 values in eight running sums (pairwise beyond): the sample's mean
    # keeps that order, so its float is np.mean's, for any magnitudes.
    from plansim.sim.recorder import _mean

    expected = float(np.mean(values)) if values else 0.0
    assert _mean(values) == expected


@settings(max_examples=100, deadline=None)
@given(
    st.lists(
        st.lists(st.integers(0, 39), min_size=1, max_size=40, unique=True), min_size=1, max_size=12
    ),
    st.lists(st.floats(0.5, 900.0), min_size=12, max_size=12),
)
def test_a_pass_of_many_requests_records_what_one_by_one_would(passes, gaps):
    # Recorder.tokens on an id array (16 or more ids: the vector path, first and second tokens
    # among them) against the same passes one request at a time (the list path).
    n = 40
    vector = Recorder(n, np.zeros(n), np.zeros(n, dtype=np.int64))
    scalar = Recorder(n, np.zeros(n), np.zeros(n, dtype=np.int64))
    end = 0.0
    with pytest.MonkeyPatch.context() as m:
        m.setattr(soa, "SCALAR_ROWS", 1)
        for rids, gap in zip(passes, gaps):
            end += gap
            first_v = vector.tokens(np.array(rids, dtype=np.int64), end)
            first_s = [rid for rid in rids if scalar._few_tokens([rid], end)]
            assert first_v == first_s
    for name in ("n_tokens", "first_token", "second_token", "last_token"):
        np.testing.assert_array_equal(getattr(vector, name), getattr(scalar, name))
    for a, b in zip(vector.itl_samples(), scalar.itl_samples()):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(vector._tok_per_s, scalar._tok_per_s)
