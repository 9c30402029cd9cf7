"""Workloads whose capacity is computable by hand.

Every engine here has a fixed timing model (10 ms per pass) and one request per pass
(``max_num_seqs: 1``), so a request of 10 output tokens holds an aggregated worker for one
prefill pass and nine decode passes: 100 ms, TTFT 10 ms. Behind round-robin routing, requests
arriving every ``gap`` ms on n workers reach each worker every ``n * gap`` ms: with
``n * gap >= 100`` nobody waits; below, each worker's k-th request waits ``k * (100 - n gap)``
ms more than its first, so a TTFT bound of 500 ms is met by the first ``490 / (100 - n gap) + 1``
requests per worker and by almost no others.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from plansim.sim.deployment import Deployment, build_deployment
from plansim.traces.request_ids import ordinal_ids
from plansim.traces.workload import Workload

SERVICE_MS = 100.0  # one prefill pass + 9 decode passes of 10 ms
FIXED = {"type": "fixed", "prefill_ms": 10.0, "decode_ms": 10.0}


def workload_at(
    arrival_ms: Sequence[float], isl: int = 100, osl: int = 10, block: int = 64
) -> Workload:
    """Requests at ``arrival_ms`` with no shared prefixes."""
    arrival = np.asarray(arrival_ms, dtype=np.float64)
    n = arrival.size
    blocks = np.full(n, -(-isl // block), dtype=np.int64)
    offsets = np.concatenate([[0], np.cumsum(blocks)]).astype(np.int64)
    return Workload(
        arrival_ms=arrival,
        isl_tokens=np.full(n, isl, dtype=np.int64),
        osl_tokens=np.full(n, osl, dtype=np.int64),
        request_id=ordinal_ids(0, n),
        hash_offsets=offsets,
        hash_ids=np.arange(offsets[-1], dtype=np.int64),
        trace_block_size=block,
    )


def flat(n: int, gap_ms: float) -> Workload:
    """``n`` requests, one every ``gap_ms``."""
    return workload_at(np.arange(n) * gap_ms)


def steps(*spans: tuple[float, float]) -> Workload:
    """Consecutive spans of ``(length_s, gap_ms)``."""
    arrivals, start = [], 0.0
    for length_s, gap in spans:
        arrivals.append(np.arange(start, start + length_s * 1000.0, gap))
        start += length_s * 1000.0
    return workload_at(np.concatenate(arrivals))


def agg_deployment(
    *,
    startup_s: float | None = None,
    router: str = "round_robin",
    ttft_ms: float = 500.0,
    **extra: Any,
) -> Deployment:
    engine = {"max_num_seqs": 1, "timing_model": FIXED}
    if startup_s is not None:
        engine["startup_time"] = startup_s
    return build_deployment(
        {
            "mode": "agg",
            "num_workers": 2,
            "engine": engine,
            "router": {"mode": router},
            "sla": {"ttft_ms": ttft_ms},
            **extra,
        }
    )


def disagg_deployment(prefill_ms: float = 25.0) -> Deployment:
    """Prefill workers spend ``prefill_ms`` per request; decode workers emit all 10 tokens, one
    pass of 10 ms each (100 ms per request)."""
    engine = {
        "max_num_seqs": 1,
        "timing_model": {"type": "fixed", "prefill_ms": prefill_ms, "decode_ms": 10.0},
    }
    return build_deployment(
        {
            "mode": "disagg",
            "num_prefill_workers": 1,
            "num_decode_workers": 1,
            "prefill_engine": engine,
            "decode_engine": engine,
            "router": {"mode": "round_robin"},
            "sla": {"ttft_ms": 300.0},
        }
    )
