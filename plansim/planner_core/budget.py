"""GPU budget and minimum-endpoint arithmetic (reference section 5). All functions are pure.

A negative bound disables it. The tolerance (the largest per-replica GPU cost involved) applies
only when both bounds are active and relaxes only the floor: the ceiling is never exceeded.
Guards are direction-preserving: a budget may suppress a requested move, never reverse or
amplify it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from plansim.planner_core.reasons import BudgetReason

Pair = tuple[int, int]


@dataclass(frozen=True, slots=True)
class Budget:
    """GPU band and per-replica costs. ``min_gpus``/``max_gpus`` < 0 disable that bound."""

    min_gpus: int = -1
    max_gpus: int = -1
    gpu_prefill: int = 1
    gpu_decode: int = 1
    min_prefill: int = 0
    min_decode: int = 0

    def tolerance(self, *costs: int) -> int:
        if self.min_gpus >= 0 and self.max_gpus >= 0:
            return max(costs) if costs else 0
        return 0

    def in_band(self, total: int, *costs: int) -> bool:
        if self.max_gpus >= 0 and total > self.max_gpus:
            return False
        return not (self.min_gpus >= 0 and total < self.min_gpus - self.tolerance(*costs))

    def pair_total(self, pair: Pair) -> int:
        return pair[0] * self.gpu_prefill + pair[1] * self.gpu_decode

    def pair_in_band(self, pair: Pair) -> bool:
        return self.in_band(self.pair_total(pair), self.gpu_prefill, self.gpu_decode)


def proportional_clamp_single(n: int, gpu: int, min_ep: int, budget: Budget) -> int:
    """Bring one pool into the band: over the ceiling -> ``max(min_ep, floor(max/g))`` (0 if even
    ``min_ep`` does not fit); under the floor -> ``max(min_ep, ceil(min/g))``."""
    total = n * gpu
    if budget.max_gpus >= 0 and total > budget.max_gpus:
        if min_ep * gpu > budget.max_gpus:
            return 0
        return max(min_ep, budget.max_gpus // gpu)
    if budget.min_gpus >= 0 and total < budget.min_gpus - budget.tolerance(gpu):
        grown = max(min_ep, math.ceil(budget.min_gpus / gpu))
        if budget.max_gpus >= 0 and grown * gpu > budget.max_gpus:
            return n
        return grown
    return n


def proportional_clamp_pair(pair: Pair, budget: Budget) -> Pair:
    """Bring a (prefill, decode) pair into the band, scaling both roles proportionally."""
    p, d = pair
    gp, gd = budget.gpu_prefill, budget.gpu_decode
    p_min, d_min = budget.min_prefill, budget.min_decode
    total = p * gp + d * gd
    cap = budget.max_gpus
    if cap >= 0 and total > cap:
        if cap < p_min * gp + d_min * gd:
            return (0, 0)  # infeasible configuration
        scale = cap / total
        p2 = max(p_min, min((cap - d_min * gd) // gp, math.floor(p * scale)))
        d2 = max(d_min, (cap - p2 * gp) // gd)
        return (p2, d2)
    floor = budget.min_gpus
    if floor >= 0 and total < floor - budget.tolerance(gp, gd):
        if total == 0:
            p2 = max(p_min, math.ceil(floor / 2 / gp))
        else:
            p2 = max(p_min, math.ceil(p * floor / total))
        d2 = max(d_min, math.ceil(max(0, floor - p2 * gp) / gd))
        if cap >= 0 and p2 * gp + d2 * gd > cap:
            return pair
        return (p2, d2)
    return pair


def fit_directional_budget_pair(current: Pair, proposed: Pair, budget: Budget) -> Pair | None:
    """The in-band pair between ``current`` and ``proposed`` (per role) closest to the proposal.

    Enumerates the shorter of the two ranges; for each value takes the in-band counterpart
    closest to its proposal. Ties break on (distance, proportional skew, -progress, p, d).
    ``None`` when no pair in the box is in band.
    """
    ranges = []
    for cur, prop, floor in zip(current, proposed, (budget.min_prefill, budget.min_decode)):
        lo, hi = sorted((cur, prop))
        lo = max(lo, min(floor, hi))
        ranges.append(range(lo, hi + 1))
    outer = 0 if len(ranges[0]) <= len(ranges[1]) else 1
    best: tuple[tuple[float, ...], Pair] | None = None
    for value in ranges[outer]:
        others = sorted(ranges[1 - outer], key=lambda o: (abs(o - proposed[1 - outer]), o))
        for other in others:
            pair = (value, other) if outer == 0 else (other, value)
            if budget.pair_in_band(pair):
                key = _fit_key(current, proposed, pair)
                if best is None or key < best[0]:
                    best = (key, pair)
                break
    return None if best is None else best[1]


def _fit_key(current: Pair, proposed: Pair, pair: Pair) -> tuple[float, ...]:
    distance = abs(pair[0] - proposed[0]) + abs(pair[1] - proposed[1])
    fractions = []
    for cur, prop, val in zip(current, proposed, pair):
        span = prop - cur
        fractions.append(1.0 if span == 0 else (val - cur) / span)
    skew = abs(fractions[0] - fractions[1])
    progress = abs(pair[0] - current[0]) + abs(pair[1] - current[1])
    return (distance, skew, -progress, pair[0], pair[1])


def guard_single_scaling_budget(
    current: int, proposed: int, gpu: int, min_ep: int, budget: Budget
) -> tuple[int, BudgetReason | None]:
    """Direction-preserving budget guard for one pool (agg, prefill-only, decode-only)."""
    if not budget.in_band(current * gpu, gpu):
        return proportional_clamp_single(current, gpu, min_ep, budget), BudgetReason.RECONCILE
    if proposed == current:
        return current, None
    if proposed < current and budget.min_gpus >= 0 and current * gpu <= budget.min_gpus:
        return current, BudgetReason.GUARD_HOLD
    if proposed > current and budget.max_gpus >= 0 and current * gpu >= budget.max_gpus:
        return current, BudgetReason.GUARD_HOLD
    clamped = proportional_clamp_single(proposed, gpu, min_ep, budget)
    lo, hi = sorted((current, proposed))
    if not lo <= clamped <= hi or not budget.in_band(clamped * gpu, gpu) or clamped == current:
        return current, BudgetReason.GUARD_HOLD
    return clamped, None


def guard_disagg_scaling_budget(
    current: Pair, proposed: Pair, budget: Budget
) -> tuple[Pair, BudgetReason | None]:
    """Direction-preserving budget guard for a (prefill, decode) pair."""
    if not budget.pair_in_band(current):
        return proportional_clamp_pair(current, budget), BudgetReason.RECONCILE
    if proposed == current:
        return current, None
    ups = [proposed[i] > current[i] for i in range(2)]
    downs = [proposed[i] < current[i] for i in range(2)]
    opposing = any(ups) and any(downs)
    cur_total = budget.pair_total(current)
    at_floor = budget.min_gpus >= 0 and cur_total <= budget.min_gpus
    at_ceiling = budget.max_gpus >= 0 and cur_total >= budget.max_gpus
    if (at_floor and any(downs)) or (at_ceiling and any(ups)):
        if not opposing:
            return current, BudgetReason.GUARD_HOLD
        fitted = fit_directional_budget_pair(current, proposed, budget)
        if fitted is None or fitted == current:
            return current, BudgetReason.GUARD_HOLD
        return fitted, None
    clamped = proportional_clamp_pair(proposed, budget)
    for i in range(2):
        lo, hi = sorted((current[i], proposed[i]))
        if not lo <= clamped[i] <= hi:
            return current, BudgetReason.GUARD_HOLD
    if not budget.pair_in_band(clamped) or clamped == current:
        return current, BudgetReason.GUARD_HOLD
    return clamped, None


def fit_ceiling_single(n: int, gpu: int, min_ep: int, max_gpus: int) -> int:
    """Largest count <= ``n`` under the GPU ceiling (never below ``min_ep`` unless infeasible)."""
    if max_gpus < 0 or n * gpu <= max_gpus:
        return n
    return proportional_clamp_single(n, gpu, min_ep, Budget(max_gpus=max_gpus))


def fit_ceiling_pair(current: Pair, proposed: Pair, budget: Budget) -> Pair:
    """Fit a throughput proposal under the GPU ceiling only (the floor is disabled, since
    ``min_gpu_budget`` guards scale-down and must not inflate a lower bound)."""
    ceiling = Budget(
        min_gpus=-1,
        max_gpus=budget.max_gpus,
        gpu_prefill=budget.gpu_prefill,
        gpu_decode=budget.gpu_decode,
        min_prefill=budget.min_prefill,
        min_decode=budget.min_decode,
    )
    if ceiling.pair_in_band(proposed):
        return proposed
    if current[0] < budget.min_prefill or current[1] < budget.min_decode:
        return proportional_clamp_pair(proposed, ceiling)
    fitted = fit_directional_budget_pair(current, proposed, ceiling)
    return current if fitted is None else fitted
