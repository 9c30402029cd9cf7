"""Forward-pass perf models: online linear regressions of pass wall time on FPM features, and the
estimates the scaling rules need (TTFT, ITL, per-engine capacity under the SLA).

One class, :class:`EnginePerfModel`, serves the three reference models by its ``kind``:

- ``prefill``: wall_s = a + b * sum_prefill_tokens (1-D)
- ``decode``:  wall_s = a + b * sum_decode_kv_tokens (1-D)
- ``agg``:     wall_s = a + b1 * sum_prefill_tokens + b2 * sum_decode_kv_tokens (2-D)

Samples are retired by bucket (:class:`FpmSampleStore`), the fit is ordinary least squares with
an intercept, needs ``min_observations`` samples and is rejected (model not ready) when a slope is
negative. Predictions are floored at 1e-6 s. Times are seconds; token counts are tokens.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from plansim.planner_core.observations import ForwardPassMetrics, RoleCapabilities
from plansim.roles import Role

MIN_PREDICTION_S = 1e-6
# Engine limits assumed when a capability is unpublished (reference 3.2).
DEFAULT_MAX_BATCHED_TOKENS = 8192
DEFAULT_MAX_NUM_SEQS = 512
DEFAULT_MAX_KV_TOKENS = 2_000_000
MAX_KV_HIT_RATE = 0.95
MAX_CANDIDATE_BATCHES = 128
# A latency within this relative distance of its SLA bound meets it: the fitted pass times carry
# rounding error (TTFT at the bound computes to 50.00000000000003 ms against 50 ms), and the
# capacity search must not flip on the 14th decimal.
SLA_REL_TOLERANCE = 1e-9


class FpmSampleStore:
    """At most ``max_samples`` (features, wall time) samples, retired by bucket.

    Each axis is cut into equal-width buckets between the running min and max of that axis
    (``bucket_count`` buckets in 1-D, ``sqrt(bucket_count)`` per axis in 2-D); over capacity,
    the oldest sample of the fullest bucket (lowest bucket index on ties) is dropped. Bucketing
    keeps the fit's support wide when traffic sits in one region for a long time.
    """

    def __init__(self, dims: int, bucket_count: int, max_samples: int) -> None:
        self.dims = dims
        self.bins_per_axis = bucket_count if dims == 1 else max(1, math.isqrt(bucket_count))
        self.max_samples = max_samples
        self._x: list[tuple[float, ...]] = []  # oldest first
        self._y: list[float] = []

    def __len__(self) -> int:
        return len(self._y)

    def add(self, x: tuple[float, ...], y: float) -> None:
        self._x.append(tuple(float(v) for v in x))
        self._y.append(float(y))
        if len(self._y) > self.max_samples:
            victim = self._oldest_in_fullest_bucket()
            del self._x[victim]
            del self._y[victim]

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        return np.asarray(self._x, dtype=float).reshape(-1, self.dims), np.asarray(self._y)

    def bucket_ids(self) -> np.ndarray:
        """Bucket index of every stored sample (re-bucketed from the current bounds)."""
        x, _ = self.arrays()
        lo, hi = x.min(axis=0), x.max(axis=0)
        width = np.where(hi > lo, (hi - lo) / self.bins_per_axis, 1.0)
        idx = np.clip(((x - lo) / width).astype(int), 0, self.bins_per_axis - 1)
        flat = np.zeros(len(x), dtype=int)
        for axis in range(self.dims):
            flat = flat * self.bins_per_axis + idx[:, axis]
        return flat

    def _oldest_in_fullest_bucket(self) -> int:
        ids = self.bucket_ids()
        counts = np.bincount(ids)
        fullest = int(np.argmax(counts))
        return int(np.flatnonzero(ids == fullest)[0])


class _MovingAverage:
    """Unweighted mean of the last ``window`` values; zeros are dropped until the first non-zero
    value (the idle stretch before traffic is not part of the mix)."""

    def __init__(self, window: int) -> None:
        self._values: deque[float] = deque(maxlen=window)

    def add(self, value: float) -> None:
        if not self._values and value == 0:
            return
        self._values.append(max(0.0, float(value)))

    @property
    def value(self) -> float | None:
        return sum(self._values) / len(self._values) if self._values else None


@dataclass(frozen=True, slots=True)
class Capacity:
    """One engine's best operating point under the SLA: requests/s and the latencies there."""

    rps: float
    batch: int
    ttft_ms: float | None
    itl_ms: float | None
    eligible: bool


