"""Pre-deployment profiling data (reference section 8) converted to bootstrap FPMs.

Pure conversions from arrays; :mod:`plansim.planner_io` reads the arrays from disk.

- Planner profile form (``profile_results_dir``): prefill ``prefill_isl`` (tokens) and
  ``prefill_ttft`` (ms) -> one FPM per sample with one prefill request of ``isl`` tokens and
  wall time ``ttft_ms / 1000``; decode ``x_kv_usage`` (0..1), ``y_context_length`` (tokens),
  ``z_itl`` (ms) and ``max_kv_tokens`` -> ``sum_decode_kv = round(kv_usage * max_kv_tokens)``,
  batch ``max(1, round(sum_kv / ctx))``, wall time ``itl_ms / 1000``.
- Engine timing-profile form (the simulator's NPZ: ``prefill_isl``, ``prefill_ttft_ms``,
  ``decode_active_kv_tokens`` x ``decode_context_length`` -> ``decode_itl`` ms): the same
  conversion with the active KV tokens given directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from plansim.planner_core.observations import ForwardPassMetrics
from plansim.roles import Role

PROFILE_WORKER_ID = -1  # bootstrap FPMs belong to no live worker


def _fpm(
    *,
    prefill_tokens: int = 0,
    n_prefill: int = 0,
    decode_kv: int = 0,
    n_decode: int = 0,
    wall_s: float,
) -> ForwardPassMetrics:
    return ForwardPassMetrics.sample(
        PROFILE_WORKER_ID,
        float(wall_s),
        n_prefill=n_prefill,
        prefill_tokens=prefill_tokens,
        n_decode=n_decode,
        decode_kv_tokens=decode_kv,
    )


def prefill_fpms(isl: Any, ttft_ms: Any) -> tuple[ForwardPassMetrics, ...]:
    """One single-request prefill pass per profiled ISL."""
    isl_a, ttft_a = np.asarray(isl, float).ravel(), np.asarray(ttft_ms, float).ravel()
    if isl_a.shape != ttft_a.shape:
        raise ValueError("prefill_isl and prefill TTFT arrays differ in length")
    return tuple(
        _fpm(prefill_tokens=int(round(i)), n_prefill=1, wall_s=t / 1000.0)
        for i, t in zip(isl_a, ttft_a)
        if i > 0 and t > 0
    )


def decode_fpms_from_usage(
    kv_usage: Any, context_length: Any, itl_ms: Any, max_kv_tokens: float
) -> tuple[ForwardPassMetrics, ...]:
    """Planner decode samples (parallel arrays of KV usage, context length and ITL)."""
    usage = np.asarray(kv_usage, float).ravel()
    ctx = np.asarray(context_length, float).ravel()
    itl = np.asarray(itl_ms, float).ravel()
    if not (usage.shape == ctx.shape == itl.shape):
        raise ValueError("x_kv_usage, y_context_length and z_itl differ in length")
    return _decode(np.rint(usage * float(max_kv_tokens)), ctx, itl)


def decode_fpms_from_grid(
    active_kv: Any, context_length: Any, itl_grid_ms: Any
) -> tuple[ForwardPassMetrics, ...]:
    """Engine-profile decode grid: ``itl_grid_ms[i, j]`` at ``active_kv[i]``,
    ``context_length[j]``."""
    kv = np.asarray(active_kv, float).ravel()
    ctx = np.asarray(context_length, float).ravel()
    grid = np.asarray(itl_grid_ms, float)
    if grid.shape != (kv.size, ctx.size):
        raise ValueError("decode_itl must be shaped (active KV tokens, context lengths)")
    kv_m, ctx_m = np.meshgrid(kv, ctx, indexing="ij")
    return _decode(kv_m.ravel(), ctx_m.ravel(), grid.ravel())


def _decode(
    sum_kv: np.ndarray, ctx: np.ndarray, itl_ms: np.ndarray
) -> tuple[ForwardPassMetrics, ...]:
    out = []
    for kv, c, t in zip(sum_kv, ctx, itl_ms):
        if kv <= 0 or c <= 0 or not t > 0:
            continue
        out.append(_fpm(decode_kv=int(kv), n_decode=max(1, int(round(kv / c))), wall_s=t / 1000.0))
    return tuple(out)


def fpms_from_arrays(arrays: Mapping[str, Any]) -> dict[str, tuple[ForwardPassMetrics, ...]]:
    """Bootstrap FPMs per role from one mapping of named arrays (either form above)."""
    out: dict[str, tuple[ForwardPassMetrics, ...]] = {}
    ttft = arrays.get("prefill_ttft", arrays.get("prefill_ttft_ms"))
    if "prefill_isl" in arrays and ttft is not None:
        out[Role.PREFILL] = prefill_fpms(arrays["prefill_isl"], ttft)
    if {"x_kv_usage", "y_context_length", "z_itl", "max_kv_tokens"} <= set(arrays):
        max_kv = float(np.asarray(arrays["max_kv_tokens"], float).ravel()[0])
        out[Role.DECODE] = decode_fpms_from_usage(
            arrays["x_kv_usage"], arrays["y_context_length"], arrays["z_itl"], max_kv
        )
    elif {"decode_active_kv_tokens", "decode_context_length", "decode_itl"} <= set(arrays):
        out[Role.DECODE] = decode_fpms_from_grid(
            arrays["decode_active_kv_tokens"], arrays["decode_context_length"], arrays["decode_itl"]
        )
    return out
