"""Throughput-based scaling (reference 3.1): predicted demand / one engine's capacity under the
SLA -> replica counts, capped per step, fitted under the GPU ceiling; with load scaling on the
result is only the lower bound the load loop must respect."""

from __future__ import annotations

import math
from dataclasses import dataclass

from plansim.planner_core.budget import (
    fit_ceiling_pair,
    fit_ceiling_single,
    guard_single_scaling_budget,
)
from plansim.planner_core.reasons import BudgetReason, ThroughputReason
from plansim.planner_core.state import PlannerScalingState
from plansim.roles import PlannerMode, Role


@dataclass(frozen=True, slots=True)
class Predictions:
    """Same-tick output of the PREDICT stage (requests per throughput window, mean lengths)."""

    num_req: float | None = None
    isl: float | None = None
    osl: float | None = None
    kv_hit_rate: float | None = None
    accept_length: float | None = None


def demand_rps(num_req: float, duration_s: float) -> float:
    return num_req / duration_s


def replicas_for(demand: float, engine_rps: float, min_ep: int) -> int:
    """``max(ceil(demand / rps), min_ep)``."""
    return max(math.ceil(demand / engine_rps - 1e-12), min_ep)


def delta_capped(desired: int, current: int, limit: int, min_ep: int) -> int:
    """At most ``limit`` replicas away from ``current``, then lifted to the minimum endpoint
    (endpoint recovery may exceed the cap)."""
    bounded = min(max(desired, max(0, current - limit)), current + limit)
    return max(bounded, min_ep)


def advance_throughput(
    state: PlannerScalingState, predictions: Predictions, duration_s: float
) -> dict[str, int] | None:
    """One throughput step. Returns role -> target when it scales (throughput scaling alone),
    ``None`` otherwise (lower bounds set, or nothing to do). Fills the diagnostics."""
    config, diag = state.config, state.diag
    if not config.enable_throughput_scaling:
        diag.throughput_decision_reason = ThroughputReason.DISABLED
        return None
    if predictions.num_req is None or predictions.isl is None or predictions.osl is None:
        return None
    if duration_s <= 0:
        diag.throughput_decision_reason = ThroughputReason.NO_TRAFFIC_DATA
        return None
    demand = demand_rps(predictions.num_req, duration_s)
    accept = state.accept_length()
    roles = config.active_roles()
    desired: dict[str, int | None] = {}
    for role in roles:
        model = state.perf_models[role]
        search = PlannerMode(config.mode).pool_for(role)
        cap = model.find_engine_capacity(
            predictions.isl,
            predictions.osl,
            ttft_sla_ms=config.ttft_ms if search.prefills else None,
            itl_sla_ms=config.itl_ms if search.decodes else None,
            kv_hit_rate=state.last_kv_hit_rate if search.prefills else None,
            accept_length=accept,
            role=search,
        )
        rps = cap.rps if cap is not None else 0.0
        setattr(diag, f"engine_rps_{Role(role).planner_role}", rps if cap else None)
        desired[role] = replicas_for(demand, rps, state.min_endpoint(role)) if rps > 0 else None

    current = {role: state.ready(role) for role in roles}
    reasons: dict[str, str] = {}
    if any(v is None for v in desired.values()):
        for role in roles:
            reasons[role] = (
                ThroughputReason.MODEL_NOT_READY
                if desired[role] is None
                else ThroughputReason.PARTNER_NOT_READY
            )
        targets = {role: max(current[role], state.min_endpoint(role)) for role in roles}
        overall = ThroughputReason.MODEL_NOT_READY
    else:
        limit = config.max_throughput_scaling_replicas
        targets = {
            role: delta_capped(desired[role], current[role], limit, state.min_endpoint(role))
            for role in roles
        }
        overall = None

    proposed = dict(targets)
    targets = _fit_ceiling(state, current, targets)
    held = targets != proposed and targets == current

    if config.enable_load_scaling:
        for role in roles:
            state.set_lower_bound(role, targets[role])
        if overall is None:
            overall = BudgetReason.GUARD_HOLD if held else ThroughputReason.SET_LOWER_BOUND
        _record(diag, overall, reasons, roles)
        return None

    if overall is not None:  # a model is not ready: hold (the endpoint floor still applies)
        _record(diag, overall, reasons, roles)
        return targets if targets != current else None

    targets, budget_reason = _guard_band(state, current, targets)
    if targets == current:
        overall = budget_reason or (BudgetReason.GUARD_HOLD if held else ThroughputReason.NO_CHANGE)
        _record(diag, overall, reasons, roles)
        return None
    _record(diag, ThroughputReason.SCALE, reasons, roles)
    return targets


def _fit_ceiling(
    state: PlannerScalingState, current: dict[str, int], targets: dict[str, int]
) -> dict[str, int]:
    b = state.budget
    if len(targets) == 2:
        p, d = fit_ceiling_pair(
            (current[Role.PREFILL], current[Role.DECODE]),
            (targets[Role.PREFILL], targets[Role.DECODE]),
            b,
        )
        return {Role.PREFILL: p, Role.DECODE: d}
    ((role, n),) = targets.items()
    return {
        role: fit_ceiling_single(
            n, state.gpus_per_replica(role), state.min_endpoint(role), b.max_gpus
        )
    }


def _guard_band(
    state: PlannerScalingState, current: dict[str, int], targets: dict[str, int]
) -> tuple[dict[str, int], BudgetReason | None]:
    if len(targets) == 2:
        (p, d), reason = state.apply_disagg_scaling_budget(
            (current[Role.PREFILL], current[Role.DECODE]),
            (targets[Role.PREFILL], targets[Role.DECODE]),
        )
        return {Role.PREFILL: p, Role.DECODE: d}, reason
    ((role, n),) = targets.items()
    value, reason = guard_single_scaling_budget(
        current[role], n, state.gpus_per_replica(role), state.min_endpoint(role), state.budget
    )
    return {role: value}, reason


def _record(diag, overall: str, per_role: dict[str, str], roles: tuple[str, ...]) -> None:
    diag.throughput_decision_reason = str(overall)
    for role in roles:
        setattr(diag, f"throughput_decision_reason_{role}", str(per_role.get(role, overall)))