@dataclass(frozen=True, slots=True)
class EngineLimits:
    """One engine's batch limits: tokens per forward pass, sequences per batch, KV-cache
    tokens. A limit the worker does not report (missing or 0) takes its default."""

    max_batched_tokens: int = DEFAULT_MAX_BATCHED_TOKENS
    max_num_seqs: int = DEFAULT_MAX_NUM_SEQS
    max_kv_tokens: int = DEFAULT_MAX_KV_TOKENS

    @classmethod
    def from_capabilities(cls, caps: RoleCapabilities | None) -> EngineLimits:
        if caps is None:
            return cls()
        return cls(
            max_batched_tokens=caps.max_num_batched_tokens or DEFAULT_MAX_BATCHED_TOKENS,
            max_num_seqs=caps.max_num_seqs or DEFAULT_MAX_NUM_SEQS,
            max_kv_tokens=caps.max_kv_tokens or DEFAULT_MAX_KV_TOKENS,
        )


def candidate_batches(bound: int) -> list[int]:
    """1..B when B <= 128, else 128 evenly spaced integers ``1 + i*(B-1)//127``."""
    if bound <= MAX_CANDIDATE_BATCHES:
        return list(range(1, bound + 1))
    return [
        1 + i * (bound - 1) // (MAX_CANDIDATE_BATCHES - 1) for i in range(MAX_CANDIDATE_BATCHES)
    ]


def effective_isl(isl: float, kv_hit_rate: float | None) -> int:
    """Prefill tokens left after the KV-hit discount: ``max(1, ceil(isl * (1 - h)))`` with
    ``h`` clamped to [0, 0.95] (None or NaN -> 0)."""
    h = 0.0 if kv_hit_rate is None or not math.isfinite(kv_hit_rate) else kv_hit_rate
    h = min(max(h, 0.0), MAX_KV_HIT_RATE)
    # round first: 1000 * (1 - 0.95) is 50.00000000000004 in binary floating point
    return max(1, math.ceil(round(isl * (1.0 - h), 9)))


def within_sla(latency_ms: float, sla_ms: float | None) -> bool:
    """True when there is no bound, or ``latency_ms`` meets ``sla_ms`` up to
    ``SLA_REL_TOLERANCE`` (both in ms)."""
    return sla_ms is None or latency_ms <= sla_ms * (1.0 + SLA_REL_TOLERANCE)


def clean_accept_length(accept: float | None) -> float:
    return 1.0 if accept is None or not math.isfinite(accept) or accept <= 1 else float(accept)


