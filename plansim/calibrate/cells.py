"""What a fit compares: the trace cut into time windows, and per window, cells of requests whose
replayed latencies are set against the recorded ones.

Windows (``cut_windows``) are contiguous in arrival time and hold about the same number of
requests with recorded latencies; every third one (windows 1, 4, 7, ...) is held out: the fit
never sees it, and its error is the calibration's held-out error.

A cell (``make_cells``) is the requests of one window in one band: for TTFT, a quartile of the
prompt length; for TPOT, a tercile of the recorded KV tokens in flight (prompt and output of
the requests in flight, from the recorded arrivals and E2E, at the middle of the request's
decode), so that the cells span the load levels and contexts the trace saw. A cell's residual
is the trimmed mean over its requests of ``log(replayed / recorded)`` (the middle half): per
request, as the user's own requests were
served, robust to the few requests the router placed differently from production (a
per-request sum of squares is dominated by them and jumps with every routing change), and
smoother in the parameters than a median (one request's value).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from plansim.calibrate.recorded import Recorded

DEFAULT_WINDOWS = 12
HELD_OUT_EVERY = 3
MIN_WINDOWS = 3
MIN_WINDOW_REQUESTS = 20
MIN_CELL_REQUESTS = 8
TTFT_BANDS = 4
TPOT_BANDS = 3
# A replayed latency missing (the request was rejected or never finished) or this far off counts
# as this log ratio (e^3: 20 times).
LOG_CAP = 3.0
# A cell's residual is the mean of its log ratios less the lowest and highest quarter.
TRIM = 0.25


@dataclass(frozen=True, slots=True)
class Windows:
    """``count`` windows: per window its first and last arrival (ms from the trace's first
    arrival) and whether it is held out; per request its window."""

    start_ms: np.ndarray
    end_ms: np.ndarray
    held_out: np.ndarray
    index: np.ndarray

    @property
    def count(self) -> int:
        return int(self.held_out.shape[0])

    def train(self) -> np.ndarray:
        return np.flatnonzero(~self.held_out)


def window_count(scored: int, requested: int | None = None) -> int:
    """Windows for ``scored`` requests: ``requested``, else ``DEFAULT_WINDOWS``, at most one per
    ``MIN_WINDOW_REQUESTS`` scored requests."""
    return max(1, min(requested or DEFAULT_WINDOWS, scored // MIN_WINDOW_REQUESTS))


def cut_windows(arrival_ms: np.ndarray, scored: np.ndarray, count: int) -> Windows:
    """``count`` windows over requests sorted by arrival, each starting at a scored request
    so that the scored requests split evenly."""
    rows = np.flatnonzero(scored)
    firsts = rows[(np.arange(count) * rows.shape[0]) // count]
    firsts[0] = 0
    index = np.searchsorted(firsts, np.arange(arrival_ms.shape[0]), side="right") - 1
    t = np.asarray(arrival_ms, dtype=np.float64) - float(arrival_ms[0])
    lasts = np.append(firsts[1:], arrival_ms.shape[0]) - 1
    held = (np.arange(count) % HELD_OUT_EVERY) == 1
    return Windows(t[firsts], t[lasts], held, index)


@dataclass(frozen=True, slots=True)
class Cells:
    """The cells: ``metric`` (``ttft`` or ``tpot``), ``window`` and ``weight`` per cell, and
    its requests. Weights are ``sqrt(requests / all requests of the metric)``: a cell's mean
    is as precise as its size allows, and TTFT and TPOT weigh the same in all."""

    metric: np.ndarray
    window: np.ndarray
    weight: np.ndarray
    members: tuple[np.ndarray, ...]

    def __len__(self) -> int:
        return int(self.window.shape[0])

    def of_windows(self, windows: np.ndarray) -> np.ndarray:
        """Cells lying in any of ``windows``."""
        return np.flatnonzero(np.isin(self.window, windows))


def recorded_in_flight(
    workload: Any, recorded: Recorded, weight: np.ndarray | None = None
) -> np.ndarray:
    """Per scored request, the recorded requests in flight at the middle of its decode (-1 for
    a request without recorded latencies); with ``weight`` (one per request), the sum of their
    weights instead."""
    ok = recorded.scored
    arrival = np.asarray(workload.arrival_ms, dtype=np.float64)
    w = np.ones(arrival.shape[0]) if weight is None else np.asarray(weight, dtype=np.float64)
    start_order = np.argsort(arrival[ok], kind="stable")
    ends = arrival[ok] + recorded.e2e_ms[ok]
    end_order = np.argsort(ends, kind="stable")
    started = np.concatenate(([0.0], np.cumsum(w[ok][start_order])))
    ended = np.concatenate(([0.0], np.cumsum(w[ok][end_order])))
    at = arrival + (recorded.ttft_ms + recorded.e2e_ms) / 2.0
    total = (
        started[np.searchsorted(arrival[ok][start_order], at, side="right")]
        - ended[np.searchsorted(ends[end_order], at, side="right")]
    )
    return np.where(ok, total, -1.0)


def recorded_kv_tokens(workload: Any, recorded: Recorded) -> np.ndarray:
    """Per scored request, the tokens of the recorded requests in flight at the middle of its
    decode (prompt and output of each: the KV cache a decode pass reads, as the recorded
    traffic held it)."""
    tokens = np.asarray(workload.isl_tokens) + np.asarray(workload.osl_tokens)
    return recorded_in_flight(workload, recorded, tokens)


def _bands(values: np.ndarray, mask: np.ndarray, n: int) -> np.ndarray:
    """Band 0..n-1 of each value by the quantiles of the values under ``mask``."""
    edges = np.quantile(values[mask], np.arange(1, n) / n) if mask.any() else np.zeros(n - 1)
    return np.searchsorted(edges, values, side="right")


def make_cells(workload: Any, recorded: Recorded, windows: Windows) -> Cells:
    """The cells of every window (module docstring); cells under ``MIN_CELL_REQUESTS`` are
    left out. What a training cell holds depends on the training windows alone: band edges
    are quantiles of their requests, and KV tokens in flight count the requests of the same
    side of the split (a held-out request beside a training one at a window's edge is not
    seen from it)."""
    held = windows.held_out[windows.index]
    train = ~held
    ttft_ok = recorded.scored
    tpot_ok = np.isfinite(recorded.tpot_ms)
    kv = np.where(
        held,
        recorded_kv_tokens(workload, recorded.only(held)),
        recorded_kv_tokens(workload, recorded.only(train)),
    )
    groups = [
        (
            "ttft",
            ttft_ok,
            _bands(np.asarray(workload.isl_tokens), ttft_ok & train, TTFT_BANDS),
            TTFT_BANDS,
        ),
        ("tpot", tpot_ok, _bands(kv, tpot_ok & train, TPOT_BANDS), TPOT_BANDS),
    ]
    metric, window, weight, members = [], [], [], []
    for name, ok, band, n in groups:
        total = max(int(ok.sum()), 1)
        key = np.where(ok, windows.index * n + band, -1)
        order = np.argsort(key, kind="stable")
        keys, starts = np.unique(key[order], return_index=True)
        bounds = np.append(starts, key.shape[0])
        for k, lo, hi in zip(keys, bounds[:-1], bounds[1:]):
            if k < 0 or hi - lo < MIN_CELL_REQUESTS:
                continue
            metric.append(name)
            window.append(int(k) // n)
            weight.append(np.sqrt((hi - lo) / total))
            members.append(order[lo:hi])
    return Cells(
        np.array(metric),
        np.array(window, dtype=np.int64),
        np.array(weight, dtype=np.float64),
        tuple(members),
    )


def log_ratios(replayed: np.ndarray, recorded: np.ndarray) -> np.ndarray:
    """``log(replayed / recorded)`` per request, capped at ``LOG_CAP`` either way; a missing
    replayed value counts as ``LOG_CAP``."""
    with np.errstate(invalid="ignore", divide="ignore"):
        r = np.log(np.maximum(replayed, 1e-6) / np.maximum(recorded, 1e-6))
    return np.clip(np.where(np.isnan(r), LOG_CAP, r), -LOG_CAP, LOG_CAP)


def cell_residuals(
    cells: Cells,
    ttft_ms: np.ndarray,
    tpot_ms: np.ndarray,
    recorded: Recorded,
    rows: np.ndarray | None = None,
) -> np.ndarray:
    """Each cell's trimmed mean (``TRIM``) log ratio of replayed to recorded latency (of the
    cells ``rows``, or all), unweighted."""
    from scipy.stats import trim_mean

    by_metric = {
        "ttft": log_ratios(ttft_ms, recorded.ttft_ms),
        "tpot": log_ratios(tpot_ms, recorded.tpot_ms),
    }
    rows = range(len(cells)) if rows is None else rows
    return np.array([trim_mean(by_metric[cells.metric[c]][cells.members[c]], TRIM) for c in rows])
