"""The static search finds the hand-computed cheapest counts with few replays.

Workloads and engines: ``capacity_workloads`` (a request holds a worker 100 ms; the counts a
flat trace needs follow from its gap). The search is driven here without an executor: each
count it asks for is replayed in this process.
"""

from __future__ import annotations

import math

import pytest
from capacity_workloads import agg_deployment, disagg_deployment, flat

from plansim.capacity.objective import GpuHours
from plansim.capacity.segments import cut
from plansim.capacity.static_search import evaluate, required_good, run_search
from plansim.capacity.tasks import replay_full_task
from plansim.capacity.variants import build_variants
from plansim.retune.tasks import save_window
from plansim.workers.executor import TaskContext


def search_counts(tmp_path, workload, deployment, *, target, budget):
    """Run the variant's static search, replaying every count it asks for."""
    path = str(tmp_path / "trace.npz")
    save_window(path, workload)
    rows = tuple(int(r) for r in cut(workload.arrival_ms - workload.arrival_ms[0], 600.0).first_row)
    (variant,) = build_variants(deployment, [], max_gpu_budget=budget)
    objective = GpuHours()

    def evaluate_counts(counts):
        replays = yield counts
        return [
            evaluate(variant, c, r, target=target, budget=budget, objective=objective)
            for c, r in zip(counts, replays)
        ]

    search = run_search(variant, budget, objective, evaluate_counts)
    sent = None
    while True:
        try:
            wants = next(search) if sent is None else search.send(sent)
        except StopIteration as stop:
            return stop.value
        sent = [
            replay_full_task(TaskContext(str(tmp_path)), path, variant.with_counts(c), rows)
            for c in wants
        ]


def test_doubling_then_bisection_finds_the_count_and_says_what_it_replayed(tmp_path):
    # gap 30 ms: 4 workers see a request every 120 ms (no wait), 3 every 90 ms (each worker's
    # k-th request waits 10 k ms, so TTFT <= 500 holds for its first 50: 150 of 1000)
    result = search_counts(tmp_path, flat(1000, 30.0), agg_deployment(), target=0.95, budget=16)
    assert result.answer == (4,)
    assert [e.counts for e in result.evaluated] == [(1,), (2,), (4,), (3,)]
    assert [e.good for e in result.evaluated] == [8, 26, 1000, 150]
    assert result.cheapest.ratio == 1.0 and result.cheapest.feasible


def test_a_lower_target_is_met_by_fewer_workers(tmp_path):
    result = search_counts(tmp_path, flat(1000, 30.0), agg_deployment(), target=0.1, budget=16)
    assert result.answer == (3,)


@pytest.mark.parametrize(
    ("needed", "gap_ms"), [(1, 120.0), (2, 60.0), (3, 40.0), (5, 24.0), (7, 15.0), (11, 9.5)]
)
def test_the_answer_costs_at_most_two_replays_per_doubling(tmp_path, needed, gap_ms):
    # needed x gap >= 100 ms (nobody waits); (needed - 1) x gap < 100 ms overloads every worker
    result = search_counts(tmp_path, flat(2000, gap_ms), agg_deployment(), target=0.95, budget=16)
    assert result.answer == (needed,)
    assert len(result.evaluated) <= 2 * math.ceil(math.log2(16))


def test_no_count_within_the_budget_leaves_the_best_infeasible(tmp_path):
    result = search_counts(tmp_path, flat(1000, 30.0), agg_deployment(), target=0.95, budget=3)
    assert result.answer is None
    assert [e.counts for e in result.evaluated] == [(1,), (2,), (3,)]
    assert result.best_within_budget.counts == (3,)


def test_disaggregated_search_finds_each_pool_then_the_cheapest_split(tmp_path):
    # one request every 10 ms: prefill takes 25 ms (3 workers needed), decode emits 10 tokens
    # at 10 ms each (100 ms: 10 workers needed). Budget 16: each pool probes with the other at 15.
    result = search_counts(tmp_path, flat(1000, 10.0), disagg_deployment(), target=0.95, budget=16)
    assert result.answer == (3, 10)
    assert [e.counts for e in result.evaluated] == [
        (1, 15),
        (15, 1),
        (2, 15),
        (15, 2),
        (4, 15),
        (15, 4),
        (3, 15),
        (15, 8),
        (15, 15),
        (15, 11),
        (15, 9),
        (15, 10),
        (3, 10),
    ]
    assert not result.point((3, 15)).within_budget and result.point((3, 10)).within_budget


def test_required_good_tolerates_floating_point_products():
    assert required_good(0.95, 2000) == 1900
    assert required_good(0.95, 2001) == 1901
    assert required_good(1.0, 7) == 7
