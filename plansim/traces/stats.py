"""Descriptive statistics of a workload (what ``plansim trace inspect`` prints)."""

from __future__ import annotations

from typing import Any

import numpy as np

from plansim.traces.graph import TRIGGER_NAMES, RequestGraph
from plansim.traces.workload import Workload

PERCENTILES = (50, 90, 99)


def length_stats(values: np.ndarray) -> dict[str, float]:
    """mean, p50, p90, p99 and max of a length (or latency) column; NaNs ignored."""
    v = np.asarray(values, dtype=np.float64)
    v = v[~np.isnan(v)]
    if v.size == 0:
        return {}
    out = {"mean": float(v.mean())}
    for p, q in zip(PERCENTILES, np.percentile(v, PERCENTILES), strict=True):
        out[f"p{p}"] = float(q)
    out["max"] = float(v.max())
    return out


def peak_rate_rps(arrival_ms: np.ndarray, window_s: float = 60.0) -> float:
    """Highest request rate over any ``window_s``-long span that starts at an arrival."""
    a = np.sort(np.asarray(arrival_ms, dtype=np.float64))
    if a.size == 0:
        return 0.0
    ends = np.searchsorted(a, a + window_s * 1000.0, side="left")
    return float((ends - np.arange(a.size)).max()) / window_s


def prefix_reuse_bound(workload: Workload) -> float:
    """Share of block references whose prefix appeared in an earlier request: the prefix reuse
    an infinite cache could reach (an upper bound for any real cache)."""
    total = int(workload.hash_ids.size)
    if total == 0:
        return 0.0
    return 1.0 - int(np.unique(workload.hash_ids).size) / total


def reusable_prefix_tokens(workload: Workload) -> np.ndarray:
    """Per request (in arrival order), the prompt tokens whose prefix block some earlier request
    already had: what an infinite cache shared by all workers would serve (at most the prompt)."""
    n = len(workload)
    ids = workload.hash_ids
    if n == 0 or ids.size == 0:
        return np.zeros(n, dtype=np.int64)
    owner = np.repeat(np.arange(n), np.diff(workload.hash_offsets))
    _, first, inverse = np.unique(ids, return_index=True, return_inverse=True)
    repeat = owner[first][inverse] < owner
    blocks = np.bincount(owner[repeat], minlength=n)
    return np.minimum(blocks * workload.trace_block_size, workload.isl_tokens).astype(np.int64)


def describe(workload: Workload) -> dict[str, Any]:
    """Counts, time span, rates, length distributions, block size and the prefix-reuse bound."""
    n = len(workload)
    a = workload.arrival_ms
    first_ms, last_ms = (float(a.min()), float(a.max())) if n else (None, None)
    span_s = (last_ms - first_ms) / 1000.0 if n else 0.0
    out: dict[str, Any] = {
        "requests": n,
        "skipped": dict(sorted(workload.skipped.items())),
        "rows_read": n + sum(workload.skipped.values()),
        "first_arrival_ms": first_ms,
        "last_arrival_ms": last_ms,
        "span_s": span_s,
        "mean_rate_rps": n / span_s if span_s > 0 else None,
        "peak_1min_rate_rps": peak_rate_rps(a),
        "isl_tokens": length_stats(workload.isl_tokens),
        "osl_tokens": length_stats(workload.osl_tokens),
        "trace_block_size": int(workload.trace_block_size),
        "blocks": int(workload.hash_ids.size),
        "prefix_reuse_upper_bound": prefix_reuse_bound(workload),
    }
    for name, arr in (
        ("recorded_ttft_ms", workload.recorded_ttft_ms),
        ("recorded_total_ms", workload.recorded_total_ms),
    ):
        if arr is not None and np.any(~np.isnan(arr)):
            out[name] = length_stats(arr)
    if workload.graph is not None:
        out.update(closed_loop_stats(workload.graph))
    return out


def closed_loop_stats(graph: RequestGraph) -> dict[str, Any]:
    """Sessions, turns per session, dependency edges (by trigger) and how many requests wait
    for a dependency (the rest are released at their own time)."""
    in_session = graph.session[graph.session >= 0]
    turns = np.bincount(in_session, minlength=graph.num_sessions)
    waiting = int(np.count_nonzero(np.diff(graph.dep_offsets)))
    return {
        "sessions": graph.num_sessions,
        "turns_per_session": length_stats(turns) if turns.size else {},
        "dependency_edges": graph.num_edges,
        "edges_by_trigger": {
            name: int(np.count_nonzero(graph.dep_trigger == code))
            for code, name in TRIGGER_NAMES.items()
            if np.any(graph.dep_trigger == code)
        },
        "requests_waiting_on_dependencies": waiting,
        "requests_outside_sessions": int(np.count_nonzero(graph.session < 0)),
    }
