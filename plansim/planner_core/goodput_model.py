"""The per-request SLA model of plansim's ``sla_goodput`` scaling policy: the fraction of requests
that would miss the TTFT or the per-request ITL bound when one worker of a pool receives ``rate``
requests per second of a given request mix.

Goodput tests each request on its own TTFT and its own mean inter-token gap, so the model works
per request, not on the mean pass (the approach of DistServe's queueing placement for TTFT and
Sarathi-Serve's analysis of prefill stalls for TPOT):

- **Pass time** (:class:`PassTimeModel`): ``wall_s = a_decode + a_prefill * [P > 0] + b1 * P +
  b2 * P**2 + c * K`` for a pass with ``P`` prompt tokens and ``K`` decode KV tokens. A pass that
  carries a prefill chunk pays its own intercept; fitted by non-negative least squares on pass
  windows split by kind (and the workers' benchmark passes).
- **TPOT** (aggregated workers): every other prompt whose prefill overlaps a request's decode
  stalls each of that prompt's chunk passes, so the request's mean gap is ``T_decode + (sum of
  the overlapping prompts' chunk costs) / G`` for ``G = osl - 1`` gaps. The overlap count is
  Poisson (prompt arrivals over the decode), the stall sum an exact compound sum of the observed
  prompts' costs: short outputs hit by one long prompt miss the bound, long outputs average it out.
- **TTFT**: the request's own chunked prefill ``S(L)`` plus the FIFO wait behind earlier
  prompts, an M/G/1 queue at the worker with the mix's service times (exact waiting-time
  distribution: a geometric sum of residual services).
- **Batch**: the decoding batch follows from Little's law, ``B = rate * E[G] / passes_per_s``,
  solved as a fixed point with the pass times it implies.

Disaggregated pools split this: prefill workers see only the TTFT part (prefill-only passes),
decode workers only the TPOT part (decode-only passes, the batch's Poisson spread, KV capacity).
Seconds and tokens throughout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.optimize import nnls
from scipy.stats import poisson

from plansim.planner_core.observations import ForwardPassMetrics, PassTotals

FIXED_POINT_ITERATIONS = 30
# A worker whose prefill keeps it busy this fraction of the time or more cannot keep up.
MAX_PREFILL_UTILISATION = 0.999


@dataclass(frozen=True, slots=True)
class PassSample:
    """One training row: the mean pass of a window of one kind. ``mixed`` is 1 for passes that
    carried prompt tokens, 0 for decode-only ones; ``prefill_sq`` the mean squared prompt tokens."""

    mixed: float
    prefill: float
    prefill_sq: float
    decode_kv: float
    wall_s: float

    @classmethod
    def from_totals(cls, totals: PassTotals, mixed: bool) -> PassSample | None:
        n = totals.passes
        if n <= 0 or not totals.wall_s > 0:
            return None
        return cls(
            1.0 if mixed else 0.0,
            totals.prefill_tokens / n,
            totals.prefill_tokens_sq / n,
            totals.decode_kv_tokens / n,
            totals.wall_s / n,
        )

    @classmethod
    def from_pass(cls, fpm: ForwardPassMetrics) -> PassSample | None:
        """A single pass (a benchmark sample)."""
        if not fpm.wall_time_s > 0:
            return None
        p = float(fpm.sum_prefill_tokens)
        return cls(
            1.0 if p > 0 else 0.0, p, p * p, float(fpm.sum_decode_kv_tokens), fpm.wall_time_s
        )


def window_samples(fpm: ForwardPassMetrics) -> list[PassSample]:
    """The training rows of one worker's window: its mixed and its decode-only mean pass."""
    out = []
    for totals, mixed in ((fpm.mixed, True), (fpm.decode_only, False)):
        if totals is not None:
            sample = PassSample.from_totals(totals, mixed)
            if sample is not None:
                out.append(sample)
    return out


