"""sla_goodput's rules: the request mix and its cache, queue-aware TTFT over a percentile of
workers, calibration, stabilization (one step up, one step down), the conservative fallback,
disaggregated pools sized on their own bound, and a reason for every decision."""

import math
from dataclasses import replace

import numpy as np
import pytest
from planner_fakes import agg_caps, disagg_caps, fpm

from plansim.planner_core import PlannerEngine, parse_planner_config
from plansim.planner_core.goodput_policy import (
    RequestHistory,
    SlaGoodputPolicy,
    _recalibrated,
)
from plansim.planner_core.observations import (
    CompletedRequests,
    SlaTargets,
    TickInput,
    TrafficObservation,
    WorkerCounts,
)
from plansim.planner_core.reasons import GoodputReason
from plansim.planner_core.state import PlannerScalingState

AGG = {
    "mode": "agg",
    "optimization_target": "sla",
    "enable_throughput_scaling": True,
    "enable_load_scaling": True,
    "throughput_adjustment_interval_seconds": 60,
    "load_adjustment_interval_seconds": 5,
    "load_predictor": "constant",
    "max_gpu_budget": 16,
    "scaling_policy": "sla_goodput",
}


def _requests(n, isl=1000, osl=100, cached=0, reusable=0, ttft_ms=50.0, itl_ms=8.0):
    return CompletedRequests(
        np.full(n, isl),
        np.full(n, osl),
        np.full(n, cached),
        np.full(n, reusable),
        np.full(n, ttft_ms, dtype=float),
        np.full(n, itl_ms, dtype=float),
    )


SLA = SlaTargets(ttft_ms=500.0, itl_ms=30.0)


def _policy(raw=AGG, caps=None, sla=SLA, ready=(0, 1)):
    config = parse_planner_config(raw)
    state = PlannerScalingState.create(config, caps or agg_caps())
    state.observe_workers(WorkerCounts(ready_prefill=ready[0], ready_decode=ready[1]), None)
    return SlaGoodputPolicy(state, config.policy_params, sla)


def test_a_larger_pool_misses_a_proportionally_smaller_share_of_the_reusable_prefix():
    history = RequestHistory(10)
    # Served by 4 replicas: of 800 reusable tokens, 400 were cached.
    history.add(_requests(1, cached=400, reusable=800), pool_size=4)
    assert history.cached_at(8)[0] == pytest.approx(800 - 400 * 4 / 8)
    # Past twice the size served, no further cache gain is credited.
    assert history.cached_at(32)[0] == pytest.approx(800 - 400 * 0.5)
    # Half the pool misses twice the 400 missed tokens: all 400 cached ones go too.
    assert history.cached_at(2)[0] == pytest.approx(0.0)
    assert history.cached_at(None)[0] == 400


def test_queue_aware_ttft_counts_full_queued_prompts_and_the_unfinished_one():
    policy = _policy()
    plan = policy.plans["decode"]
    # Fitted pass times of the fake workers: decode 5 ms + 1e-7/KV token; a chunk adds
    # 5 ms + 10 us/token. Queued 4000 prompt tokens at a 50% hit rate, 3000 still to prefill of
    # a running prompt, then the next prompt's 1000: 6000 tokens, one chunk beside 2 decodes.
    worker = replace(
        fpm(queued_prefill_tokens=4000, n_decode=2, decode_kv=10_000), inflight_prefill_tokens=3000
    )
    assert policy._queued_ttft_s(plan, worker, 0.5, 1000) == pytest.approx(0.006 + 0.005 + 0.060)


def test_fast_loop_grows_the_pool_when_the_median_worker_is_over_the_ttft_bound():
    policy = _policy(sla=SlaTargets(ttft_ms=100.0, itl_ms=30.0), ready=(0, 3))
    policy.history.add(_requests(10, isl=1000), pool_size=3)
    plan = policy.plans["decode"]
    quiet = fpm(worker_id=0, queued_prefill_tokens=0)
    busy = [fpm(worker_id=w, queued_prefill_tokens=20_000) for w in (1, 2)]
    # Two of three workers have 21k prompt tokens ahead of the next request (> 100 ms): the
    # median is over, so the pool grows although not every worker is (Dynamo's rule).
    why = policy.pressure(plan, (quiet, *busy))
    assert why is not None and why.startswith(GoodputReason.QUEUE_PRESSURE)
    assert policy.pressure(plan, (quiet, replace(quiet, worker_id=1), busy[0])) is None


