"""Small hand-made workloads and the reference formulas, for the simulator's tests."""

from __future__ import annotations

import numpy as np

from plansim.sim.deployment import build_deployment
from plansim.sim.host import ReplayHost, replay
from plansim.traces.workload import Workload

TOTAL_KV = 16384 * 64  # default num_gpu_blocks x block_size


def q(ms: float) -> float:
    """A pass duration as the reference stores it: whole nanoseconds."""
    return round(ms * 1e6) / 1e6


def prefill_ms(new_tokens: int) -> float:
    """Reference polynomial prefill time of a pass with ``new_tokens`` uncached tokens."""
    t = float(new_tokens)
    return q(4.209989e-7 * t * t + 1.518344e-2 * t + 16.50142)


def decode_ms(kv_tokens: int, total_kv: int = TOTAL_KV) -> float:
    """Reference polynomial decode time at ``kv_tokens`` active KV tokens."""
    u = kv_tokens / total_kv
    return q(max(1.0, -25.74 * u * u + 54.01 * u + 5.74))


def workload(
    rows: list[tuple[float, int, int, list[int]]], trace_block_size: int = 512
) -> Workload:
    """Rows of (arrival_ms, isl, osl, hash_ids); hash ids are used as prefix-chain ids."""
    n = len(rows)
    offsets = np.zeros(n + 1, dtype=np.int64)
    ids: list[int] = []
    for i, (_, _, _, h) in enumerate(rows):
        ids.extend(h)
        offsets[i + 1] = len(ids)
    return Workload(
        arrival_ms=np.array([r[0] for r in rows], dtype=np.float64),
        isl_tokens=np.array([r[1] for r in rows], dtype=np.int64),
        osl_tokens=np.array([r[2] for r in rows], dtype=np.int64),
        request_id=np.array([f"r{i}" for i in range(n)], dtype=object),
        hash_offsets=offsets,
        hash_ids=np.array(ids, dtype=np.int64),
        trace_block_size=trace_block_size,
    )


def run(rows, planner=None, decode_runs: bool = True, **deployment):
    """Replay ``rows`` against a deployment built from keyword arguments."""
    dep = build_deployment(deployment)
    if decode_runs:
        return replay(workload(rows), dep, planner)
    host = ReplayHost(workload(rows), dep, planner, decode_runs=False)
    host.run()
    return host.result(wall_ms=0.0)


def req(result, i: int):
    """Row i of the requests table (workload order)."""
    return result.requests.iloc[i]
