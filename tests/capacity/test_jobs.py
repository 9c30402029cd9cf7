"""The run's job graph: which static points it chooses once the searches are done."""

from __future__ import annotations

import numpy as np
from capacity_workloads import disagg_deployment

from plansim.capacity import prepare
from plansim.capacity.jobs import RunJobs
from plansim.capacity.segments import cut
from plansim.capacity.static_search import Evaluated, StaticSearch


def choose(points, answer):
    """``choose`` over one disaggregated variant (1 GPU per worker) whose search evaluated
    ``points``: ``(counts, good of 1000, cost, meets_target)``."""
    plan = prepare(disagg_deployment(), 0.95, default_policies=False, max_gpu_budget=8)
    jobs = RunJobs(plan, cut(np.arange(10) * 1000.0, 600.0), "unused.npz")
    (variant,) = plan.variants
    evaluated = tuple(
        Evaluated(counts, None, good, 1000, cost, met, True) for counts, good, cost, met in points
    )
    return jobs.choose([StaticSearch(variant, evaluated, answer)])


def test_the_best_infeasible_point_costs_less_per_hour_than_the_recommendation():
    # 1P+2D runs as many GPUs as the answer 2P+1D; its replay ends a little sooner, so it
    # measures a hair cheaper, but it buys no saving: 1P+1D (2 GPUs) is what spending less buys
    chosen = choose(
        [((2, 1), 960, 0.3000, True), ((1, 2), 940, 0.2999, False), ((1, 1), 600, 0.2000, False)],
        answer=(2, 1),
    )
    assert chosen.cheapest[1].counts == (2, 1)
    assert chosen.best_infeasible[1].counts == (1, 1)


def test_without_a_cheaper_miss_the_best_infeasible_is_the_closest_miss():
    chosen = choose([((2, 1), 960, 0.3000, True), ((1, 7), 900, 0.8000, False)], answer=(2, 1))
    assert chosen.best_infeasible[1].counts == (1, 7)
