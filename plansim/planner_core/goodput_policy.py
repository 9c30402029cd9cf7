"""The loops of ``scaling_policy: sla_goodput`` (declared in
``plansim.planner_core.scaling_policies.sla_goodput``): plansim's policy, sizing each pool for
what goodput measures.

Goodput counts a request as good when its own TTFT and its own mean inter-token gap meet the
deployment's SLA, so this policy sizes for the share of requests over the SLA, not for the mean
pass (:mod:`plansim.planner_core.goodput_model` holds the per-request model). Every decision keeps
its reason in words (the ``policy_reason*`` columns of the ticks table).

- **Request mix**: the last ``history_requests`` completed requests (prompt, cached, reusable and
  output tokens, and the pool size that served them). A pool k times larger misses 1/k of the
  reusable prefix tokens its cache missed (credited up to a halving), a smaller one more.
- **Slow loop** (every throughput interval, on the same-tick predictions): demand is the larger
  of the predicted and the last interval's observed rate; for each candidate count the model
  predicts the violation share at that rate (balanced routing: a worker gets every n-th
  request), plus the observed bias; the smallest count within the target wins, then replicas
  that together buy less than ``knee_gain`` per doubling are dropped. When no count within the
  GPU ceiling meets the target the pool never shrinks (the most conservative choice); when the
  ceiling cannot carry the demand at all, the ceiling. Disaggregated pools are sized apart:
  prefill on TTFT, decode on ITL, each with half the target.
- **Forecast lead** (``forecast_lead``): a worker started now serves only once it is ready, so
  the demand sized for is the one a start-up time ahead (``planner_core.lead``): the larger of
  the observed rate and the predictor's forecast plus the rising trend of the observed rates
  over the start-up time (a slope beyond two of its standard errors over the last four
  intervals: one burst is no trend, and a worker started for it is ready when it has passed;
  the start-up time is the p90 of the start-ups observed from the worker counts,
  ``startup_guess_s`` until one is seen), plus ``forecast_error_z`` standard deviations of the
  predictor's one-step error; an observed rate more than twice that error over its forecast
  sizes at once (no median).
- **Error budget**: the target holds over ``slo_window_s``; an interval may spend half of what the
  earlier ones saved, up to three times the target share (never less than the target).
- **Feedback** (both directions): each window's observed TTFT and ITL violations are compared
  with the model's prediction at the window's actual rate and replica count; a difference beyond
  Poisson noise moves the queue or stall calibration by a damped factor (at most 2x per window,
  within [0.02, 20]), and what remains feeds an exponentially weighted bias (in points of the
  share, within +/- the target).
- **Hysteresis**: the size is the median of the last three results (the result itself when the
  last window missed twice its target or demand rose 25% over the recent median); a pool grows at
  once (at most doubling, or +4, per interval) and shrinks only to the largest size of the last
  ``scale_down_stabilization_s`` (the Kubernetes HPA scale-down stabilization window), up to 3x
  longer when successive intervals' counts vary far beyond Poisson noise (on/off bursts recur),
  the stretch in proportion to the share of the error budget spent over the SLO window (bursts
  that cost no attainment do not keep their capacity), and not while it is still scaling. The
  starting size counts as sized at the first tick.
- **Fast loop** (every load interval): a queue-aware TTFT estimate per worker (the queued prompts'
  full tokens after the observed cache hits, the unfinished tokens of prompts under way, plus the
  next prompt of average size, in chunks at the worker's pass times) and the KV usage; when the
  ``ttft_worker_percentile``-th worker is over the TTFT bound, or over ``kv_pressure`` of its KV,
  the pool grows by one. It never shrinks a pool.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

import numpy as np

from plansim.planner_core.budget import fit_ceiling_pair, fit_ceiling_single
from plansim.planner_core.goodput_model import (
    PLAIN,
    Calibration,
    PassSample,
    PassTimeModel,
    PoolLimits,
    RequestMix,
    Violations,
    agg_violations,
    decode_violations,
    prefill_violations,
    window_samples,
)
from plansim.planner_core.lead import LeadForecast, StartupTracker
from plansim.planner_core.observations import CompletedRequests, SlaTargets, TickInput
from plansim.planner_core.perf_model import EngineLimits
from plansim.planner_core.pipeline import (
    Override,
    OverrideType,
    PipelineContext,
    Stage,
    StageResult,
)
from plansim.planner_core.reasons import GoodputReason
from plansim.planner_core.scaling_policies.base import PolicyPlugins
from plansim.roles import PlannerMode, Role

if TYPE_CHECKING:
    from plansim.planner_core.scaling_policies.sla_goodput import SlaGoodputParams

# Rate standing for "no load": what fails here fails at any size.
IDLE_RATE = 1e-9
# Sizes are the median of this many intervals' results, unless the last window missed the SLA
# by more than URGENT_FACTOR times its target share.
SMOOTHING_SIZES = 3
URGENT_FACTOR = 2.0
# ... or when demand rose past this many times the median of the previous intervals' demand.
SURGE_FACTOR = 1.25
# Bursty traffic keeps capacity up to this many times the base stabilization window.
MAX_BURST_FACTOR = 3.0
# The error budget lets an interval's target go up to three times the target share, spending
# half of the surplus at a time.
BUDGET_RANGE = (1.0, 3.0)
BUDGET_SPEND = 0.5
# Weight of each window in the smoothed prediction bias.
BIAS_WEIGHT = 0.3
# The least share of its observed cache misses a larger pool is credited with.
MIN_MISS_RATIO = 0.5
# Growth per decision, as the Kubernetes HPA's default scale-up policy: at most double, or four
# replicas more when that is larger.
MAX_GROWTH_FACTOR = 2.0
MAX_GROWTH_STEP = 4
# Replicas considered per role when no GPU ceiling bounds them.
UNBOUNDED_REPLICAS = 256
# Calibration: bounds, the damping exponent and the largest factor per window.
CALIBRATION_RANGE = (0.02, 20.0)
CALIBRATION_DAMPING = 0.5
CALIBRATION_STEP = 2.0


@dataclass(slots=True)
class RequestHistory:
    """The last ``capacity`` completed requests: prompt, cached, reusable and output tokens, and
    how many replicas the caching pool had when they were served.

    The prefix cache grows with the pool: of the reusable tokens a request's cache missed, a
    pool ``k`` times larger misses ``1 / k`` as many (an LRU cache whose working set exceeds it
    misses in proportion to its size), so the mix at ``n`` replicas recomputes each request's
    cached tokens from the size it was served at."""

    capacity: int
    isl: np.ndarray = field(default_factory=lambda: np.zeros(0))
    osl: np.ndarray = field(default_factory=lambda: np.zeros(0))
    cached: np.ndarray = field(default_factory=lambda: np.zeros(0))
    reusable: np.ndarray = field(default_factory=lambda: np.zeros(0))
    served_by: np.ndarray = field(default_factory=lambda: np.zeros(0))

    def add(self, requests: CompletedRequests, pool_size: float) -> None:
        def keep(old: np.ndarray, new: np.ndarray) -> np.ndarray:
            return np.concatenate((old, np.asarray(new, dtype=float)))[-self.capacity :]

        self.isl = keep(self.isl, requests.isl_tokens)
        self.osl = keep(self.osl, requests.osl_tokens)
        self.cached = keep(self.cached, requests.cached_tokens)
        self.reusable = keep(
            self.reusable, np.maximum(requests.reusable_tokens, requests.cached_tokens)
        )
        self.served_by = keep(self.served_by, np.full(len(requests), max(pool_size, 1.0)))

    def cached_at(self, pool_size: float | None) -> np.ndarray:
        """Each request's cached tokens had the caching pool had ``pool_size`` replicas (None:
        as served). A larger pool misses ``served / pool_size`` of what each request missed; a
        smaller one misses more in total by the same law, taken from the requests' cached
        tokens in proportion (which request loses its hits is not known, only how many)."""
        if pool_size is None:
            return self.cached
        # Credit at most a halving of the misses: beyond twice the sizes seen, the working set
        # may already fit, and extrapolating cache gains would buy replicas for nothing.
        ratio = np.maximum(self.served_by / max(pool_size, 1.0), MIN_MISS_RATIO)
        missed = self.reusable - self.cached
        grown = self.cached + missed * (1.0 - np.minimum(ratio, 1.0))
        total_cached = float(self.cached.sum())
        if total_cached <= 0:
            return grown
        lost = float(missed.sum()) / total_cached * np.maximum(ratio - 1.0, 0.0)
        return np.where(ratio > 1.0, self.cached * np.clip(1.0 - lost, 0.0, 1.0), grown)

    def mix(self, pool_size: float | None = None) -> RequestMix:
        return RequestMix.from_lengths(self.isl, self.osl, self.cached_at(pool_size))

    def __len__(self) -> int:
        return int(self.isl.shape[0])


@dataclass(frozen=True, slots=True)
class WindowAttainment:
    """Observed violations of one window's completed requests."""

    requests: int
    ttft: int
    tpot: int
    either: int

    @classmethod
    def of(cls, requests: CompletedRequests, sla: SlaTargets) -> WindowAttainment:
        n = len(requests)
        bad_ttft = np.zeros(n, dtype=bool)
        bad_tpot = np.zeros(n, dtype=bool)
        if sla.ttft_ms is not None:
            bad_ttft = ~(requests.ttft_ms <= sla.ttft_ms)  # NaN (no first token) is bad
        if sla.itl_ms is not None:
            bad_tpot = requests.itl_ms > sla.itl_ms  # NaN (one token) has no gap to miss
        return cls(n, int(bad_ttft.sum()), int(bad_tpot.sum()), int((bad_ttft | bad_tpot).sum()))


