"""The replay summary: the reference replay report's keys and definitions, from result tables.

``summarize`` is pure: it reads the per-request table and the weighted token-gap samples the
engine collected, and returns a flat dict (JSON-ready floats and ints) with these keys:

- counts: ``num_requests`` (all rows), ``completed_requests``, ``total_input_tokens``,
  ``total_output_tokens`` (completed requests only);
- ``duration_ms``: the latest terminal time (last token) over completed requests, virtual ms
  from the first arrival; throughputs over ``duration_s = max(duration_ms / 1000, 1e-9)``:
  ``request_throughput_rps``, ``input_throughput_tok_s``, ``output_throughput_tok_s``,
  ``total_throughput_tok_s``;
- capacity: ``prefill_worker_seconds``, ``decode_worker_seconds`` (provisioned workers over the
  replay, until ``replay_end_ms``: the last completion or the last arrival, whichever is later),
  ``prefill_gpus_per_worker``, ``decode_gpus_per_worker``,
  ``gpu_hours = (pws * pgpw + dws * dgpw) / 3600``;
- ``prefix_cache_reused_ratio``: reused input tokens / input tokens over completed requests;
- distributions ``{mean,min,max,median,p75,p90,p95,p99,std}_{x}_ms`` for x in ``ttft``,
  ``ttst``, ``tpot``, ``itl``, ``e2e_latency`` (completed requests; ``itl`` over every token gap),
  ``max_itl_ms``, and ``{...}_output_token_throughput_per_user`` (tokens/s = 1000 / gap, over the
  non-zero gaps);
- with an SLA: ``goodput_completed_requests``, ``goodput_request_throughput_rps``,
  ``goodput_output_throughput_tok_s``;
- with ``wall_time_ms``: ``wall_time_ms``, ``processed_tokens``, ``processed_tokens_per_s``,
  ``processed_output_tokens_per_s`` (over wall time).

Percentiles use the reference's rounded-rank rule: the value at rank
``round_half_up((n - 1) * p / 100)`` of the sorted samples (no interpolation). ``std`` is the
population standard deviation. An empty distribution reports zeros, as the reference does.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from plansim.result_table import column
from plansim.schema import SUMMARY_STATS

if TYPE_CHECKING:
    import pandas as pd

PERCENTILES: tuple[tuple[str, float], ...] = (
    ("median", 50.0),
    ("p75", 75.0),
    ("p90", 90.0),
    ("p95", 95.0),
    ("p99", 99.0),
)
STAT_NAMES: tuple[str, ...] = SUMMARY_STATS


@dataclass(frozen=True, slots=True)
class SlaThresholds:
    """Goodput thresholds in ms; ``None`` means not checked. ``tpot_ms`` bounds a request's
    mean token gap (the reference's ``sla_itl_ms``). The reference takes ``ttft_ms`` +
    ``tpot_ms`` together, or ``e2e_ms`` alone."""

    ttft_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None


# Keys that measure the host (wall clock), not the simulation: left out wherever a result must
# be byte-identical for the same inputs and seed (summary.json, retune candidate scores).
HOST_DEPENDENT_KEYS = frozenset(
    {"wall_time_ms", "processed_tokens_per_s", "processed_output_tokens_per_s"}
)


def without_host_keys(summary: dict[str, Any]) -> dict[str, Any]:
    """``summary`` without the wall-clock figures."""
    return {k: v for k, v in summary.items() if k not in HOST_DEPENDENT_KEYS}


def weighted_stats(values: np.ndarray, counts: np.ndarray | None = None) -> dict[str, float]:
    """mean/min/max/median/p75/p90/p95/p99/std of samples ``values`` repeated ``counts`` times,
    without expanding them. Non-finite values and non-positive counts are ignored."""
    v = np.asarray(values, dtype=np.float64)
    c = np.ones_like(v) if counts is None else np.asarray(counts, dtype=np.float64)
    keep = np.isfinite(v) & (c > 0)
    v, c = v[keep], c[keep]
    total = float(c.sum())
    if total <= 0:
        return dict.fromkeys(STAT_NAMES, 0.0)
    order = np.argsort(v, kind="stable")
    v, c = v[order], c[order]
    mean = float(np.dot(v, c) / total)
    stats = {
        "mean": mean,
        "min": float(v[0]),
        "max": float(v[-1]),
        "std": math.sqrt(max(float(np.dot((v - mean) ** 2, c) / total), 0.0)),
    }
    cumulative = np.cumsum(c)
    for name, pct in PERCENTILES:
        # 0-based rank into the expanded sorted samples, rounded half up like Rust's f64::round.
        rank = min(math.floor((total - 1) * pct / 100.0 + 0.5), total - 1)
        stats[name] = float(v[int(np.searchsorted(cumulative, rank, side="right"))])
    return stats


def replay_duration_ms(requests: Any) -> float:
    """The latest last-token time (virtual ms) over completed requests of a requests ``Table``
    or DataFrame; 0.0 when there is none."""
    done = column(requests, "status") == "completed"
    last_ms = column(requests, "last_token_ms", np.float64)[done]
    return float(np.nanmax(last_ms)) if np.isfinite(last_ms).any() else 0.0


def replay_end_ms(requests: Any) -> float:
    """When the replay of a requests ``Table`` or DataFrame ends (virtual ms), the span its
    workers are provisioned for: the last completion or the last arrival, whichever is later (a
    request rejected on arrival ends there), as the reference integrates worker time. A replay
    whose requests were all rejected still held its workers until the last of them arrived."""
    arrival_ms = column(requests, "arrival_ms", np.float64)
    arrived = arrival_ms[np.isfinite(arrival_ms)]
    last_arrival_ms = float(arrived.max()) if arrived.size else 0.0
    return max(replay_duration_ms(requests), last_arrival_ms)


def _put(out: dict[str, Any], prefix: str, stats: dict[str, float], suffix: str = "_ms") -> None:
    for name in STAT_NAMES:
        out[f"{name}_{prefix}{suffix}"] = stats[name]


def summarize(
    requests: Any,
    itl_gap_ms: np.ndarray,
    itl_gap_count: np.ndarray,
    *,
    prefill_worker_seconds: float,
    decode_worker_seconds: float,
    prefill_gpus_per_worker: int,
    decode_gpus_per_worker: int,
    sla: SlaThresholds | None = None,
    wall_time_ms: float | None = None,
) -> dict[str, Any]:
    """The summary dict (keys in the module docstring) of one replay.

    ``requests`` (a ``plansim.result_table.Table`` or a DataFrame) follows the ``requests``
    schema of ``plansim.sim.result`` (needs ``status``, ``input_length``, ``output_length``,
    ``reused_input_tokens``, ``arrival_ms``, ``first_token_ms``, ``last_token_ms``,
    ``ttst_ms``, ``tpot_ms``). ``itl_gap_ms`` /
    ``itl_gap_count`` are weighted samples of the token gaps (ms) of completed requests:
    gap value i occurred ``itl_gap_count[i]`` times. Worker-seconds are provisioned-worker
    integrals over virtual time; aggregated replays report theirs as decode.
    ``sla`` is any object with ``ttft_ms``/``tpot_ms``/``e2e_ms`` attributes (None = unset).
    """
    done = column(requests, "status") == "completed"

    def completed(name: str, dtype: Any = np.float64) -> np.ndarray:
        return column(requests, name, dtype)[done]

    n_done = int(done.sum())
    input_tokens = int(completed("input_length", None).sum())
    output_tokens = int(completed("output_length", None).sum())
    reused_tokens = int(completed("reused_input_tokens", None).sum())
    last_ms = completed("last_token_ms")
    duration_ms = replay_duration_ms(requests)
    duration_s = max(duration_ms / 1000.0, 1e-9)

    out: dict[str, Any] = {
        "num_requests": len(requests),
        "completed_requests": n_done,
        "total_input_tokens": input_tokens,
        "total_output_tokens": output_tokens,
        "duration_ms": duration_ms,
        "request_throughput_rps": n_done / duration_s,
        "input_throughput_tok_s": input_tokens / duration_s,
        "output_throughput_tok_s": output_tokens / duration_s,
        "total_throughput_tok_s": (input_tokens + output_tokens) / duration_s,
        "prefill_worker_seconds": float(prefill_worker_seconds),
        "decode_worker_seconds": float(decode_worker_seconds),
        "prefill_gpus_per_worker": int(prefill_gpus_per_worker),
        "decode_gpus_per_worker": int(decode_gpus_per_worker),
        "gpu_hours": (
            prefill_worker_seconds * prefill_gpus_per_worker
            + decode_worker_seconds * decode_gpus_per_worker
        )
        / 3600.0,
        "prefix_cache_reused_ratio": reused_tokens / input_tokens if input_tokens else 0.0,
    }

    arrival = completed("arrival_ms")
    ttft = np.maximum(completed("first_token_ms") - arrival, 0.0)
    e2e = np.maximum(last_ms - arrival, 0.0)
    _put(out, "ttft", weighted_stats(ttft))
    _put(out, "ttst", weighted_stats(completed("ttst_ms")))
    _put(out, "tpot", weighted_stats(completed("tpot_ms")))
    gaps = np.maximum(np.asarray(itl_gap_ms, dtype=np.float64), 0.0)
    gap_counts = np.asarray(itl_gap_count, dtype=np.float64)
    itl = weighted_stats(gaps, gap_counts)
    _put(out, "itl", itl)
    out["max_itl_ms"] = itl["max"]
    _put(out, "e2e_latency", weighted_stats(e2e))
    positive = gaps > 0
    per_user = weighted_stats(1000.0 / gaps[positive], gap_counts[positive])
    _put(out, "output_token_throughput_per_user", per_user, suffix="")

    if sla is not None and _sla_is_set(sla):
        n_out = completed("output_length", np.int64)
        good = _good_mask(sla, ttft, e2e, n_out)
        good_requests = int(good.sum())
        good_tokens = int(n_out[good].sum())
        out["goodput_completed_requests"] = good_requests
        out["goodput_request_throughput_rps"] = good_requests / duration_s
        out["goodput_output_throughput_tok_s"] = good_tokens / duration_s

    if wall_time_ms is not None:
        processed = input_tokens + output_tokens
        wall_s = wall_time_ms / 1000.0
        out["wall_time_ms"] = float(wall_time_ms)
        out["processed_tokens"] = processed
        out["processed_tokens_per_s"] = processed / wall_s if wall_s > 0 else 0.0
        out["processed_output_tokens_per_s"] = output_tokens / wall_s if wall_s > 0 else 0.0
    return out


def good_mask(requests: pd.DataFrame, sla: Any) -> np.ndarray:
    """Per row of ``requests`` (the ``requests`` schema of ``plansim.sim.result``): whether the
    request completed and met every threshold of ``sla`` that is set, by the rule ``summarize``
    counts goodput with. All False when no threshold is set."""
    good = np.zeros(len(requests), dtype=bool)
    if sla is None or not _sla_is_set(sla):
        return good
    done = (requests["status"] == "completed").to_numpy()
    arrival = requests["arrival_ms"].to_numpy(dtype=np.float64)[done]
    ttft = np.maximum(requests["first_token_ms"].to_numpy(dtype=np.float64)[done] - arrival, 0.0)
    e2e = np.maximum(requests["last_token_ms"].to_numpy(dtype=np.float64)[done] - arrival, 0.0)
    n_out = requests["output_length"].to_numpy(dtype=np.int64)[done]
    good[done] = _good_mask(sla, ttft, e2e, n_out)
    return good


def _sla_is_set(sla: Any) -> bool:
    return any(getattr(sla, key, None) is not None for key in ("ttft_ms", "tpot_ms", "e2e_ms"))


def _good_mask(sla: Any, ttft: np.ndarray, e2e: np.ndarray, n_out: np.ndarray) -> np.ndarray:
    """Requests meeting every set threshold; TPOT is the request's average gap
    ``(e2e - ttft) / (n_out - 1)``, checked only when ``n_out > 1``. A completed request with
    no token has no TTFT/E2E (NaN) and is never counted good."""
    good = np.ones(ttft.shape, dtype=bool)
    if sla.e2e_ms is not None:
        good &= e2e <= sla.e2e_ms
    if sla.ttft_ms is not None:
        good &= ttft <= sla.ttft_ms
    if sla.tpot_ms is not None:
        multi = n_out > 1
        tpot = np.full(ttft.shape, -np.inf)
        tpot[multi] = (e2e[multi] - ttft[multi]) / (n_out[multi] - 1)
        good &= tpot <= sla.tpot_ms
    return good