class PassTimeModel:
    """Pass time with separate prefill and decode terms, fitted by non-negative least squares
    on the relative error.

    Keeps every bootstrap sample and the last ``max_live`` live samples; ready with at least
    ``min_samples`` samples. Coefficients: ``a_decode, a_prefill, b1, b2, c`` (seconds, per token,
    per token squared, per KV token)."""

    def __init__(self, *, max_live: int = 256, min_samples: int = 5) -> None:
        self.max_live = max_live
        self.min_samples = min_samples
        self._bootstrap: list[PassSample] = []
        self._live: list[PassSample] = []
        self._coef: np.ndarray | None = None
        self._dirty = True

    def add_bootstrap(self, sample: PassSample | None) -> None:
        if sample is not None:
            self._bootstrap.append(sample)
            self._dirty = True

    def add(self, sample: PassSample) -> None:
        self._live.append(sample)
        if len(self._live) > self.max_live:
            del self._live[0]
        self._dirty = True

    def __len__(self) -> int:
        return len(self._bootstrap) + len(self._live)

    @property
    def coefficients(self) -> np.ndarray | None:
        if self._dirty:
            self._coef = self._fit()
            self._dirty = False
        return self._coef

    @property
    def ready(self) -> bool:
        return self.coefficients is not None

    def _fit(self) -> np.ndarray | None:
        rows = self._bootstrap + self._live
        if len(rows) < self.min_samples:
            return None
        x = np.array([[1.0, r.mixed, r.prefill, r.prefill_sq, r.decode_kv] for r in rows])
        y = np.array([r.wall_s for r in rows])
        # Relative error: pass times span two orders of magnitude (a few ms of decoding to a
        # second of long prompts), and in plain seconds the fit would give up the decode-only
        # passes, the very ones TPOT is made of, to shave the long prompts' residuals.
        x, y = x / y[:, None], np.ones_like(y)
        # Scale columns to comparable magnitudes so NNLS converges on token-sized features.
        scale = np.maximum(np.abs(x).max(axis=0), 1e-12)
        coef, _ = nnls(x / scale, y)
        coef = coef / scale
        return coef if np.all(np.isfinite(coef)) else None

    def decode_s(self, decode_kv: float | np.ndarray) -> float | np.ndarray:
        """A decode-only pass over ``decode_kv`` KV tokens."""
        a_d, _, _, _, c = self.coefficients
        return a_d + c * np.asarray(decode_kv, dtype=float)

    def stall_s(self, prompt_tokens: float | np.ndarray) -> float | np.ndarray:
        """What carrying a chunk of ``prompt_tokens`` adds to a pass (0 for no tokens)."""
        _, a_p, b1, b2, _ = self.coefficients
        p = np.asarray(prompt_tokens, dtype=float)
        return np.where(p > 0, a_p + b1 * p + b2 * p * p, 0.0)


@dataclass(frozen=True, slots=True)
class RequestMix:
    """The requests a pool serves, one entry per request of the recent past: prompt tokens to
    compute (after prefix-cache hits), KV tokens while decoding (prompt + half the output), and
    gaps (output tokens - 1)."""

    prefill_tokens: np.ndarray
    context_tokens: np.ndarray
    gaps: np.ndarray

    @classmethod
    def from_lengths(cls, isl: np.ndarray, osl: np.ndarray, cached: np.ndarray) -> RequestMix:
        isl = np.asarray(isl, dtype=float)
        osl = np.maximum(np.asarray(osl, dtype=float), 1.0)
        prefill = np.maximum(isl - np.asarray(cached, dtype=float), 1.0)
        return cls(prefill, isl + osl / 2.0, osl - 1.0)

    def __len__(self) -> int:
        return int(self.prefill_tokens.shape[0])


@dataclass(frozen=True, slots=True)
class PoolLimits:
    max_batched_tokens: int
    max_num_seqs: int
    max_kv_tokens: int


@dataclass(frozen=True, slots=True)
class Violations:
    """Fractions of requests over each bound and over either (``total``), at one operating point;
    ``batch`` is the mean decoding batch, ``prefill_utilisation`` the prefill queue's load."""

    total: float
    ttft: float
    tpot: float
    batch: float = 0.0
    prefill_utilisation: float = 0.0
    feasible: bool = True


INFEASIBLE = Violations(1.0, 1.0, 1.0, feasible=False)


@dataclass(frozen=True, slots=True)
class Calibration:
    """What the model learns from observed attainment: ``queue`` scales the load a request's
    prefill waits behind (TTFT), ``stall`` how often other prompts stall a decoding request
    (aggregated workers) or the decode batch's spread (decode workers). 1 is the plain model; a
    router that balances better than random arrivals makes them smaller."""

    queue: float = 1.0
    stall: float = 1.0


