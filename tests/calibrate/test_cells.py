"""Windows, the held-out split, cells and their residuals."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
import pytest

from plansim.calibrate.cells import (
    MIN_CELL_REQUESTS,
    Cells,
    cell_residuals,
    cut_windows,
    make_cells,
    recorded_in_flight,
    recorded_kv_tokens,
    window_count,
)
from plansim.calibrate.recorded import Recorded, recorded_of
from tests.calibrate.calibrate_traces import synthetic


def test_windows_split_the_scored_requests_evenly_and_hold_out_every_third():
    arrival = np.arange(1200, dtype=np.float64) * 10.0
    scored = np.ones(1200, dtype=bool)
    scored[::5] = False  # 960 scored
    w = cut_windows(arrival, scored, 12)
    counts = np.bincount(w.index[scored], minlength=12)
    assert counts.tolist() == [80] * 12
    assert np.flatnonzero(w.held_out).tolist() == [1, 4, 7, 10]
    assert (np.diff(w.index) >= 0).all()  # contiguous in arrival order
    assert w.start_ms[0] == 0.0 and w.end_ms[-1] == arrival[-1]
    assert w.train().tolist() == [0, 2, 3, 5, 6, 8, 9, 11]


def test_a_short_trace_gets_fewer_windows():
    assert window_count(5000) == 12
    assert window_count(5000, 6) == 6
    assert window_count(100) == 5  # one window per 20 scored requests at most


def test_requests_in_flight_count_the_recorded_spans():
    # Three requests: 0-100 ms, 10-15 ms, 20-120 ms; request 0's decode midpoint is 55 ms,
    # when requests 0 and 2 are in flight (request 1 ended at 15 ms).
    workload = type("W", (), {"arrival_ms": np.array([0.0, 10.0, 20.0])})()
    rec = Recorded(np.array([10.0, 2.0, 10.0]), np.array([100.0, 5.0, 100.0]), np.full(3, np.nan))
    assert recorded_in_flight(workload, rec).tolist() == [2, 2, 2]


def test_kv_tokens_in_flight_sum_prompt_and_output_of_the_requests_in_flight():
    # As above; request 1's decode midpoint is 13.5 ms (requests 0 and 1 in flight), request
    # 2's 75 ms (requests 0 and 2); a request without latencies counts nowhere.
    workload = type(
        "W",
        (),
        {
            "arrival_ms": np.array([0.0, 10.0, 20.0, 30.0]),
            "isl_tokens": np.array([100, 200, 300, 400]),
            "osl_tokens": np.array([10, 20, 30, 40]),
        },
    )()
    rec = Recorded(
        np.array([10.0, 2.0, 10.0, np.nan]),
        np.array([100.0, 5.0, 100.0, np.nan]),
        np.full(4, np.nan),
    )
    assert recorded_kv_tokens(workload, rec).tolist() == [440.0, 330.0, 440.0, -1.0]


def test_a_cell_residual_is_the_mean_log_ratio_of_its_middle_half():
    rec = Recorded(np.full(8, 10.0), np.full(8, 100.0), np.full(8, 5.0))
    cells = Cells(
        np.array(["ttft", "tpot"]), np.array([0, 0]), np.ones(2), (np.arange(8), np.arange(8))
    )
    # Ratios 1.0 .. 1.4 and three strays (x10, x0.1, x0.9): the two lowest and the two highest
    # of eight are dropped, whatever their size.
    ttft = np.array([10.0, 11.0, 12.0, 13.0, 14.0, 100.0, 1.0, 9.0])
    # TPOT: a request the replay did not finish counts as LOG_CAP, among the highest.
    tpot = np.array([5.0, 5.0, 5.0, 5.5, 6.0, np.nan, 4.0, 5.0])
    r = cell_residuals(cells, ttft, tpot, rec)
    assert r[0] == pytest.approx(math.log(1.0 * 1.1 * 1.2 * 1.3) / 4)
    # Sorted log ratios: log 0.8, four 0s, log 1.1, log 1.2, LOG_CAP; the middle four remain.
    assert r[1] == pytest.approx((0 + 0 + 0 + math.log(1.1)) / 4)


def test_cells_lie_in_one_window_and_keep_only_scored_requests():
    ttft = np.full(800, 50.0)
    ttft[::7] = np.nan
    workload = dataclasses.replace(
        synthetic(n=800), recorded_ttft_ms=ttft, recorded_total_ms=ttft + 200.0
    )
    rec = recorded_of(workload)
    w = cut_windows(workload.arrival_ms, rec.scored, 6)
    cells = make_cells(workload, rec, w)
    assert {str(m) for m in cells.metric} == {"ttft", "tpot"}
    for _metric, window, members in zip(cells.metric, cells.window, cells.members):
        assert members.shape[0] >= MIN_CELL_REQUESTS
        assert (w.index[members] == window).all()
        assert rec.scored[members].all()
    # The TTFT cells of a window cover its scored requests once each.
    ttft_rows = np.concatenate([m for m, k in zip(cells.members, cells.metric) if k == "ttft"])
    assert np.unique(ttft_rows).shape[0] == ttft_rows.shape[0]
    # Weights: sqrt of each cell's share of its metric's requests.
    shares = [len(m) / rec.scored.sum() for m, k in zip(cells.members, cells.metric) if k == "ttft"]
    np.testing.assert_allclose(cells.weight[cells.metric == "ttft"], np.sqrt(shares))