@dataclass(slots=True)
class RolePlan:
    """One pool's model, calibration and hysteresis state."""

    role: Role  # the pool: agg, prefill or decode
    limits: PoolLimits
    model: PassTimeModel
    calibration: Calibration = PLAIN
    sized: list[tuple[float, int]] = field(default_factory=list)  # (at_s, size) in the window
    started_s: float | None = None
    bias: float = 0.0  # observed minus predicted violation share, smoothed
    spent: list[tuple[float, int, int]] = field(default_factory=list)  # (at_s, requests, missed)
    recent: list[int] = field(default_factory=list)  # the last sizes, for the median
    reason: str = ""


def _limits(engine_limits: EngineLimits) -> PoolLimits:
    return PoolLimits(
        engine_limits.max_batched_tokens, engine_limits.max_num_seqs, engine_limits.max_kv_tokens
    )


class SlaGoodputPolicy:
    """The policy's cross-tick state and rules; its two loop plugins call into it."""

    def __init__(self, state, params: SlaGoodputParams, sla: SlaTargets | None) -> None:
        self.state = state
        self.params = params
        config = state.config
        self.sla = SlaTargets(
            ttft_ms=(
                sla.ttft_ms if sla is not None and sla.ttft_ms is not None else config.ttft_ms
            ),
            itl_ms=(sla.itl_ms if sla is not None and sla.itl_ms is not None else config.itl_ms),
        )
        self.history = RequestHistory(params.history_requests)
        self.plans: dict[str, RolePlan] = {}
        mode = PlannerMode(config.mode)
        for role in config.active_roles():
            model = PassTimeModel(min_samples=config.load_min_observations)
            bench = state.capabilities.benchmark_fpms
            pool = mode.pool_for(role)
            # An aggregated pool learns from both sweeps of its self-benchmark.
            sweeps = (Role.DECODE, Role.PREFILL) if pool is Role.AGG else (role,)
            for fpm in (f for sweep in sweeps for f in bench.get(sweep, ())):
                model.add_bootstrap(PassSample.from_pass(fpm))
            self.plans[role] = RolePlan(pool, _limits(state.perf_models[role].limits), model)
        self._ready_seconds = dict.fromkeys(self.plans, 0.0)
        self._window_s = 0.0
        self._last_now_s: float | None = None
        self._first_s: float | None = None
        self._offered: list[tuple[float, float]] = []  # (at_s, requests offered) per interval
        self._demands: list[float] = []  # the last intervals' demand (req/s)
        self.lead = LeadForecast()
        self.startups = {role: StartupTracker(params.startup_guess_s) for role in self.plans}

    # -- observation -------------------------------------------------------------------------
    def observe(self, inp: TickInput) -> None:
        """Every tick: train the pass-time models on the workers' windows and integrate the ready
        counts (the replica count a window's attainment was delivered with). The tick's SLA
        columns show the SLA this policy sizes for (the deployment's)."""
        diag = self.state.diag
        diag.ttft_sla_ms, diag.itl_sla_ms = self.sla.ttft_ms, self.sla.itl_ms
        if self._last_now_s is not None:
            dt = max(inp.now_s - self._last_now_s, 0.0)
            self._window_s += dt
            for role in self.plans:
                self._ready_seconds[role] += dt * self.state.ready(role)
        self._last_now_s = inp.now_s
        if self._first_s is None:
            self._first_s = inp.now_s
        counts = inp.worker_counts
        for role, tracker in self.startups.items():
            if role == Role.PREFILL:
                tracker.observe(inp.now_s, counts.starting_prefill, counts.ready_prefill)
            else:
                tracker.observe(inp.now_s, counts.starting_decode, counts.ready_decode)
        for role, plan in self.plans.items():
            for fpm in inp.fpm.get(role, ()):
                for sample in window_samples(fpm):
                    plan.model.add(sample)

    # -- the model ---------------------------------------------------------------------------
    def _bounds_s(self) -> tuple[float | None, float | None]:
        t, i = self.sla.ttft_ms, self.sla.itl_ms
        return (None if t is None else t / 1000.0), (None if i is None else i / 1000.0)

    def violations(
        self,
        plan: RolePlan,
        mix: RequestMix,
        rate: float,
        replicas: float,
        calibration: Calibration | None = None,
    ) -> Violations:
        """Predicted violations of a pool of ``replicas`` each receiving ``rate`` req/s."""
        ttft_s, itl_s = self._bounds_s()
        calibration = plan.calibration if calibration is None else calibration
        spread = max(1, int(round(replicas))) if self.params.routing == "balanced" else 1
        if plan.role is Role.AGG:
            return agg_violations(
                plan.model, mix, rate, plan.limits, ttft_s, itl_s, calibration, spread
            )
        if plan.role is Role.PREFILL:
            if ttft_s is None:
                return Violations(0.0, 0.0, 0.0)
            return prefill_violations(
                plan.model, mix, rate, plan.limits, ttft_s, calibration, spread
            )
        if itl_s is None:
            return Violations(0.0, 0.0, 0.0)
        return decode_violations(plan.model, mix, rate, plan.limits, itl_s, calibration)

    def _role_target(self, plan: RolePlan) -> float:
        """This pool's share of the violation target (disaggregated pools split it)."""
        share = 1.0 if plan.role is Role.AGG else 0.5
        return self.params.max_violation_fraction * share

    def mix_at(self, plan: RolePlan, replicas: float | None) -> RequestMix:
        """The request mix at ``replicas`` of this pool: the prefix cache lives on the pool that
        prefills (decode workers' cache does not change what they compute)."""
        return self.history.mix(replicas if plan.role.prefills else None)

    def max_replicas(self, role: str) -> int:
        b = self.state.budget
        if b.max_gpus < 0:
            return UNBOUNDED_REPLICAS
        gpu = self.state.gpus_per_replica(role)
        other = {
            r: self.state.min_endpoint(r) * self.state.gpus_per_replica(r)
            for r in self.plans
            if r != role
        }
        return max(self.state.min_endpoint(role), (b.max_gpus - sum(other.values())) // gpu)

    def budgeted_target(self, plan: RolePlan, now_s: float, next_requests: float) -> float:
        """The violation share the next interval may spend: the SLO holds over the last
        ``slo_window_s`` (an error budget), so an interval may take part of what earlier ones
        left, up to three times the target share (never less than the target: a deficit is
        not chased, it was spent when the deployment could not avoid it)."""
        target = self._role_target(plan)
        horizon = self.params.slo_window_s
        plan.spent = [(t, n, v) for t, n, v in plan.spent if now_s - t < horizon - 1e-9]
        if horizon <= 0 or next_requests <= 0 or not plan.spent:
            return target
        requests = sum(n for _, n, _ in plan.spent)
        violations = sum(v for _, _, v in plan.spent)
        # Spend only part of what earlier intervals saved: the next interval's misses are a
        # prediction, and the window's target holds only if the prediction errs on the safe side.
        allowed = target + BUDGET_SPEND * (target * requests - violations) / next_requests
        return min(max(allowed, target * BUDGET_RANGE[0]), target * BUDGET_RANGE[1])

    def size(
        self, plan: RolePlan, role: str, demand_rps: float, target: float | None = None
    ) -> tuple[int, str, str]:
        """(replicas, reason code, reason text) for ``demand_rps`` requests/s and at most a
        ``target`` share of them over the SLA (default: this pool's share of the target).

        The smallest count whose predicted violations (plus the observed bias) are within the
        target, ``first``; where none within the GPU ceiling is, the ceiling. From there,
        replicas that together buy less than ``knee_gain`` of the requests per doubling of the
        pool are not added (the smallest ``n`` with ``v(n) - v(first) <= knee_gain *
        ln(first / n)``): on the flat part of the curve a point of attainment is not worth a
        pool's worth of GPUs. When no count meets the target, the pool never shrinks (the most
        conservative choice: never the least). Violations fall as replicas grow, ever more
        slowly, so both searches are bisections."""
        lo, hi = max(1, self.state.min_endpoint(role)), self.max_replicas(role)
        if hi < lo:
            return lo, GoodputReason.MOST_CONSERVATIVE, f"GPU ceiling below the minimum: {lo}"
        cache: dict[int, Violations] = {}

        def at(n: int) -> Violations:
            if n not in cache:
                v = self.violations(plan, self.mix_at(plan, n), demand_rps / n, n)
                cache[n] = (
                    replace(v, total=min(max(v.total + plan.bias, 0.0), 1.0)) if v.feasible else v
                )
            return cache[n]

        target = self._role_target(plan) if target is None else target
        if not at(hi).feasible:
            return (
                hi,
                GoodputReason.MOST_CONSERVATIVE,
                (
                    f"{hi} replicas (the GPU ceiling) cannot carry {demand_rps:.2f} req/s: "
                    "most conservative"
                ),
            )
        meets = at(hi).total <= target
        first = _first(lo, hi, lambda n: at(n).feasible and at(n).total <= target) if meets else hi
        knee_gain = self.params.knee_gain
        n = _first(
            lo,
            first,
            lambda k: (
                at(k).feasible
                and (at(k).total - at(first).total <= knee_gain * math.log(first / k))
            ),
        )
        code = GoodputReason.SIZED
        if n < first:
            note = (
                f"; {first} would reach {_pct(at(first).total)}: the replicas past {n} buy "
                f"less than {_pct(knee_gain)} per doubling"
            )
        else:
            note = ""
        if not meets:
            # Out of reach: never shrink on a prediction that no size meets the SLA.
            current = (
                self.state.expected_prefill if role == Role.PREFILL else self.state.expected_decode
            )
            code = GoodputReason.MOST_CONSERVATIVE
            if n < current:
                n = min(current, hi)
                note = (
                    f"; no size within {hi} meets the target ({_pct(at(hi).total)} at {hi}): "
                    f"holding {n}"
                )
            else:
                note += f"; no size within {hi} meets the target ({_pct(at(hi).total)} at {hi})"
        v = at(n)
        return (
            n,
            code,
            (
                f"{n} replicas for {demand_rps:.2f} req/s: {_pct(v.total)} predicted over the SLA "
                f"(TTFT {_pct(v.ttft)}, ITL {_pct(v.tpot)}, observed bias {plan.bias * 100:+.1f} "
                f"points; target {_pct(target)}{note})"
            ),
        )

    # -- calibration -------------------------------------------------------------------------
    def calibrate(
        self, plan: RolePlan, window: WindowAttainment, ready: float, offered_rps: float
    ) -> None:
        """Move the calibration toward what the window delivered (damped, bounded, only beyond
        binomial noise), on the window's actual rate per replica."""
        if window.requests < self.params.min_window_requests or ready < 1 or offered_rps <= 0:
            return
        rate = offered_rps / ready
        mix = self.mix_at(plan, ready)
        model = self.violations(plan, mix, rate, ready)
        if not model.feasible:
            return
        idle = self.violations(plan, mix, IDLE_RATE, ready)
        n = window.requests
        queue, stall = plan.calibration.queue, plan.calibration.stall
        if plan.role.prefills and self.sla.ttft_ms is not None:
            queue = _recalibrated(queue, window.ttft - n * idle.ttft, n * (model.ttft - idle.ttft))
        if plan.role.decodes and self.sla.itl_ms is not None:
            stall = _recalibrated(stall, window.tpot - n * idle.tpot, n * (model.tpot - idle.tpot))
        plan.calibration = Calibration(queue=queue, stall=stall)
        # What the recalibrated model still misses at this operating point, in share of
        # requests: an exponentially weighted bias added to every prediction.
        after = self.violations(plan, mix, rate, ready)
        observed = {Role.AGG: window.either, Role.PREFILL: window.ttft, Role.DECODE: window.tpot}[
            plan.role
        ] / n
        predicted = {Role.AGG: after.total, Role.PREFILL: after.ttft, Role.DECODE: after.tpot}[
            plan.role
        ]
        limit = self._role_target(plan)
        residual = min(max(observed - predicted, -limit), limit)
        plan.bias = (1.0 - BIAS_WEIGHT) * plan.bias + BIAS_WEIGHT * residual

    # -- slow loop ---------------------------------------------------------------------------
    def run_slow(self, ctx: PipelineContext) -> dict[str, int] | None:
        """Size every pool from the same-tick predictions; role -> target (None: nothing)."""
        diag = self.state.diag
        traffic = ctx.observations.traffic
        ready_avg = {
            r: (
                self._ready_seconds[r] / self._window_s
                if self._window_s > 0
                else self.state.ready(r)
            )
            for r in self.plans
        }
        self._ready_seconds = dict.fromkeys(self.plans, 0.0)
        self._window_s = 0.0
        window = None
        if traffic is not None and traffic.requests is not None and len(traffic.requests):
            caching = Role.PREFILL if Role.PREFILL in self.plans else Role.DECODE
            self.history.add(traffic.requests, ready_avg[caching])
            window = WindowAttainment.of(traffic.requests, self.sla)
        predictions = ctx.predictions
        if not {"num_req", "duration_s"} <= predictions.keys() or not predictions.get("duration_s"):
            self._reason_all(GoodputReason.NO_PREDICTION, "no prediction this interval")
            return None
        if len(self.history) == 0:
            self._reason_all(
                GoodputReason.NO_TRAFFIC, "no completed request yet: nothing to size for"
            )
            return None
        forecast = max(float(predictions["num_req"] or 0.0), 0.0) / float(predictions["duration_s"])
        demand = forecast
        now = ctx.observations.now_s
        if traffic is not None and traffic.duration_s > 0:
            demand = max(demand, traffic.num_req / traffic.duration_s)
            self.lead.observe(traffic.num_req / traffic.duration_s, forecast)
            horizon = max(self.params.slo_window_s, 3 * traffic.duration_s)
            self._offered = [(t, c) for t, c in self._offered if now - t < horizon - 1e-9]
            self._offered.append((now, traffic.num_req))
        targets: dict[str, int] = {}
        self._demands = self._demands[-(SMOOTHING_SIZES - 1) :] if SMOOTHING_SIZES > 1 else []
        for role, plan in self.plans.items():
            if not plan.model.ready:
                plan.reason = f"{GoodputReason.MODEL_NOT_READY}: {len(plan.model)} pass samples"
                targets[role] = (
                    self.state.expected_prefill
                    if role == Role.PREFILL
                    else self.state.expected_decode
                )
                continue
            if window is not None and traffic.duration_s > 0:
                self.calibrate(plan, window, ready_avg[role], traffic.num_req / traffic.duration_s)
                missed = {
                    Role.AGG: window.either,
                    Role.PREFILL: window.ttft,
                    Role.DECODE: window.tpot,
                }[plan.role]
                plan.spent.append((ctx.observations.now_s, window.requests, missed))
            interval_s = float(predictions["duration_s"])
            ahead = demand
            if self.params.forecast_lead:
                ahead = max(
                    demand,
                    self.lead.ahead(
                        forecast,
                        self.startups[role].lead_s(),
                        interval_s,
                        self.params.forecast_error_z,
                    ),
                )
            target = self.budgeted_target(plan, ctx.observations.now_s, ahead * interval_s)
            sized, code, text = self.size(plan, role, ahead, target)
            missed_badly = (
                window is not None
                and window.requests >= self.params.min_window_requests
                and plan.spent
                and plan.spent[-1][0] == now
                and plan.spent[-1][2] > URGENT_FACTOR * target * window.requests
            )
            surge = (
                bool(self._demands)
                and demand > SURGE_FACTOR * sorted(self._demands)[(len(self._demands) - 1) // 2]
            )
            urgent = missed_badly or surge or (self.params.forecast_lead and self.lead.surprise)
            targets[role] = self._stabilized(
                plan, role, ctx.observations.now_s, sized, f"{code}: {text}", urgent
            )
        self._demands.append(demand)
        if window is not None:
            diag.goodput_observed_violation = (
                window.either / window.requests if window.requests else None
            )
        self._record()
        return targets

    def _stabilized(
        self, plan: RolePlan, role: str, now_s: float, sized: int, why: str, urgent: bool
    ) -> int:
        """The median of the last three sizes (one interval's noise does not move the pool; the
        size itself when the last window missed the SLA badly or demand surged: ``urgent``);
        grow at once, shrink only to the largest size of the stabilization window, and not while
        the pool is scaling."""
        current = (
            self.state.expected_prefill if role == Role.PREFILL else self.state.expected_decode
        )
        setattr(self.state.diag, f"goodput_sized_{role}", sized)
        plan.recent = (plan.recent + [sized])[-SMOOTHING_SIZES:]
        if not urgent:
            sized = sorted(plan.recent)[(len(plan.recent) - 1) // 2]
        window = self.hold_s(plan)
        if plan.started_s is None:
            # The deployment's starting size counts as sized at the first observation: no
            # evidence of a quiet first interval removes it before a window has passed.
            plan.started_s = self._first_s if self._first_s is not None else now_s
            plan.sized.append((plan.started_s, current))
        ceiling = max(math.ceil(current * MAX_GROWTH_FACTOR), current + MAX_GROWTH_STEP)
        capped = min(sized, ceiling)
        plan.sized = [(t, n) for t, n in plan.sized if now_s - t < window - 1e-9] + [
            (now_s, capped)
        ]
        target = max(n for _, n in plan.sized)
        if capped < sized:
            plan.reason = f"{why}; growth capped at {ceiling} this interval"
            return target
        if target < current and self.state.in_progress(role):
            plan.reason = f"{GoodputReason.SCALE_DOWN_HELD}: {why}; waiting for the pool to settle"
            return current
        if sized < target and target <= current:
            plan.reason = (
                f"{GoodputReason.SCALE_DOWN_HELD}: {why}; {target} were needed within "
                f"the last {window:g} s"
            )
        else:
            plan.reason = why
        return target

    def hold_s(self, plan: RolePlan) -> float:
        """The scale-down stabilization window: ``scale_down_stabilization_s``, stretched for
        bursty traffic by up to ``burstiness()`` in proportion to the share of its error budget
        the pool spent over the SLO window (capacity is kept through the gaps between bursts
        only as far as the bursts cost attainment; until a window has enough requests to tell,
        the full stretch)."""
        stretch = self.burstiness()
        requests = sum(n for _, n, _ in plan.spent)
        if stretch > 1.0 and requests >= self.params.min_window_requests:
            missed = sum(v for _, _, v in plan.spent)
            stretch = 1.0 + (stretch - 1.0) * min(
                1.0, missed / (self._role_target(plan) * requests)
            )
        return self.params.scale_down_stabilization_s * stretch

    def burstiness(self) -> float:
        """How much longer than the base stabilization window to keep capacity, from 1 to
        ``MAX_BURST_FACTOR``: the dispersion of successive intervals' request counts over
        Poisson noise, ``mean((c_t - c_t-1)^2) / (2 mean(c))`` over the SLO window (1 for
        Poisson traffic, smooth trends included; far above for on/off bursts, which recur)."""
        counts = np.array([c for _, c in self._offered], dtype=float)
        if counts.shape[0] < 3 or counts.mean() <= 0:
            return 1.0
        dispersion = float(np.mean(np.diff(counts) ** 2) / (2.0 * counts.mean()))
        return min(max(dispersion, 1.0), MAX_BURST_FACTOR)

    def _reason_all(self, code: str, text: str) -> None:
        for plan in self.plans.values():
            plan.reason = f"{code}: {text}"
        self._record()

    def _record(self) -> None:
        diag = self.state.diag
        for role, plan in self.plans.items():
            setattr(diag, f"policy_reason_{role}", plan.reason)
        diag.policy_reason = (
            "; ".join(f"{r}: {p.reason}" for r, p in self.plans.items())
            if len(self.plans) > 1
            else next(iter(self.plans.values())).reason
        )
        queue_role = Role.PREFILL if Role.PREFILL in self.plans else Role.DECODE
        diag.goodput_queue_calibration = self.plans[queue_role].calibration.queue
        diag.goodput_stall_calibration = (
            self.plans[Role.DECODE].calibration.stall if Role.DECODE in self.plans else None
        )
        diag.goodput_target_violation = self.params.max_violation_fraction
        for role, plan in self.plans.items():
            setattr(diag, f"goodput_bias_{role}", plan.bias)

    # -- fast loop ---------------------------------------------------------------------------
    def pressure(self, plan: RolePlan, fpms) -> str | None:
        """Why this pool needs one more replica now, or None."""
        if not fpms or not plan.model.ready:
            return None
        pct = self.params.ttft_worker_percentile
        ttft_s, _ = self._bounds_s()
        if ttft_s is not None and plan.role.prefills:
            mix = self.history.mix() if len(self.history) else None
            hit = (
                float(
                    np.mean(np.minimum(self.history.cached / np.maximum(self.history.isl, 1), 1.0))
                )
                if mix is not None
                else 0.0
            )
            nxt = float(mix.prefill_tokens.mean()) if mix is not None else 0.0
            estimates = [self._queued_ttft_s(plan, f, hit, nxt) for f in fpms]
            worst = float(np.percentile(estimates, pct))
            if worst > ttft_s:
                return (
                    f"{GoodputReason.QUEUE_PRESSURE}: p{pct:g} queue-aware TTFT over "
                    f"{len(fpms)} workers {worst * 1000:.0f} ms > {ttft_s * 1000:.0f} ms"
                )
        if plan.role.decodes:
            kv_cap = plan.limits.max_kv_tokens / max(
                1, len(fpms) // max(1, len({f.worker_id for f in fpms}))
            )
            usage = [(f.sum_decode_kv_tokens + f.queued_decode_kv_tokens) / kv_cap for f in fpms]
            worst = float(np.percentile(usage, pct))
            if worst > self.params.kv_pressure:
                return (
                    f"{GoodputReason.KV_PRESSURE}: p{pct:g} KV usage {worst:.0%} > "
                    f"{self.params.kv_pressure:.0%}"
                )
        return None

    def _queued_ttft_s(self, plan: RolePlan, fpm, hit_rate: float, next_tokens: float) -> float:
        """A prompt arriving now at this worker: the queued prompts' tokens left after cache
        hits, the unfinished prompts' remaining tokens, then its own, in chunks."""
        tokens = (
            fpm.queued_prefill_tokens * (1.0 - hit_rate) + fpm.inflight_prefill_tokens + next_tokens
        )
        batch = float(fpm.num_decode_requests)
        budget = max(1.0, math.floor(plan.limits.max_batched_tokens - batch))
        full, tail = divmod(math.ceil(tokens), int(budget))
        base = float(
            plan.model.decode_s(fpm.sum_decode_kv_tokens if plan.role is Role.AGG else 0.0)
        )
        stall = float(plan.model.stall_s(budget)) * full + (
            float(plan.model.stall_s(tail)) if tail else 0.0
        )
        return (full + (1 if tail else 0)) * base + stall

    def run_fast(self, fpm_by_role) -> dict[str, int] | None:
        """One more replica for every pool under pressure that is not already scaling."""
        out: dict[str, int] = {}
        diag = self.state.diag
        for role, plan in self.plans.items():
            if self.state.in_progress(role):
                setattr(diag, f"load_decision_reason_{role}", GoodputReason.SCALING_IN_PROGRESS)
                continue
            why = self.pressure(plan, fpm_by_role.get(role, ()))
            if why is None:
                setattr(diag, f"load_decision_reason_{role}", GoodputReason.NO_CHANGE)
                continue
            current = (
                self.state.expected_prefill if role == Role.PREFILL else self.state.expected_decode
            )
            if current + 1 > self.max_replicas(role):
                setattr(diag, f"load_decision_reason_{role}", GoodputReason.AT_CEILING)
                continue
            out[role] = current + 1
            plan.reason = why
            setattr(diag, f"load_decision_reason_{role}", GoodputReason.SCALE_UP)
        reasons = [getattr(diag, f"load_decision_reason_{r}") for r in self.plans]
        diag.load_decision_reason = GoodputReason.SCALE_UP if out else reasons[0]
        if out:
            self._record()
        return out or None


def _recalibrated(value: float, observed: float, expected: float) -> float:
    """``value`` moved by the window's evidence: ``observed`` avoidable violations against the
    model's ``expected`` count. Within two standard deviations (Poisson) nothing changes."""
    expected = max(expected, 0.0)
    noise = 2.0 * math.sqrt(expected) + 1.0
    if observed > expected + noise:
        ratio = observed / max(expected, 0.5)
    elif observed < expected - noise:
        ratio = max(observed, 0.5) / expected
    else:
        return value
    factor = min(max(ratio**CALIBRATION_DAMPING, 1.0 / CALIBRATION_STEP), CALIBRATION_STEP)
    return min(max(value * factor, CALIBRATION_RANGE[0]), CALIBRATION_RANGE[1])


def _first(lo: int, hi: int, ok) -> int:
    """Smallest ``n`` in ``[lo, hi]`` with ``ok(n)``, for a predicate that stays true once true;
    ``hi`` when none is."""
    while lo < hi:
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid + 1
    return lo


def _pct(x: float) -> str:
    return f"{100.0 * x:.1f}%"


class _Loop:
    stage = Stage.PROPOSE

    def __init__(self, policy: SlaGoodputPolicy) -> None:
        self.policy = policy
        self.state = policy.state


class GoodputSizing(_Loop):
    """The slow loop: model-based sizing on the throughput interval."""

    plugin_id = "sla_goodput_sizing"
    priority = 20
    needs = frozenset({"traffic", "fpm"})

    def __init__(self, policy: SlaGoodputPolicy) -> None:
        super().__init__(policy)
        self._refreshed_at: float | None = None
        self._targets: dict[str, int] | None = None

    @property
    def execution_interval_seconds(self) -> float:
        return self.state.config.throughput_adjustment_interval_seconds

    @property
    def observation_window_seconds(self) -> float:
        return self.state.config.throughput_adjustment_interval_seconds

    def refresh(self, ctx: PipelineContext) -> dict[str, int] | None:
        now = ctx.observations.now_s
        if self._refreshed_at != now:
            self._refreshed_at = now
            self._targets = self._fit(self.policy.run_slow(ctx))
            diag = self.state.diag
            diag.throughput_decision_reason = (
                GoodputReason.SIZED if self._targets is not None else GoodputReason.NO_CHANGE
            )
            for role, plan in self.policy.plans.items():
                setattr(diag, f"throughput_decision_reason_{role}", plan.reason.split(":", 1)[0])
        return self._targets

    def _fit(self, targets: dict[str, int] | None) -> dict[str, int] | None:
        """Minimum endpoints and the GPU ceiling."""
        if targets is None:
            return None
        s = self.state
        out = {r: max(v, s.min_endpoint(r)) for r, v in targets.items()}
        if len(out) == 2:
            p, d = fit_ceiling_pair(
                (s.expected_prefill, s.expected_decode),
                (out[Role.PREFILL], out[Role.DECODE]),
                s.budget,
            )
            return {Role.PREFILL: p, Role.DECODE: d}
        ((role, n),) = out.items()
        return {
            role: fit_ceiling_single(
                n, s.gpus_per_replica(role), s.min_endpoint(role), s.budget.max_gpus
            )
        }

    def run(self, ctx: PipelineContext) -> StageResult:
        targets = self.refresh(ctx)
        if self.state.config.enable_load_scaling:
            return StageResult()  # the fast loop merges this tick's sizing with its own
        return StageResult(overrides=_set(targets, self.policy))


class GoodputPressure(_Loop):
    """The fast loop: queue and KV pressure on the load interval, above the slow loop's size."""

    plugin_id = "sla_goodput_pressure"
    priority = 10
    needs = frozenset({"fpm", "workers"})
    observation_window_seconds = None

    def __init__(self, policy: SlaGoodputPolicy, sizing: GoodputSizing) -> None:
        super().__init__(policy)
        self.sizing = sizing

    @property
    def execution_interval_seconds(self) -> float:
        return self.state.config.load_adjustment_interval_seconds

    def run(self, ctx: PipelineContext) -> StageResult:
        slow = None
        if self.state.config.enable_throughput_scaling and ctx.run_throughput_scaling:
            slow = self.sizing.refresh(ctx)
        fast = self.policy.run_fast(ctx.observations.fpm) or {}
        targets = dict(slow or {})
        for role, n in fast.items():
            targets[role] = max(n, targets.get(role, 0))
        return StageResult(overrides=_set(targets or None, self.policy))


def _set(targets: dict[str, int] | None, policy: SlaGoodputPolicy) -> tuple[Override, ...]:
    if not targets:
        return ()
    return tuple(
        Override(role, OverrideType.SET, n, policy.plans[role].reason)
        for role, n in sorted(targets.items())
    )


def build(state, params: SlaGoodputParams, sla: SlaTargets | None) -> PolicyPlugins:
    policy = SlaGoodputPolicy(state, params, sla)
    sizing = GoodputSizing(policy)
    return PolicyPlugins(
        throughput=sizing, load=GoodputPressure(policy, sizing), observe=policy.observe
    )
