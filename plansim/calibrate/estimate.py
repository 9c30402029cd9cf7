"""The fast estimate a fit starts from: the recorded latencies of the training windows'
requests that met no queueing, judged by a replay (``fast_estimate``: on the deployment as
given, then again on the polynomial model at what the first gave).

- **Prefill**: a request admitted the instant it arrived found its rank idle, so its TTFT is
  its own prefill passes: chunks of ``max_num_batched_tokens`` of its new tokens (the prompt
  less the prefix the replay found cached). A robust fit (Cauchy loss on log ratios) of their
  recorded TTFT on each request's sum over its chunks of ``(1, c, c^2)`` gives the prefill
  coefficients, and with a constant per request the overhead outside the engines: the two are
  told apart only by requests of more than one chunk (``MIN_UNQUEUED`` of them at least; with
  fewer the overhead starts at 0 and the prefill constant takes it).
- **Decode**: a request's TPOT is at least the decode pass time at the KV fill it ran at (prefill
  chunks of other requests only add to it), so the decode coefficients are fitted through the
  20th percentile of the recorded TPOT in bands of the replay's KV fill over the request's
  decode (requests of 16 output tokens or more).
- **Scales** (the ``scaled`` family): the median ratio of recorded TTFT (less the overhead) to
  the first replay's over the unqueued requests, and the ratio of the 20th percentiles of
  recorded to replayed TPOT.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from plansim.calibrate.families import Scales
from plansim.calibrate.recorded import Recorded
from plansim.sim.timing.polynomial import P0, P1, P2, U0, U1, U2

MIN_UNQUEUED = 20
MIN_DECODE_TOKENS = 16
DECODE_QUANTILE = 0.2
DECODE_BANDS = 8


@dataclass(frozen=True, slots=True)
class FastEstimate:
    """Start values: ``prefill`` (ms, ms/token, ms/token^2), ``decode`` (ms, ms per unit of KV
    fill, per its square), ``prefill_scale`` / ``decode_scale`` on the deployment's model,
    ``overhead_ms`` per request; how many requests each rests on (``multi_chunk``: unqueued
    requests of more than one prefill chunk); the KV fill the replay reached (95th percentile
    over the requests' decodes) and the token budget of a pass."""

    prefill: tuple[float, float, float]
    decode: tuple[float, float, float]
    prefill_scale: float
    decode_scale: float
    overhead_ms: float
    unqueued_prefill: int
    multi_chunk: int
    decode_requests: int
    kv_fill: float
    budget_tokens: int


def request_kv_fill(requests: Any, timeseries: Any, pool: str) -> np.ndarray:
    """Per request, the mean KV fill of ``pool`` (its ranks' active KV fraction, sampled each
    second) from its first token to its last; NaN for a request without both."""
    ts = timeseries["time_s"][timeseries["pool"] == pool] * 1000.0
    fill = timeseries["kv_usage"][timeseries["pool"] == pool]
    if ts.shape[0] == 0:
        return np.full(len(requests["ttft_ms"]), np.nan)
    cum = np.concatenate(([0.0], np.cumsum(fill)))
    lo = np.searchsorted(ts, requests["first_token_ms"], side="left")
    hi = np.searchsorted(ts, requests["last_token_ms"], side="right")
    # A decode shorter than a sample period takes the sample that follows it.
    hi = np.maximum(hi, np.minimum(lo + 1, ts.shape[0]))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = (cum[hi] - cum[lo]) / (hi - lo)
    return np.where(np.isfinite(requests["last_token_ms"]), out, np.nan)


def chunk_features(new_tokens: np.ndarray, budget: int) -> np.ndarray:
    """Per request, the sum over its prefill chunks (``budget`` tokens each, the last one the
    remainder) of ``(1, c, c^2)``."""
    full = new_tokens // budget
    rem = new_tokens - full * budget
    return np.column_stack(
        [
            full + (rem > 0),
            new_tokens.astype(np.float64),
            full * float(budget) ** 2 + rem.astype(np.float64) ** 2,
        ]
    )


def fast_estimate(
    workload: Any, recorded: Recorded, deployment: Any, train: np.ndarray
) -> FastEstimate:
    """The start values from the recorded latencies of the requests ``train`` (a mask: scored
    requests of the training windows) and two replays: on ``deployment`` as given, then on the
    polynomial model at what the first gave, so that which requests met no queueing is judged
    on a timing near production's (a replay faster than production calls unqueued requests
    that production queued). The scales are the first replay's: they scale the deployment's own
    model."""
    from dataclasses import replace

    from plansim import api
    from plansim.calibrate.families import OVERHEAD_KEY, POLYNOMIAL
    from plansim.sim.deployment import with_overrides

    first = estimate_from(
        workload, recorded, api.replay(workload, api.setup(deployment)), deployment, train
    )
    values = np.array([*first.prefill, *first.decode])
    polynomial = with_overrides(
        deployment, {**POLYNOMIAL.overrides(values, deployment), OVERHEAD_KEY: 0.0}
    )
    second = estimate_from(
        workload, recorded, api.replay(workload, api.setup(polynomial)), polynomial, train
    )
    return replace(second, prefill_scale=first.prefill_scale, decode_scale=first.decode_scale)


def estimate_from(
    workload: Any, recorded: Recorded, replay: Any, deployment: Any, train: np.ndarray
) -> FastEstimate:
    """The start values from one ``replay`` (a ``ReplayResult`` of ``workload`` on
    ``deployment``) and the recorded latencies of the requests ``train`` (module docstring)."""
    from scipy.optimize import least_squares

    from plansim.roles import Mode

    req = replay.tables["requests"]
    args = deployment.prefill_args if Mode(deployment.mode) == Mode.DISAGG else deployment.engine
    budget = int(args.max_num_batched_tokens)
    new = np.maximum(np.asarray(workload.isl_tokens) - req["reused_input_tokens"], 1)
    unqueued = train & (req["first_admit_ms"] == req["arrival_ms"]) & np.isfinite(req["ttft_ms"])
    n_un = int(unqueued.sum())
    prefill = (P0, P1, P2)
    prefill_scale, overhead = 1.0, 0.0
    multi = int((unqueued & (new > budget)).sum())
    if n_un >= MIN_UNQUEUED:
        features = chunk_features(new[unqueued], budget)
        y = recorded.ttft_ms[unqueued]
        with_overhead = multi >= MIN_UNQUEUED
        if with_overhead:
            features = np.column_stack([features, np.ones(n_un)])
        scale = np.array([P0, P1, P2, P0][: features.shape[1]])
        # Log ratios under a Cauchy loss: a request the replay found uncached but production
        # served from its cache (or the other way round) is off by a factor of ten or more, and
        # must not pull the fit.
        fit = least_squares(
            lambda c: np.log(features @ (c * scale) / y),
            np.ones(features.shape[1]),
            bounds=(1e-6, np.inf),
            loss="cauchy",
            f_scale=0.05,
        )
        coefficients = fit.x * scale
        prefill = tuple(float(v) for v in coefficients[:3])
        overhead = float(coefficients[3]) if with_overhead else 0.0
        prefill_scale = float(np.median((y - overhead) / req["ttft_ms"][unqueued]))

    visible = Mode(deployment.mode).visible_pool.value
    fill = request_kv_fill(req, replay.tables["timeseries"], visible)
    long = (
        train
        & np.isfinite(recorded.tpot_ms)
        & (np.asarray(workload.osl_tokens) >= MIN_DECODE_TOKENS)
        & np.isfinite(fill)
        & np.isfinite(req["tpot_ms"])
    )
    decode = (U0, U1, U2)
    decode_scale = 1.0
    kv_fill = float(np.quantile(fill[long], 0.95)) if long.any() else 0.0
    if long.sum() >= MIN_UNQUEUED:
        decode = _decode_envelope(fill[long], recorded.tpot_ms[long])
        decode_scale = float(
            np.quantile(recorded.tpot_ms[long], DECODE_QUANTILE)
            / np.quantile(req["tpot_ms"][long], DECODE_QUANTILE)
        )
    return FastEstimate(
        prefill,
        decode,
        prefill_scale,
        decode_scale,
        overhead,
        n_un,
        multi,
        int(long.sum()),
        kv_fill,
        budget,
    )


def _decode_envelope(fill: np.ndarray, tpot_ms: np.ndarray) -> tuple[float, float, float]:
    """A line through the ``DECODE_QUANTILE`` of TPOT in bands of KV fill (a flat line when
    the fill hardly varies); no square term: the fast estimate is a start."""
    edges = np.quantile(fill, np.linspace(0, 1, DECODE_BANDS + 1))
    band = np.clip(np.searchsorted(edges, fill, side="right") - 1, 0, DECODE_BANDS - 1)
    xs, ys = [], []
    for b in range(DECODE_BANDS):
        sel = band == b
        if sel.sum() >= 5:
            xs.append(float(np.mean(fill[sel])))
            ys.append(float(np.quantile(tpot_ms[sel], DECODE_QUANTILE)))
    if len(xs) < 2 or np.ptp(xs) < 1e-3:
        return (float(np.quantile(tpot_ms, DECODE_QUANTILE)), 0.0, 0.0)
    slope, base = np.polyfit(xs, ys, 1)
    return (float(max(base, 0.0)), float(max(slope, 0.0)), 0.0)


def problem_scales(
    workload: Any, recorded: Recorded, estimate: FastEstimate, workers: int, train: np.ndarray
) -> Scales:
    """The magnitudes the fit measures parameters against (``families.Scales``), from the
    requests ``train`` (a mask: scored requests of the training windows): a long prompt (the
    90th percentile, at most a pass's token budget: a prefill coefficient's scale is what moves
    the prompts the trace has), the KV fill the replay reached, the median recorded TPOT, the
    median prompt and the median recorded requests in flight per worker."""
    from plansim.calibrate.cells import recorded_in_flight

    in_flight = recorded_in_flight(workload, recorded.only(train))[train]
    isl = np.asarray(workload.isl_tokens)[train]
    return Scales(
        tokens=max(min(float(np.quantile(isl, 0.9)), float(estimate.budget_tokens)), 1.0),
        kv_fill=max(estimate.kv_fill, 0.01),
        pass_ms=max(float(np.nanmedian(recorded.tpot_ms[train])), 1.0),
        context_tokens=max(float(np.median(isl)), 1.0),
        batch=max(float(np.median(in_flight)) / max(workers, 1), 1.0),
    )
