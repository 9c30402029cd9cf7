"""``plansim.capacity.search`` end to end on hand-computable workloads (in this process): the
answer, the lower bound against the cheapest static deployment, search dimensions, policies
and the interval. Engines and workloads: ``capacity_workloads``."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from capacity_workloads import agg_deployment, flat, steps, workload_at

from plansim.capacity import search
from plansim.workers.executor import InProcessExecutor
from plansim.workers.journal import Journal, JournaledExecutor


def run(workload, deployment, target=0.95, **options):
    options.setdefault("default_policies", False)
    return search(workload, deployment, target, executor=InProcessExecutor(), **options)


def test_flat_traffic_without_startup_has_a_bound_equal_to_the_cheapest_static():
    # 4 workers serve one request every 30 ms; 3 meet the SLA for about 150 of a segment's 500
    # (each worker's first 50), so no segment can run short while the others make up for it
    # at a 90% target (200 of 2000 may miss)
    result = run(flat(2000, 30.0), agg_deployment(), target=0.9, segment_s=15.0)
    assert result.cheapest.counts == (4,)
    bound = result.bound
    assert [row.counts for row in bound.segments] == [(4,)] * 4
    assert bound.cost == pytest.approx(result.cheapest.cost, rel=1e-9)


def test_stepped_traffic_scales_in_hindsight_and_pays_startup_for_added_workers():
    # 30 s at one request per 60 ms (2 workers), 30 s at 30 ms (4), 30 s at 60 ms (2);
    # workers take 10 s to start
    workload = steps((30, 60.0), (30, 30.0), (30, 60.0))
    result = run(workload, agg_deployment(startup_s=10.0), target=0.99, segment_s=30.0)
    assert result.cheapest.counts == (4,)
    bound = result.bound
    assert [row.counts for row in bound.segments] == [(2,), (4,), (2,)]
    # the last request arrives at 89.94 s and completes 100 ms later
    charged_s = 2 * 30 + 4 * 30 + 2 * (89.94 - 60.0 + 0.1)
    assert bound.startup_cost == pytest.approx(2 * 10.0 / 3600)
    assert bound.cost == pytest.approx((charged_s + 2 * 10.0) / 3600)
    assert bound.cost < result.cheapest.cost
    # the schedule, replayed with start-ups, meets the target at about the bound's cost
    replayed = bound.replayed
    assert replayed.meets_target and replayed.scaling_events == 2
    assert replayed.cost == pytest.approx(bound.cost, rel=0.01)


@pytest.mark.parametrize("seed", [3, 11])
def test_the_bound_never_exceeds_the_cheapest_static(seed):
    rng = np.random.default_rng(seed)
    # bursty traffic: Poisson arrivals whose rate changes every 20 s
    rates = rng.uniform(10, 45, size=5)
    arrivals, start = [], 0.0
    for rate in rates:
        gaps = rng.exponential(1000.0 / rate, size=int(rate * 15))
        times = start + np.cumsum(gaps)
        arrivals.append(times[times < start + 15_000])
        start += 15_000
    workload = workload_at(np.concatenate(arrivals))
    result = run(
        workload, agg_deployment(startup_s=5.0, router="kv_router"), target=0.9, segment_s=15.0
    )
    assert result.cheapest is not None and result.bound.cost is not None
    assert result.bound.cost <= result.cheapest.cost


def test_a_nested_search_key_gives_each_value_its_own_cheapest_count():
    # decode passes of 5 ms halve the decode time: 10 + 9 x 5 = 55 ms a request, 2 workers
    result = run(
        flat(1000, 30.0),
        agg_deployment(),
        target=0.95,
        search={"engine.timing_model.decode_ms": [10.0, 5.0]},
    )
    answers = {v.variant: v.point.counts for v in result.variants}
    assert answers == {
        "engine.timing_model.decode_ms=10.0": (4,),
        "engine.timing_model.decode_ms=5.0": (2,),
    }
    assert result.cheapest.variant == "engine.timing_model.decode_ms=5.0"
    assert result.bound.variant == result.cheapest.variant
    points = result.points
    assert set(points["engine.timing_model.decode_ms"]) == {10.0, 5.0}


def test_an_unreachable_target_reports_the_best_infeasible_point():
    result = run(flat(1000, 30.0), agg_deployment(), target=0.95, max_gpu_budget=3)
    assert result.cheapest is None
    assert result.best_infeasible.counts == (3,)
    assert result.best_infeasible.good_requests == 150
    assert any("no deployment within 3 GPUs" in note for note in result.notes)
    assert result.to_json()["cheapest_static"] is None


def test_policies_are_replayed_from_the_deployment_counts_with_their_gap_to_the_bound():
    result = run(
        flat(1000, 30.0), agg_deployment(), target=0.9, segment_s=15.0, default_policies=True
    )
    # by default, one policy per scaling policy of the planner
    assert [p.name for p in result.policies] == ["dynamo", "sla_goodput"]
    rows = result.points[result.points["kind"] == "policy"]
    for policy, (_, row) in zip(result.policies, rows.iterrows(), strict=True):
        assert policy.start_counts == (2,)
        assert policy.gap_to_oracle_pct == pytest.approx(
            (policy.cost - result.bound.cost) / result.bound.cost * 100.0
        )
        assert row["policy"] == policy.name and row["scaling_events"] == policy.scaling_events
    # 2 workers where the cheapest static deployment has 4: the output says it is a cold start
    assert any(
        "the planner policies start at 2 workers, fewer than the cheapest static "
        "deployment's 4: their first intervals are a cold start" in note
        for note in result.notes
    )


def test_policies_starting_at_the_cheapest_static_count_get_no_cold_start_note():
    result = run(flat(1000, 30.0), agg_deployment(num_workers=4), target=0.9, default_policies=True)
    assert result.cheapest.counts == (4,)
    assert not any("cold start" in note for note in result.notes)


def test_policies_start_within_the_budget_when_the_deployment_exceeds_it():
    result = run(
        flat(1000, 30.0),
        agg_deployment(num_workers=6),
        target=0.9,
        max_gpu_budget=3,
        default_policies=True,
    )
    assert_policies_start_at(
        result, 3, "6 workers exceed --max-gpu-budget 3 GPUs: the planner policies start at 3"
    )
    for policy in result.policies:
        # the provisioned workers never pass the budget, from the first instant
        assert max(n for _, n in policy.worker_series) <= 3


def assert_policies_start_at(result, workers: int, note: str) -> None:
    """Both default policies start at ``workers`` (results and points rows), and a note says."""
    assert [p.start_counts for p in result.policies] == [(workers,), (workers,)]
    rows = result.points[result.points["kind"] == "policy"]
    assert rows["num_workers"].tolist() == [workers, workers]
    assert any(note in n for n in result.notes), result.notes


def test_planner_start_static_replays_the_policies_from_the_cheapest_static_counts():
    # 4 static workers are the cheapest at 90% (the first test); the deployment has 2
    result = run(
        flat(1000, 30.0),
        agg_deployment(),
        target=0.9,
        segment_s=15.0,
        default_policies=True,
        planner_start="static",
    )
    assert result.cheapest.counts == (4,)
    assert_policies_start_at(
        result, 4, "the planner policies start at the cheapest static deployment, 4 workers"
    )


def test_planner_start_static_without_a_feasible_static_starts_from_the_deployment():
    result = run(
        flat(1000, 30.0),
        agg_deployment(),
        target=0.95,
        max_gpu_budget=3,
        default_policies=True,
        planner_start="static",
    )
    assert result.cheapest is None
    assert_policies_start_at(result, 2, "no static deployment meets the target")


def test_seeds_replay_the_chosen_points_and_bound_the_goodput_ratio():
    workload = workload_at(np.sort(np.random.default_rng(5).uniform(0, 40_000, 1000)))
    deployment = agg_deployment(router="random")
    result = run(workload, deployment, target=0.9, segment_s=10.0, seeds=3)
    assert result.replays["seed"] == 2 * sum(
        p is not None for p in (result.cheapest, result.best_infeasible)
    )
    interval = result.cheapest.interval
    assert interval.seeds == 3 and interval.segments == 4
    assert interval.low <= result.cheapest.goodput_ratio <= interval.high
    again = run(workload, deployment, target=0.9, segment_s=10.0, seeds=3)
    assert again.cheapest.interval == interval


def test_round_robin_routing_adds_no_seed_replays_and_says_so():
    result = run(flat(1000, 30.0), agg_deployment(), target=0.95, seeds=3)
    assert "seed" not in result.replays
    assert any("round_robin" in note for note in result.notes)


def test_the_points_table_has_a_row_per_replay():
    result = run(flat(1000, 30.0), agg_deployment(), target=0.95)
    points = result.points
    static = points[points["kind"] == "static"]
    assert static["num_workers"].tolist() == [1, 2, 4, 3]
    assert static["good_requests"].tolist() == [8, 26, 1000, 150]
    assert len(points[points["kind"] == "segment"]) == result.replays["segment"]


def test_planner_knob_search_answers_the_first_feasible_min_endpoint_and_writes_it():
    # 4 static workers are the cheapest at 90% (see the first test). A dynamo planner whose
    # floor is the static count starts there (a replay starts at least at min_endpoint) and
    # never goes below, so min_endpoint 4 holds the target: the answer is at most 4, and
    # every smaller floor replayed missed it.
    import yaml

    from plansim.commands.capacity import planner_file
    from plansim.planner_core import parse_planner_config

    result = run(
        flat(1000, 30.0),
        agg_deployment(),
        target=0.9,
        segment_s=15.0,
        search=["planner.min_endpoint=5,1,2,3,4"],
    )
    assert result.cheapest.counts == (4,)
    tuning = result.tuning
    assert [k.values for k in tuning.knobs] == [(1, 2, 3, 4, 5)]
    answer = tuning.answer["min_endpoint"]
    assert answer <= 4
    for trial in tuning.trials:
        floor = dict(trial.setting)["min_endpoint"]
        assert trial.meets_target == (floor >= answer)
    (tuned,) = [p for p in result.policies if p.name == "dynamo-tuned"]
    assert tuned.meets_target and tuned.start_counts == (max(2, answer),)
    static, bound = result.cheapest.cost, result.bound.cost
    assert tuned.saving_pct == pytest.approx((static - tuned.cost) / static * 100.0)
    if static - bound > 1e-9:
        assert tuned.hindsight_share == pytest.approx((static - tuned.cost) / (static - bound))
    loaded = parse_planner_config(yaml.safe_load(planner_file(tuning)))
    assert loaded.min_endpoint == answer
    assert loaded.model_dump() == parse_planner_config(tuning.planner).model_dump()
    rows = result.points[result.points["kind"] == "tune"]
    assert len(rows) == len(tuning.trials)


def test_a_journaled_search_resumed_replays_only_what_its_journal_lacks_tune_replays_too(tmp_path):
    # The planner knob search's replays go through the same executor as the others, so they
    # are recorded as they finish and a resumed run (--resume) answers them from the journal:
    # with the tune records removed exactly those are replayed again, to the same answer.
    class Counting(InProcessExecutor):
        def __init__(self):
            self.ran = []

        def run(self, tasks, context, timeout_s=None, on_result=None):
            self.ran += [t.key for t in tasks]
            return super().run(tasks, context, timeout_s, on_result)

    def journaled(inner):
        journal = Journal.open(tmp_path / "journal", {"test": 1}, resume=True)
        result = search(
            flat(1000, 30.0),
            agg_deployment(),
            0.9,
            segment_s=15.0,
            search=["planner.min_endpoint=1,2,3,4,5"],
            default_policies=False,
            executor=JournaledExecutor(inner, journal),
        )
        return result, journal

    first, journal = journaled(Counting())
    total = sum(first.replays.values())
    assert journal.recorded == total > 0
    records = {
        p: json.loads(p.read_bytes()).get("key", "") for p in (tmp_path / "journal").glob("*.json")
    }
    tune = {p: key for p, key in records.items() if key.startswith("policy tune ")}
    assert len(tune) == first.replays["tune"] == len(first.tuning.trials) > 0
    for path in tune:
        path.unlink()
    inner = Counting()
    again, journal = journaled(inner)
    assert sorted(inner.ran) == sorted(tune.values())
    assert journal.reused == total - len(tune)
    assert again.tuning.answer == first.tuning.answer
    assert again.tuning.planner == first.tuning.planner
    pd.testing.assert_frame_equal(again.points, first.points)