class EnginePerfModel:
    """Online pass-time regression for one role (``prefill``, ``decode`` or ``agg``)."""

    def __init__(
        self,
        kind: str,
        limits: EngineLimits,
        *,
        max_samples: int = 64,
        bucket_count: int = 16,
        min_observations: int = 5,
    ) -> None:
        if kind not in tuple(Role):
            raise ValueError(f"unknown perf model kind {kind!r}")
        self.kind = kind
        self.limits = limits
        self.min_observations = min_observations
        self.store = FpmSampleStore(2 if kind == Role.AGG else 1, bucket_count, max_samples)
        self._coef: np.ndarray | None = None  # [intercept, slopes...]
        self._dirty = True
        # Moving averages over observations, each observation counting once (reference 1.6.1
        # ``PlannerEnginePerfModel._observe_for_next_request`` and ``_AggLoadAverages``).
        self.avg_isl = _MovingAverage(max_samples)  # prefill tokens per prefill request, 0 without
        self.avg_decode_len = _MovingAverage(max_samples)  # decode KV per decode request
        self.avg_prefill_tokens = _MovingAverage(max_samples)  # agg: prefill tokens per pass
        self.max_observed_kv = 0

    # -- training --------------------------------------------------------------------------
    def observe(self, fpm: ForwardPassMetrics, *, update_averages: bool = True) -> None:
        """Add one observation (a worker's per-pass means over its window, or one pass). Idle
        heartbeats (wall time 0) update the averages only. Synthetic bootstrap passes
        (``update_averages=False``) train the fit but not the live traffic-mix averages
        (average ISL, decode length, prefill per pass)."""
        if update_averages:
            self._update_averages(fpm)
        if fpm.wall_time_s > 0 and math.isfinite(fpm.wall_time_s):
            self.store.add(
                self._features(fpm.sum_prefill_tokens, fpm.sum_decode_kv_tokens), fpm.wall_time_s
            )
            self._dirty = True

    def _update_averages(self, fpm: ForwardPassMetrics) -> None:
        n_prefill = fpm.num_prefill_requests
        self.avg_isl.add(fpm.sum_prefill_tokens / n_prefill if n_prefill > 0 else 0.0)
        if fpm.num_decode_requests > 0:
            self.avg_decode_len.add(fpm.sum_decode_kv_tokens / fpm.num_decode_requests)
        self.avg_prefill_tokens.add(fpm.sum_prefill_tokens)
        self.max_observed_kv = max(self.max_observed_kv, fpm.sum_decode_kv_tokens)

    def _features(self, prefill_tokens: float, decode_kv: float) -> tuple[float, ...]:
        if self.kind == Role.PREFILL:
            return (prefill_tokens,)
        if self.kind == Role.DECODE:
            return (decode_kv,)
        return (prefill_tokens, decode_kv)

    @property
    def coefficients(self) -> np.ndarray | None:
        """``[intercept, slope...]`` of the current fit, ``None`` when not ready."""
        if self._dirty:
            self._coef = self._fit()
            self._dirty = False
        return self._coef

    @property
    def ready(self) -> bool:
        return self.coefficients is not None

    def _fit(self) -> np.ndarray | None:
        if len(self.store) < self.min_observations:
            return None
        x, y = self.store.arrays()
        design = np.column_stack([np.ones(len(y)), x])
        coef, *_ = np.linalg.lstsq(design, y, rcond=None)
        if np.any(coef[1:] < 0) or not np.all(np.isfinite(coef)):
            return None  # a pass cannot get faster with more work: reject the fit
        return coef

    # -- primitives ------------------------------------------------------------------------
    def wall_s(self, prefill_tokens: float = 0.0, decode_kv: float = 0.0) -> float | None:
        """Predicted pass time for a pass with this much work; ``None`` when not ready."""
        coef = self.coefficients
        if coef is None:
            return None
        value = coef[0] + float(np.dot(coef[1:], self._features(prefill_tokens, decode_kv)))
        return max(MIN_PREDICTION_S, float(value))

    def chunked_prefill_s(self, tokens: float, decode_kv: float = 0.0) -> float | None:
        """Time to prefill ``tokens`` in chunks of ``max_batched_tokens`` (floor(T/MBT) full
        chunks plus the tail), each chunk with ``decode_kv`` decode load piggybacked (agg)."""
        mbt = self.limits.max_batched_tokens
        if mbt <= 0 or not self.ready:
            return None
        if tokens <= 0:
            return 0.0
        tokens = math.ceil(tokens)
        full, tail = divmod(tokens, mbt)
        total = full * self.wall_s(mbt, decode_kv) if full else 0.0
        if tail:
            total += self.wall_s(tail, decode_kv)
        return total

    # -- load-scaling estimates (seconds) --------------------------------------------------
    def estimate_ttft_s(
        self,
        fpm: ForwardPassMetrics,
        kv_hit_rate: float | None,
        *,
        queue_scale: float = 1.0,
        decode_scale: float = 1.0,
        include_queued_decode: bool = False,
    ) -> float | None:
        """TTFT of a request arriving now: its own prefill behind the queued prefill tokens
        (``(queued * queue_scale + avg_isl) * (1 - h)``), in chunks; agg adds the decode load."""
        avg_isl = self.avg_isl.value or 0.0
        h = (
            0.0
            if kv_hit_rate is None or not math.isfinite(kv_hit_rate)
            else min(max(kv_hit_rate, 0.0), MAX_KV_HIT_RATE)
        )
        tokens = (fpm.queued_prefill_tokens * queue_scale + avg_isl) * (1.0 - h)
        decode_kv = 0.0
        if self.kind == Role.AGG:
            decode_kv = fpm.sum_decode_kv_tokens + (
                fpm.queued_decode_kv_tokens if include_queued_decode else 0
            )
            decode_kv *= decode_scale
        return self.chunked_prefill_s(tokens, decode_kv)

    def estimate_itl_s(
        self,
        fpm: ForwardPassMetrics,
        *,
        decode_scale: float = 1.0,
        include_queued_prefill: bool = False,
    ) -> float | None:
        """Pass time with the scheduled + queued decode KV (times ``decode_scale``) plus one more
        request of average decode length; agg adds the average scheduled prefill per pass (the
        reference zeroes the observation's own prefill so the learned mix is used)."""
        kv = fpm.sum_decode_kv_tokens + fpm.queued_decode_kv_tokens
        if include_queued_prefill:
            kv += fpm.queued_prefill_tokens
        kv = kv * decode_scale + (self.avg_decode_len.value or 0.0)
        prefill = (self.avg_prefill_tokens.value or 0.0) if self.kind == Role.AGG else 0.0
        return self.wall_s(prefill, kv)

    # -- capacity search (reference 3.2) ----------------------------------------------------
    def find_engine_capacity(
        self,
        isl: float,
        osl: float,
        *,
        ttft_sla_ms: float | None = None,
        itl_sla_ms: float | None = None,
        kv_hit_rate: float | None = None,
        accept_length: float | None = None,
        role: str | None = None,
    ) -> Capacity | None:
        """Best single-engine operating point (highest req/s, eligible first) for this role.

        ``role`` selects the prefill or decode search on an agg model; by default the model's
        own kind. ``None`` when the model is not ready or the inputs are unusable.
        """
        if not self.ready or not (math.isfinite(isl) and math.isfinite(osl)):
            return None
        role = role or self.kind
        isl_i = max(0, math.ceil(isl))
        osl_i = max(1, math.ceil(osl))
        accept = 1.0 if role == Role.PREFILL else clean_accept_length(accept_length)
        isl_eff = effective_isl(isl_i, kv_hit_rate)
        ctx = max(1, isl_i + osl_i // 2)
        lim = self.limits
        candidates: list[Capacity] = []
        if role == Role.PREFILL:
            bound = (
                1
                if isl_eff > lim.max_batched_tokens
                else min(lim.max_num_seqs, lim.max_batched_tokens // isl_eff)
            )
            for b in candidate_batches(max(1, bound)):
                ttft = self.chunked_prefill_s(b * isl_eff)
                eligible = within_sla(ttft * 1000, ttft_sla_ms)
                candidates.append(Capacity(b / ttft, b, ttft * 1000, None, eligible))
        elif role == Role.DECODE:
            bound = min(lim.max_num_seqs, lim.max_kv_tokens // ctx)
            for b in candidate_batches(max(1, bound)):
                itl = self.wall_s(0, b * ctx) / accept
                eligible = within_sla(itl * 1000, itl_sla_ms)
                candidates.append(Capacity(b / (osl_i * itl), b, None, itl * 1000, eligible))
        else:
            candidates = self._agg_candidates(isl_eff, osl_i, ctx, accept, ttft_sla_ms, itl_sla_ms)
        if not candidates:
            return None
        return max(candidates, key=lambda c: (c.eligible, c.rps, -c.batch))

    def _agg_candidates(
        self,
        isl_eff: int,
        osl: int,
        ctx: int,
        accept: float,
        ttft_sla_ms: float | None,
        itl_sla_ms: float | None,
    ) -> list[Capacity]:
        lim = self.limits
        mbt = lim.max_batched_tokens
        if mbt <= 1:
            return []
        bound = min(min(lim.max_num_seqs, lim.max_kv_tokens // ctx), max(1, mbt - 1))
        out = []
        for b in candidate_batches(max(1, bound)):
            per_iter_prefill = math.ceil(b * accept * isl_eff / osl)
            if per_iter_prefill > mbt - b:
                continue  # prefill demand per iteration must fit beside the decode batch
            itl = self.wall_s(min(mbt, per_iter_prefill), b * ctx) / accept
            ttft = self.chunked_prefill_s(per_iter_prefill + isl_eff, b * ctx)
            eligible = within_sla(ttft * 1000, ttft_sla_ms) and within_sla(itl * 1000, itl_sla_ms)
            out.append(Capacity(b / (osl * itl), b, ttft * 1000, itl * 1000, eligible))
        return out