PLAIN = Calibration()


def _chunks(prefill: np.ndarray, budget: float) -> tuple[np.ndarray, np.ndarray, float]:
    """Per request: full chunks, the tail chunk's tokens; and the chunk budget used."""
    budget = max(1.0, math.floor(budget))
    n = np.ceil(prefill / budget)
    tail = prefill - (n - 1) * budget
    return n, tail, budget


GRID_POINTS = 1024
# Compound sums with at most this many terms are evaluated (the rest of the count's mass is
# counted as a violation, which only errs on the safe side).
MAX_TERMS = 64


def _sum_powers_sf(cdf_x: np.ndarray, terms: int) -> np.ndarray:
    """``out[j, i] = P(X_1 + ... + X_j > grid[i])`` for j = 0..terms, X on a grid whose CDF at
    the grid points is ``cdf_x``; mass beyond the grid stays beyond it."""
    pmf = np.diff(np.concatenate(([0.0], cdf_x)))
    n = pmf.shape[0]
    size = 1 << int(np.ceil(np.log2(2 * n)))
    f_x = np.fft.rfft(pmf, size)
    out = np.empty((terms + 1, n))
    out[0] = 0.0  # the empty sum is 0, never over a grid point >= 0
    power = np.zeros(n)
    power[0] = 1.0
    for j in range(1, terms + 1):
        power = np.clip(np.fft.irfft(np.fft.rfft(power, size) * f_x, size)[:n], 0.0, None)
        out[j] = np.clip(1.0 - np.cumsum(power), 0.0, 1.0)
    return out


