"""Load-based scaling (reference 4.2): +/-1 replica per load tick from the engines' current FPMs.

SLA path (target ``sla``): scale up when **every** engine's estimate exceeds the SLA; scale down
when the consolidation test says the remaining N-1 engines would still meet the SLA with the
sensitivity margin. Easy mode (other targets): static queue / KV-usage thresholds. Guards: a
role whose scaling is in progress blocks the decision (both roles in disagg); the FPM map must
match the ready workers. Afterwards the throughput lower bound, the minimum endpoints and the
direction-preserving GPU budget apply.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from plansim.planner_core.budget import fit_ceiling_pair, guard_single_scaling_budget
from plansim.planner_core.observations import ForwardPassMetrics
from plansim.planner_core.perf_model import EnginePerfModel
from plansim.planner_core.reasons import LoadReason
from plansim.planner_core.state import PlannerScalingState
from plansim.roles import PlannerMode, Role

# Easy-mode thresholds: target -> (prefill up, prefill down, decode up, decode down).
# Prefill compares queued tokens / context length, decode the KV usage fraction.
EASY_THRESHOLDS = {
    "throughput": (1.0, 0.1, 1.0, 0.6),
    "latency": (0.1, 0.0, 0.4, 0.1),
}

Signal = tuple[int | None, str]  # (target or None for "no signal", reason)


def reconcile_fpm(fpms: Sequence[ForwardPassMetrics], ready: int) -> str | None:
    """Reason the FPM map cannot be trusted for ``ready`` workers, or None when it matches:
    one entry per (worker, rank), the same rank count for every worker."""
    if not fpms:
        return LoadReason.NO_FPM_DATA
    ranks: dict[int, set[int]] = {}
    for fpm in fpms:
        ranks.setdefault(fpm.worker_id, set()).add(fpm.dp_rank)
    dp_sizes = {len(r) for r in ranks.values()}
    if len(ranks) != ready or len(dp_sizes) != 1 or len(fpms) != ready * dp_sizes.pop():
        return LoadReason.WORKER_COUNT_MISMATCH
    return None


def scale_decision(
    estimates: Sequence[float], sla: float, n: int, min_ep: int, can_scale_down: bool | None
) -> Signal:
    """The SLA rule: all estimates > SLA -> N + 1; else N > 1 and safe -> max(N - 1, min_ep);
    else N. ``can_scale_down`` False is a consolidation refusal, None an unavailable estimate."""
    if not estimates:
        return None, LoadReason.INSUFFICIENT_DATA
    if all(e > sla for e in estimates):
        return n + 1, LoadReason.SCALE_UP
    if n > 1 and can_scale_down:
        target = max(n - 1, min_ep)
        return target, (LoadReason.SCALE_DOWN if target < n else LoadReason.NO_CHANGE)
    if n > 1 and can_scale_down is False and max(n - 1, min_ep) < n:
        return n, LoadReason.SCALE_DOWN_REFUSED_CONSOLIDATION
    return n, LoadReason.NO_CHANGE


def consolidation_factor(n: int) -> float:
    """c = N / (N - 1): the load each survivor carries after one of N engines goes away."""
    return n / (n - 1) if n > 1 else float("inf")


def ttft_budget_allows(
    t_own: float | None, t_post: float | None, sla_s: float, sensitivity: float
) -> bool | None:
    """Prefill scale-down test: the queue growth from consolidation must stay inside
    ``(SLA - T_own) * s``. None when an estimate is unavailable."""
    if t_own is None or t_post is None:
        return None
    budget = (sla_s - t_own) * sensitivity
    return budget > 0 and (t_post - t_own) < budget


def prefill_can_scale_down(
    model: EnginePerfModel,
    fpm: ForwardPassMetrics,
    h: float | None,
    sla_s: float,
    s: float,
    c: float,
) -> bool | None:
    t_own = model.estimate_ttft_s(fpm, h, queue_scale=0.0)
    t_post = model.estimate_ttft_s(fpm, h, queue_scale=c)
    return ttft_budget_allows(t_own, t_post, sla_s, s)


def agg_prefill_can_scale_down(
    model: EnginePerfModel,
    fpm: ForwardPassMetrics,
    h: float | None,
    sla_s: float,
    s: float,
    c: float,
) -> bool | None:
    t_own = model.estimate_ttft_s(
        fpm, h, queue_scale=0.0, decode_scale=c, include_queued_decode=True
    )
    t_post = model.estimate_ttft_s(
        fpm, h, queue_scale=c, decode_scale=c, include_queued_decode=True
    )
    return ttft_budget_allows(t_own, t_post, sla_s, s)


def decode_can_scale_down(
    model: EnginePerfModel,
    fpm: ForwardPassMetrics,
    max_kv: float,
    accept: float,
    itl_sla_s: float,
    s: float,
    c: float,
    *,
    agg: bool = False,
) -> bool | None:
    """Refuse when the consolidated KV would not fit, or the consolidated ITL breaks SLA * s."""
    kv = (
        fpm.sum_decode_kv_tokens
        + fpm.queued_decode_kv_tokens
        + (fpm.queued_prefill_tokens if agg else 0)
    )
    if kv * c >= max_kv:
        return False
    post = model.estimate_itl_s(fpm, decode_scale=c, include_queued_prefill=agg)
    if post is None:
        return None
    return post / accept < itl_sla_s * s


def easy_signal(
    values: Sequence[float],
    up: float,
    down: float,
    n: int,
    min_ep: int,
    *,
    up_inclusive: bool,
    down_inclusive: bool,
) -> Signal:
    """Static thresholds: any engine over ``up`` -> N + 1; all under ``down`` -> N - 1, unless
    the busiest engine's load spread over the survivors (``max * N / (N - 1)``) would reach
    ``up`` at once (the reference's consolidation-safe easy target)."""
    if not values:
        return None, LoadReason.INSUFFICIENT_DATA
    over = (lambda v: v >= up) if up_inclusive else (lambda v: v > up)
    under = (lambda v: v <= down) if down_inclusive else (lambda v: v < down)
    if any(over(v) for v in values):
        return n + 1, LoadReason.SCALE_UP
    target = max(n - 1, min_ep)
    if n > 1 and all(under(v) for v in values) and target < n:
        if target > 0 and max(values) * n / target >= up:
            return n, LoadReason.NO_CHANGE
        return target, LoadReason.SCALE_DOWN
    return n, LoadReason.NO_CHANGE


def _per_rank_kv(
    state: PlannerScalingState, role: str, fpms: Sequence[ForwardPassMetrics]
) -> float:
    caps = state.role_caps(role)
    limits = state.perf_models[role].limits
    total = caps.max_kv_tokens if caps is not None and caps.max_kv_tokens else limits.max_kv_tokens
    ranks = max(1, len(fpms) // max(1, len({f.worker_id for f in fpms})))
    return total / ranks


def _easy_role_signal(
    state: PlannerScalingState, role: str, fpms: Sequence[ForwardPassMetrics]
) -> Signal:
    config = state.config
    n, min_ep = state.ready(role), state.min_endpoint(role)
    target = config.optimization_target
    if role == Role.PREFILL:
        if target == "load":
            values = [float(f.queued_prefill_tokens) for f in fpms]
            return easy_signal(
                values,
                config.prefill_scale_up_queue_tokens,
                config.prefill_scale_down_queue_tokens,
                n,
                min_ep,
                up_inclusive=True,
                down_inclusive=True,
            )
        caps = state.role_caps(Role.PREFILL)
        ctx = (
            caps.context_length if caps is not None and caps.context_length else None
        ) or state.perf_models[role].limits.max_batched_tokens
        values = [f.queued_prefill_tokens / ctx for f in fpms]
        up, down, _, _ = EASY_THRESHOLDS[target]
        return easy_signal(
            values, up, down, n, min_ep, up_inclusive=True, down_inclusive=target == "latency"
        )
    max_kv = _per_rank_kv(state, role, fpms)
    agg = config.mode == PlannerMode.AGG
    values = [
        (
            f.sum_decode_kv_tokens
            + f.queued_decode_kv_tokens
            + (f.queued_prefill_tokens if agg else 0)
        )
        / max_kv
        for f in fpms
    ]
    if target == "load":
        return easy_signal(
            values,
            config.decode_scale_up_kv_rate / 100,
            config.decode_scale_down_kv_rate / 100,
            n,
            min_ep,
            up_inclusive=True,
            down_inclusive=True,
        )
    _, _, up, down = EASY_THRESHOLDS[target]
    return easy_signal(values, up, down, n, min_ep, up_inclusive=False, down_inclusive=False)


def _sla_signal(
    estimates: list[float | None],
    sla_ms: float,
    n: int,
    min_ep: int,
    checks: list[Callable[[], bool | None]],
) -> Signal:
    if not estimates or any(e is None for e in estimates):
        return None, LoadReason.INSUFFICIENT_DATA
    can_down: bool | None = None
    if n > 1 and not all(e > sla_ms for e in estimates):
        results = [check() for check in checks]
        can_down = False if False in results else (None if None in results else True)
    return scale_decision(estimates, sla_ms, n, min_ep, can_down)


def _sla_role_signals(
    state: PlannerScalingState, role: str, fpms: Sequence[ForwardPassMetrics]
) -> list[Signal]:
    """SLA signals for one role: [ttft] (prefill), [itl] (decode) or [ttft, itl] (agg)."""
    config, diag = state.config, state.diag
    model = state.perf_models[role]
    h = state.last_kv_hit_rate
    s = config.load_scaling_down_sensitivity / 100.0
    n, min_ep = state.ready(role), state.min_endpoint(role)
    c = consolidation_factor(n)
    accept = state.accept_length()
    signals = []
    pool = PlannerMode(config.mode).pool_for(role)
    if pool.prefills:
        est = [_ms(model.estimate_ttft_s(f, h)) for f in fpms]
        if all(e is not None for e in est) and est:
            diag.estimated_ttft_ms = max(est)
        check = agg_prefill_can_scale_down if pool is Role.AGG else prefill_can_scale_down
        checks = [lambda f=f: check(model, f, h, config.ttft_ms / 1000, s, c) for f in fpms]
        signals.append(_sla_signal(est, config.ttft_ms, n, min_ep, checks))
    if role == Role.DECODE:
        est = [
            None
            if (v := model.estimate_itl_s(f, include_queued_prefill=False)) is None
            else v * 1000 / accept
            for f in fpms
        ]
        if all(e is not None for e in est) and est:
            diag.estimated_itl_ms = max(est)
        max_kv = _per_rank_kv(state, role, fpms)
        agg = pool is Role.AGG
        checks = [
            lambda f=f: decode_can_scale_down(
                model, f, max_kv, accept, config.itl_ms / 1000, s, c, agg=agg
            )
            for f in fpms
        ]
        signals.append(_sla_signal(est, config.itl_ms, n, min_ep, checks))
    return signals


def _ms(value_s: float | None) -> float | None:
    return None if value_s is None else value_s * 1000.0


def combine_agg(prefill: Signal, decode: Signal, n: int) -> Signal:
    """Scale up if either wants more; scale down only if both want fewer (or prefill has no
    signal and decode wants fewer); a refusal keeps N."""
    p, p_reason = prefill
    d, d_reason = decode
    if p is not None and p > n:
        return p, p_reason
    if d is not None and d > n:
        return d, d_reason
    if p is None and d is not None and d < n:
        return d, d_reason
    if p is not None and d is not None and p < n and d < n:
        return max(p, d), LoadReason.SCALE_DOWN
    for _target, reason in (prefill, decode):
        if reason == LoadReason.SCALE_DOWN_REFUSED_CONSOLIDATION:
            return n, reason
    if p is None and d is None:
        return None, LoadReason.INSUFFICIENT_DATA
    return n, LoadReason.NO_CHANGE


def advance_load(
    state: PlannerScalingState, fpm_by_role: dict[str, tuple[ForwardPassMetrics, ...]]
) -> dict[str, int] | None:
    """One load step: role -> new target, or None when nothing changes. Fills the diagnostics."""
    config, diag = state.config, state.diag
    roles = config.active_roles()
    if not config.enable_load_scaling:
        diag.load_decision_reason = LoadReason.DISABLED
        return None
    _record_engine_load(state, fpm_by_role)
    if any(state.in_progress(role) for role in roles):
        _record(
            diag,
            roles,
            dict.fromkeys(roles, LoadReason.SCALING_IN_PROGRESS),
            LoadReason.SCALING_IN_PROGRESS,
        )
        return None

    signals: dict[str, Signal] = {}
    for role in roles:
        fpms = fpm_by_role.get(role, ())
        problem = reconcile_fpm(fpms, state.ready(role))
        if problem is not None:
            signals[role] = (None, problem)
        elif config.easy_mode:
            signals[role] = _easy_role_signal(state, role, fpms)
        else:
            role_signals = _sla_role_signals(state, role, fpms)
            if config.mode == PlannerMode.AGG:  # [ttft, itl] signals of the one agg pool
                signals[role] = combine_agg(role_signals[0], role_signals[1], state.ready(role))
            else:
                signals[role] = role_signals[0]

    current = {role: state.ready(role) for role in roles}
    if all(signals[r][0] is None for r in roles):
        reasons = {r: signals[r][1] for r in roles}
        _record(diag, roles, reasons, reasons[roles[0]])
        return None
    proposed = {r: current[r] if signals[r][0] is None else signals[r][0] for r in roles}
    reasons = {r: str(signals[r][1]) for r in roles}

    floored = dict(proposed)
    if config.enable_throughput_scaling:
        for r in roles:
            bound = state.lower_bound(r)
            if floored[r] < bound:
                if proposed[r] < current[r]:
                    reasons[r] = LoadReason.SCALE_DOWN_CAPPED_BY_THROUGHPUT
                floored[r] = bound
    floored = {r: max(v, state.min_endpoint(r)) for r, v in floored.items()}
    budget_reason = None
    if len(roles) == 2:
        pair = (floored[Role.PREFILL], floored[Role.DECODE])
        if floored != proposed:
            pair = fit_ceiling_pair(
                (current[Role.PREFILL], current[Role.DECODE]), pair, state.budget
            )
        pair, budget_reason = state.apply_disagg_scaling_budget(
            (current[Role.PREFILL], current[Role.DECODE]), pair
        )
        targets = {Role.PREFILL: pair[0], Role.DECODE: pair[1]}
    else:
        (r,) = roles
        value, budget_reason = guard_single_scaling_budget(
            current[r], floored[r], state.gpus_per_replica(r), state.min_endpoint(r), state.budget
        )
        targets = {r: value}
    for r in roles:
        if targets[r] == current[r] and reasons[r] in (LoadReason.SCALE_UP, LoadReason.SCALE_DOWN):
            reasons[r] = LoadReason.NO_CHANGE
    overall = budget_reason or _aggregate_reason(reasons.values())
    _record(diag, roles, reasons, overall)
    return targets if targets != current else None


_PRIORITY = (
    LoadReason.SCALE_UP,
    LoadReason.SCALE_DOWN_CAPPED_BY_THROUGHPUT,
    LoadReason.SCALE_DOWN,
    LoadReason.SCALE_DOWN_REFUSED_CONSOLIDATION,
    LoadReason.NO_CHANGE,
)


def _aggregate_reason(reasons) -> str:
    reasons = list(reasons)
    for candidate in _PRIORITY:
        if candidate in reasons:
            return str(candidate)
    return str(reasons[0])


def _record(diag, roles, reasons: dict[str, str], overall: str) -> None:
    diag.load_decision_reason = str(overall)
    for role in roles:
        setattr(diag, f"load_decision_reason_{role}", str(reasons[role]))


def _record_engine_load(
    state: PlannerScalingState, fpm_by_role: dict[str, tuple[ForwardPassMetrics, ...]]
) -> None:
    diag = state.diag
    queues = []
    for fpms in fpm_by_role.values():
        for f in fpms:
            queues.append(
                {
                    "worker_id": f.worker_id,
                    "dp_rank": f.dp_rank,
                    "queued_prefill_tokens": f.queued_prefill_tokens,
                    "queued_decode_kv_tokens": f.queued_decode_kv_tokens,
                    "inflight_decode_kv_tokens": f.sum_decode_kv_tokens,
                }
            )
    diag.engine_queues = queues
    if queues:
        diag.queued_prefill_tokens = sum(q["queued_prefill_tokens"] for q in queues)
        diag.decode_kv_tokens = sum(
            q["queued_decode_kv_tokens"] + q["inflight_decode_kv_tokens"] for q in queues
        )