def test_calibration_moves_only_beyond_binomial_noise_and_by_a_damped_bounded_factor():
    # 10 expected violations: within 10 +- (2 sqrt(10) + 1) nothing changes.
    assert _recalibrated(1.0, 12, 10.0) == 1.0
    # 40 observed: ratio 4, damped to sqrt(4) = 2.
    assert _recalibrated(1.0, 40, 10.0) == pytest.approx(2.0)
    # none observed of 100 expected: ratio 0.5 / 100, damped and capped to halving.
    assert _recalibrated(1.0, 0, 100.0) == pytest.approx(0.5)


def _drive(rates_rps, raw=AGG, step_s=5.0, interval_s=60.0):
    """Tick a PlannerEngine as a host would: ready counts follow its targets at once; every
    interval carries the offered requests of its rate, served within the SLA."""
    config = parse_planner_config(raw)
    engine = PlannerEngine(config, agg_caps(), sla=SlaTargets(ttft_ms=500.0, itl_ms=30.0))
    effects = engine.initial_tick(0.0)
    ready, events = 1, []
    t = 0.0
    end = interval_s * len(rates_rps)
    while effects.next_tick is not None and effects.next_tick.at_s <= end:
        nxt = effects.next_tick
        t = nxt.at_s
        rate = rates_rps[min(int((t - 1e-9) // interval_s), len(rates_rps) - 1)]
        traffic = None
        if nxt.need_traffic_metrics:
            n = int(rate * nxt.traffic_metrics_duration_s)
            traffic = TrafficObservation(
                nxt.traffic_metrics_duration_s, float(n), 1000.0, 100.0, requests=_requests(n)
            )
        fpms = (
            {"decode": tuple(fpm(worker_id=w, wall_time_s=0.0) for w in range(ready))}
            if nxt.need_worker_fpm
            else {}
        )
        effects = engine.tick(
            TickInput(t, WorkerCounts(ready_prefill=0, ready_decode=ready), traffic, fpms)
        )
        if effects.scale_to is not None and effects.scale_to.num_decode is not None:
            events.append(
                (t, ready, effects.scale_to.num_decode, effects.diagnostics["policy_reason"])
            )
            ready = effects.scale_to.num_decode
    return events


def test_a_step_in_load_scales_up_once_and_back_down_once_after_the_stabilization_window():
    # 10 min at 2 req/s, 10 min at 60 req/s, 20 min at 2 req/s.
    rates = [2.0] * 10 + [60.0] * 10 + [2.0] * 20
    events = _drive(rates, {**AGG, "scaling_policy_params": {"history_requests": 256}})
    ups = [e for e in events if e[2] > e[1]]
    downs = [e for e in events if e[2] < e[1]]
    assert len(ups) == 1 and len(downs) == 1
    assert 600.0 <= ups[0][0] <= 660.0  # the first interval that saw the step
    # The drop is seen at 1260 s. Every request met the SLA, so the step spent none of the error
    # budget and the 300 s base window (not stretched for burstiness) keeps the high size until
    # then + 300 s.
    assert 1260.0 + 300.0 - 60.0 <= downs[0][0] <= 1260.0 + 300.0 + 60.0
    assert all(reason for *_, reason in events)


def test_when_no_size_meets_the_sla_the_pool_never_shrinks():
    # An ITL bound under the 5 ms decode floor: no size meets it.
    policy = _policy(sla=SlaTargets(ttft_ms=500.0, itl_ms=1.0), ready=(0, 3))
    policy.history.add(_requests(50), pool_size=3)
    n, code, text = policy.size(policy.plans["decode"], "decode", 0.5)
    assert (n, code) == (3, GoodputReason.MOST_CONSERVATIVE)
    assert "holding 3" in text


def test_demand_beyond_the_gpu_ceiling_gets_the_ceiling():
    raw = {**AGG, "max_gpu_budget": 4}
    policy = _policy(raw, ready=(0, 2))
    policy.history.add(_requests(50), pool_size=2)
    n, code, _ = policy.size(policy.plans["decode"], "decode", 1e6)
    assert (n, code) == (4, GoodputReason.MOST_CONSERVATIVE)


def test_disaggregated_pools_size_prefill_on_ttft_and_decode_on_itl():
    raw = {**AGG, "mode": "disagg"}
    sizes = {}
    for ttft, itl in ((100.0, 30.0), (400.0, 30.0), (100.0, 10.0)):
        policy = _policy(
            raw, caps=disagg_caps(), sla=SlaTargets(ttft_ms=ttft, itl_ms=itl), ready=(1, 1)
        )
        policy.history.add(_requests(200, isl=4000, osl=200), pool_size=1)
        p, _, _ = policy.size(policy.plans["prefill"], "prefill", 20.0)
        d, _, _ = policy.size(policy.plans["decode"], "decode", 20.0)
        sizes[(ttft, itl)] = (p, d)
    # A looser TTFT bound needs fewer prefill workers and leaves decode alone; a tighter ITL
    # bound needs more decode workers and leaves prefill alone.
    assert sizes[(400.0, 30.0)][0] < sizes[(100.0, 30.0)][0]
    assert sizes[(400.0, 30.0)][1] == sizes[(100.0, 30.0)][1]
    assert sizes[(100.0, 10.0)][1] > sizes[(100.0, 30.0)][1]
    assert sizes[(100.0, 10.0)][0] == sizes[(100.0, 30.0)][0]
    assert math.prod(sizes[(100.0, 30.0)]) > 1


def test_the_error_budget_spends_half_of_what_earlier_intervals_saved():
    policy = _policy()
    plan = policy.plans["decode"]
    # Target 5%: 1000 requests with 10 misses saved 40; half of it over the next 500 requests
    # adds 4 points: 9%.
    plan.spent = [(0.0, 1000, 10)]
    assert policy.budgeted_target(plan, 60.0, 500.0) == pytest.approx(0.09)
    # A deficit is not chased: the target stays 5%.
    plan.spent = [(0.0, 1000, 100)]
    assert policy.budgeted_target(plan, 60.0, 500.0) == pytest.approx(0.05)
    # Past the SLO window (3600 s) the surplus is forgotten.
    plan.spent = [(0.0, 1000, 10)]
    assert policy.budgeted_target(plan, 3600.0, 500.0) == pytest.approx(0.05)


def test_on_off_bursts_stretch_the_stabilization_window_and_poisson_traffic_does_not():
    policy = _policy()
    policy._offered = [(60.0 * i, 100.0) for i in range(4)]
    assert policy.burstiness() == 1.0
    # Counts 0, 400, 0, 400: successive differences of 400 against a mean of 200:
    # 160000 / 400 = 400 times Poisson noise, capped at 3.
    policy._offered = [(60.0 * i, c) for i, c in enumerate((0.0, 400.0, 0.0, 400.0))]
    assert policy.burstiness() == 3.0


def test_bursts_keep_capacity_in_proportion_to_the_error_budget_they_spend():
    policy = _policy()
    plan = policy.plans["decode"]
    policy._offered = [(60.0 * i, c) for i, c in enumerate((0.0, 400.0, 0.0, 400.0))]  # x3
    # No window with enough requests yet: the full stretch, 300 s x 3.
    assert policy.hold_s(plan) == pytest.approx(900.0)
    # Target 5% of 1000 requests = 50 misses allowed; 25 spent: half the stretch, 300 x (1 + 2/2).
    plan.spent = [(0.0, 600, 20), (60.0, 400, 5)]
    assert policy.hold_s(plan) == pytest.approx(600.0)
    # Bursts that cost nothing keep nothing past the base window; an overspent budget, all of it.
    plan.spent = [(0.0, 1000, 0)]
    assert policy.hold_s(plan) == pytest.approx(300.0)
    plan.spent = [(0.0, 1000, 100)]
    assert policy.hold_s(plan) == pytest.approx(900.0)
    # Poisson traffic is never stretched, whatever it spent.
    policy._offered = [(60.0 * i, 100.0) for i in range(4)]
    assert policy.hold_s(plan) == pytest.approx(300.0)