def _grid_cdf(values: np.ndarray, weights: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """Empirical CDF of ``values`` (weights summing to 1) at each grid point."""
    order = np.argsort(values)
    v, w = values[order], np.cumsum(weights[order])
    idx = np.searchsorted(v, grid, side="right")
    return np.where(idx > 0, w[np.maximum(idx - 1, 0)], 0.0)


def queue_violation(
    service_s: np.ndarray, rate: float, bound_s: float, spread: int = 1
) -> tuple[np.ndarray, float]:
    """P(own service + FIFO wait > bound) per request at a queue with these services and arrival
    ``rate``, and the utilisation. For Poisson arrivals (``spread`` 1) the wait is exact M/G/1
    (Benes): a geometric number (ratio rho) of residual service times, whose CDF is
    ``E[min(S, x)] / E[S]``. A router spreading a Poisson stream evenly over ``spread`` workers
    makes each worker's arrivals Erlang (squared coefficient of variation ``1 / spread``); the
    wait probabilities are then scaled by Kingman's ratio ``(c_a^2 + c_s^2) / (1 + c_s^2)``."""
    rho = rate * float(service_s.mean())
    if rho >= MAX_PREFILL_UTILISATION:
        return np.ones_like(service_s), rho
    slack = bound_s - service_s
    if rho <= 0:
        return (slack < 0).astype(float), rho
    grid = np.linspace(0.0, bound_s, GRID_POINTS)
    ordered = np.sort(service_s)
    below = np.searchsorted(ordered, grid, side="right")
    partial = np.concatenate(([0.0], np.cumsum(ordered)))[below]
    # E[min(S, x)] / E[S] at each grid point x
    residual_cdf = (partial + grid * (ordered.shape[0] - below)) / float(ordered.sum())
    terms = min(MAX_TERMS, int(np.ceil(np.log(1e-7) / np.log(rho))) + 1)
    sf = _sum_powers_sf(residual_cdf, terms)
    weights = (1.0 - rho) * rho ** np.arange(terms + 1)
    wait_sf = weights @ sf + rho ** (terms + 1)  # P(W > grid point)
    if spread > 1:
        cs2 = float(service_s.var()) / float(service_s.mean()) ** 2
        wait_sf = wait_sf * (1.0 / spread + cs2) / (1.0 + cs2)
    idx = np.clip(np.searchsorted(grid, slack, side="right") - 1, 0, GRID_POINTS - 1)
    return np.where(slack < 0, 1.0, wait_sf[idx]), rho


def episode_counts(pool_means: np.ndarray, spread: int, terms: int) -> np.ndarray:
    """``out[j, i]``: P(j prompts reach a worker during request i's exposure) when the pool
    receives Poisson(``pool_means[i]``) prompts in it and the router hands every ``spread``-th
    arrival to this worker (1: all of them, a Poisson count). The exposure starts at the
    request's own arrival at the worker, so of ``m`` pool arrivals the worker gets
    ``m // spread``."""
    if spread <= 1:
        return poisson.pmf(np.arange(terms + 1)[:, None], pool_means[None, :])
    edges = np.arange(terms + 2) * spread  # j prompts <=> m in [j * spread, (j + 1) * spread)
    cdf = poisson.cdf(edges[:, None] - 1, pool_means[None, :])
    return np.diff(cdf, axis=0)


def stalled_tpot_violation(
    gaps: np.ndarray,
    exposure_s: np.ndarray,
    prompt_rate: float,
    decode_s: float,
    episode_s: np.ndarray,
    bound_s: float,
    spread: int = 1,
) -> np.ndarray:
    """P(mean gap > bound) per request. Prompts reach the worker at ``prompt_rate`` per second
    (``spread`` as in :func:`episode_counts`); prefill is FIFO, so the prompts that arrive
    while a request waits, prefills or decodes (its ``exposure_s``) prefill during its decode and
    stall it by their total chunk cost, an ``episode_s`` drawn from the mix. The stall sum is an
    exact compound sum on a grid; the request misses the bound when the stalls exceed ``gaps *
    slack``."""
    out = np.zeros(gaps.shape)
    has = gaps >= 1
    if not np.any(has):
        return out
    slack = bound_s - decode_s
    if slack < 0:
        out[has] = 1.0
        return out
    if prompt_rate <= 0 or not np.any(episode_s > 0):
        return out
    thresholds = gaps[has] * slack
    means = prompt_rate * exposure_s[has]  # prompts this worker's share of the pool would get
    terms = int(min(MAX_TERMS, poisson.ppf(1.0 - 1e-7, float(means.max())) + 1))
    grid = np.linspace(0.0, float(thresholds.max()), GRID_POINTS)
    weights = np.full(episode_s.shape, 1.0 / episode_s.shape[0])
    sf = _sum_powers_sf(_grid_cdf(episode_s, weights, grid), terms)
    idx = np.clip(np.searchsorted(grid, thresholds, side="right") - 1, 0, GRID_POINTS - 1)
    counts = episode_counts(means * max(spread, 1), spread, terms)  # (terms + 1, requests)
    out[has] = (counts * sf[:, idx]).sum(axis=0) + np.clip(1.0 - counts.sum(axis=0), 0.0, 1.0)
    return np.clip(out, 0.0, 1.0)


def agg_violations(
    model: PassTimeModel,
    mix: RequestMix,
    rate: float,
    limits: PoolLimits,
    ttft_s: float | None,
    itl_s: float | None,
    calibration: Calibration = PLAIN,
    spread: int = 1,
) -> Violations:
    """Violations on an aggregated worker receiving ``rate`` requests/s of ``mix``; ``spread``:
    the router spreads the pool's arrivals evenly over this many workers (1: random)."""
    if len(mix) == 0 or not model.ready:
        return INFEASIBLE
    mean_gaps = float(mix.gaps.mean())
    mean_ctx = float(mix.context_tokens.mean())
    batch = rate * mean_gaps * float(model.decode_s(mean_ctx))
    for _ in range(FIXED_POINT_ITERATIONS):
        kv = (batch + 1.0) * mean_ctx
        if kv > limits.max_kv_tokens or batch + 1.0 > limits.max_num_seqs:
            return INFEASIBLE
        t_d = float(model.decode_s(kv))
        if not t_d > 0:  # samples that say nothing of decoding (prefill passes only)
            return INFEASIBLE
        n, tail, budget = _chunks(mix.prefill_tokens, limits.max_batched_tokens - (batch + 1.0))
        full_stall = float(model.stall_s(budget))
        episode = (n - 1) * full_stall + model.stall_s(tail)  # one prompt's chunk costs
        mixed_per_s = rate * float(n.mean())
        busy = mixed_per_s * t_d + rate * float(episode.mean())
        if busy >= MAX_PREFILL_UTILISATION:
            return INFEASIBLE
        passes_per_s = mixed_per_s + (1.0 - busy) / t_d
        new_batch = rate * mean_gaps / passes_per_s
        converged = abs(new_batch - batch) < 1e-6 * max(1.0, batch)
        batch = new_batch
        if converged:
            break
    service = n * t_d + episode  # a prompt's own prefill: its chunk passes
    p_ttft = np.zeros(len(mix))
    if ttft_s is not None:
        p_ttft, _ = queue_violation(
            service, min(rate * calibration.queue, 0.999 / float(service.mean())), ttft_s, spread
        )
    p_tpot = np.zeros(len(mix))
    if itl_s is not None:
        mean_wait = rate * float(np.mean(service**2)) / (2.0 * (1.0 - busy))
        exposure = mean_wait + service + mix.gaps / passes_per_s
        p_tpot = stalled_tpot_violation(
            mix.gaps, exposure, rate * calibration.stall, t_d, episode, itl_s, spread
        )
    return _combine(p_ttft, p_tpot, batch, busy)


def prefill_violations(
    model: PassTimeModel,
    mix: RequestMix,
    rate: float,
    limits: PoolLimits,
    ttft_s: float,
    calibration: Calibration = PLAIN,
    spread: int = 1,
) -> Violations:
    """TTFT violations on a prefill worker receiving ``rate`` requests/s (prefill-only passes)."""
    if len(mix) == 0 or not model.ready:
        return INFEASIBLE
    n, tail, budget = _chunks(mix.prefill_tokens, limits.max_batched_tokens)
    base = float(model.decode_s(0.0))
    service = n * base + (n - 1) * float(model.stall_s(budget)) + model.stall_s(tail)
    rho = rate * float(service.mean())
    if rho >= MAX_PREFILL_UTILISATION:
        return INFEASIBLE
    p, _ = queue_violation(
        service, min(rate * calibration.queue, 0.999 / float(service.mean())), ttft_s, spread
    )
    return _combine(p, np.zeros(len(mix)), 0.0, rho)


def decode_violations(
    model: PassTimeModel,
    mix: RequestMix,
    rate: float,
    limits: PoolLimits,
    itl_s: float,
    calibration: Calibration = PLAIN,
) -> Violations:
    """ITL violations on a decode worker receiving ``rate`` requests/s: every pass decodes the
    whole batch; a request misses the bound when the batch it decodes in is too large."""
    if len(mix) == 0 or not model.ready:
        return INFEASIBLE
    mean_gaps = float(mix.gaps.mean())
    mean_ctx = float(mix.context_tokens.mean())
    batch = 0.0
    for _ in range(FIXED_POINT_ITERATIONS):
        t_d = float(model.decode_s((batch + 1.0) * mean_ctx))
        new_batch = rate * mean_gaps * t_d
        if abs(new_batch - batch) < 1e-6 * max(1.0, batch):
            batch = new_batch
            break
        batch = new_batch
    if (batch + 1.0) * mean_ctx > limits.max_kv_tokens or batch + 1.0 > limits.max_num_seqs:
        return INFEASIBLE
    # The largest batch (others + this request) whose pass meets the bound.
    _, _, _, _, c = model.coefficients
    slack = itl_s - float(model.decode_s(0.0))
    if slack < 0:
        worst = 1.0
    elif c <= 0:
        worst = 0.0
    else:
        others_max = math.floor(slack / (c * mean_ctx) + 1e-9) - 1  # 1e-9: 0.005 / 0.001
        spread = batch * calibration.stall
        worst = float(poisson.sf(others_max, spread)) if others_max >= 0 else 1.0
    p = np.where(mix.gaps >= 1, worst, 0.0)
    return _combine(np.zeros(len(mix)), p, batch, 0.0)


def _combine(p_ttft: np.ndarray, p_tpot: np.ndarray, batch: float, busy: float) -> Violations:
    total = 1.0 - (1.0 - p_ttft) * (1.0 - p_tpot)
    return Violations(float(total.mean()), float(p_ttft.mean()), float(p_tpot.mean()), batch, busy)
