"""The controller's windows, decision timing and outcomes (seed: Windows, Decision Timing,
Predictor Swap, Replay Integration), with scripted window reads and replays."""

from __future__ import annotations

import pytest
from retune_fakes import ScriptedExecutor, agg_setup, summary

from plansim.planner_core.observations import WorkerCounts
from plansim.retune.controller import RetuneController, RetuneInputs
from plansim.retune.tasks import WindowData
from plansim.sim.routing import router_knobs

DELTA_S = 5.0
# The host's desired router map at startup: every patchable knob of the kv_router policy.
STARTUP_ROUTER = {
    k.name: k.default for k in router_knobs("kv_router") if k.patchable and k.alias_of is None
}


def live(**changes):
    """The desired router map of the one (decode) pool: the startup map with ``changes``."""
    return {"decode": {**STARTUP_ROUTER, **changes}}


TWO_READY = WorkerCounts(ready_prefill=0, ready_decode=2)


def by_weight(spec, config):
    """Goodput grows with overlap_score_weight: 2.0 is the best point."""
    return summary(100.0 * dict(config.router).get("overlap_score_weight", 1.0))


def make(retune=None, replay=by_weight, planner=None, deployment=None, **executor_kw):
    """A controller on ``agg_setup(retune, planner, deployment)`` whose trace starts at 1 s."""
    executor = ScriptedExecutor(replay, **executor_kw)
    ctl = RetuneController(
        agg_setup(retune, planner, deployment),
        RetuneInputs(("trace.jsonl.gz",), 1000.0),
        scale_interval_s=DELTA_S,
        executor=lambda n: executor,
    )
    return ctl, executor


def run_ticks(ctl, until_s, counts=TWO_READY, start_s=0.0):
    """Tick every delta from start + delta; returns {tick: (router_parameters, decisions)}."""
    ctl.initial_tick(start_s)
    out = {}
    t = start_s + DELTA_S
    while t <= until_s + 1e-9:
        out[t] = ctl.on_tick(t, counts)
        t += DELTA_S
    return out


def decisions(ticks):
    return {t: d for t, (_, ds) in ticks.items() for d in ds}


def test_window_k_covers_s0_plus_kT_to_s0_plus_k1T_and_is_censored_at_end_plus_grace():
    ctl, _ = make()
    ctl.initial_tick(10.0)
    assert ctl.window_bounds(0) == (10.0, 70.0)
    assert ctl.window_bounds(2) == (130.0, 190.0)
    assert ctl.cutoff_s(2) == 195.0
    spec = ctl.window_spec(1)
    # trace time = first arrival + s * 1000 * arrival_speedup_ratio ms
    assert (
        spec.trace_ms(spec.start_s),
        spec.trace_ms(spec.end_s),
        spec.trace_ms(spec.cutoff_s),
    ) == (1000.0 + 70 * 2000.0, 1000.0 + 130 * 2000.0, 1000.0 + 135 * 2000.0)


def test_the_sweep_launches_at_the_first_tick_at_or_after_L_k():
    ctl, _ = make()
    events = decisions(run_ticks(ctl, 200))
    assert [e["launch_s"] for e in events.values()] == [65.0, 125.0, 185.0]


def test_no_decision_in_the_launch_tick_even_with_zero_latency():
    ctl, _ = make({"decision_latency_seconds": 0})
    events = decisions(run_ticks(ctl, 70))
    assert list(events) == [70.0]  # launched at 65, ready at 65 + max(0, 5)
    assert events[70.0]["ready_s"] == 70.0


@pytest.mark.parametrize(
    ("latency_s", "ready_s", "decision_s"),
    [
        (3, 70.0, 70.0),
        (12, 77.0, 80.0),
        (15, 80.0, 80.0),
        ("measured", 70.0, 70.0),  # a scripted sweep takes far less than delta = 5 s
    ],
)
def test_the_decision_lands_on_the_first_tick_at_or_after_t_plus_max_d_delta(
    latency_s, ready_s, decision_s
):
    ctl, _ = make({"decision_latency_seconds": latency_s})
    event = next(iter(decisions(run_ticks(ctl, 100)).values()))
    assert (event["launch_s"], event["ready_s"], event["decision_s"]) == (65.0, ready_s, decision_s)


def test_router_parameters_change_at_the_decision_tick_and_stay_level_triggered():
    ctl, _ = make({"decision_latency_seconds": 12})
    ticks = run_ticks(ctl, 90)
    assert ticks[75.0][0] == live()
    assert ticks[80.0][0] == live(overlap_score_weight=2.0)
    assert ticks[90.0][0] == live(overlap_score_weight=2.0)
    event = decisions(ticks)[80.0]
    assert event["outcome"] == "applied"
    assert event["router_parameters"] == live(overlap_score_weight=2.0)
    assert event["improvement_percentage"] == pytest.approx(100.0)


def test_the_next_sweep_searches_from_the_applied_point():
    ctl, _ = make()
    events = list(decisions(run_ticks(ctl, 130)).values())
    assert [e["outcome"] for e in events] == ["applied", "no_improvement"]
    current = next(c for c in events[1]["candidates"] if c["is_current"])
    assert current["point"]["router"] == {"overlap_score_weight": 2.0}


def test_ties_go_to_the_current_point():
    ctl, _ = make(replay=lambda spec, config: summary(100.0))
    event = next(iter(decisions(run_ticks(ctl, 70)).values()))
    assert event["outcome"] == "no_improvement"
    assert event["best"] == {"router": {"overlap_score_weight": 1.0}, "planner": {}}
    assert event["router_parameters"] is None and event["planner_changes"] == {}


def test_the_threshold_is_strict_for_the_whole_decision():
    # 1.0 -> 2.0 doubles the score: exactly +100 % does not beat a 100 % threshold.
    ctl, _ = make({"min_improvement_percentage": 100.0})
    event = next(iter(decisions(run_ticks(ctl, 70)).values()))
    assert event["outcome"] == "no_improvement"


def test_advisory_never_changes_router_parameters_and_searches_from_the_deployed_point():
    ctl, _ = make({"advisory": True})
    ticks = run_ticks(ctl, 130)
    events = list(decisions(ticks).values())
    assert [e["outcome"] for e in events] == ["advisory", "advisory"]
    assert all(params == live() for params, _ in ticks.values())
    assert events[0]["changes"] == {"router": {"overlap_score_weight": 2.0}, "planner": {}}
    current = next(c for c in events[1]["candidates"] if c["is_current"])
    assert current["point"]["router"] == {"overlap_score_weight": 1.0}
    assert all(e["planner_changes"] == {} and e["router_parameters"] is None for e in events)


def test_a_role_without_ready_workers_at_the_window_start_fails_the_decision():
    ctl, _ = make()
    event = next(iter(decisions(run_ticks(ctl, 70, counts=WorkerCounts(0, 0))).values()))
    assert (event["outcome"], event["reason"]) == ("failed", "no recorded counts")


def test_an_empty_window_fails_the_decision_and_keeps_the_reader_counts():
    ctl, _ = make(read=lambda spec: WindowData("unused", 0, {"censored": 3}))
    event = next(iter(decisions(run_ticks(ctl, 70)).values()))
    assert (event["outcome"], event["reason"]) == ("failed", "empty window")
    assert event["reader_counts"] == {"censored": 3}


def test_a_timed_out_sweep_is_a_timeout_decision_that_changes_nothing():
    ctl, _ = make(timeout=True)
    ticks = run_ticks(ctl, 70)
    event = decisions(ticks)[70.0]
    assert event["outcome"] == "timeout"
    assert ticks[70.0][0] == live()


def test_a_failed_current_point_fails_the_decision():
    def replay(spec, config):
        if dict(config.router)["overlap_score_weight"] == 1.0:
            raise RuntimeError("replay crashed")
        return summary(50.0)

    ctl, _ = make(replay=replay)
    event = next(iter(decisions(run_ticks(ctl, 70)).values()))
    assert (event["outcome"], event["reason"]) == ("failed", "current point failed")


def test_without_a_kv_router_the_router_knobs_change_nothing_and_share_one_replay():
    ctl, executor = make(deployment={"router": {"mode": "round_robin"}})
    event = next(iter(decisions(run_ticks(ctl, 70)).values()))
    assert event["replays"] == 1 and len(executor.replayed) == 1
    scores = {c["score"] for c in event["candidates"]}
    assert len(scores) == 1 and event["outcome"] == "no_improvement"


def test_the_candidate_set_is_current_startup_and_grid_at_most_max_candidates_plus_2():
    ctl, _ = make()
    event = next(iter(decisions(run_ticks(ctl, 70)).values()))
    weights = [c["point"]["router"]["overlap_score_weight"] for c in event["candidates"]]
    assert weights == [1.0, 0.5, 2.0]  # current (= startup) first, then the grid without repeats


def test_the_router_cost_and_queue_knobs_are_searchable():
    retune = {
        "router": {
            "prefill_load_scale": {"choices": [0.5, 2.0]},
            "router_queue_policy": {"choices": ["fcfs", "wspt"]},
            "router_queue_threshold": {"choices": [None, 1.0]},
        }
    }
    ctl, _ = make(retune, replay=lambda spec, config: summary(100.0))
    event = next(iter(decisions(run_ticks(ctl, 70)).values()))
    points = [c["point"]["router"] for c in event["candidates"]]
    assert points[0] == {
        "prefill_load_scale": 1.0,
        "router_queue_policy": "fcfs",
        "router_queue_threshold": None,
    }  # the startup point
    assert {
        "prefill_load_scale": 2.0,
        "router_queue_policy": "wspt",
        "router_queue_threshold": 1.0,
    } in points and len(points) == 9


def test_recheck_rejects_a_combination_that_no_longer_validates():
    ctl, _ = make()
    assert ctl.recheck({"fpm_sample_bucket_size": 3}) is not None
    assert ctl.recheck({"fpm_sample_bucket_size": 4}) is None


SWAP_PLANNER = {
    "optimization_target": "sla",
    "enable_throughput_scaling": True,
    "throughput_adjustment_interval_seconds": 30,
    "load_predictor": "constant",
}


def short_history(spec):
    """Two 30 s buckets of traffic in all: too little for a Kalman predictor (5 points)."""
    buckets = ((10.0, 100.0, 20.0), (12.0, 110.0, 22.0))
    return WindowData(
        "unused",
        22,
        {},
        presweep_history=(),
        presweep_window=buckets,
        swap_warmup=buckets,
        inner_warmup=(),
    )


def test_a_predictor_swap_without_enough_warmup_fails_and_changes_nothing():
    # kalman is listed first and ties with constant (both repeat the last value while warming
    # up), so the pre-sweep picks kalman, whose warm-up is too short.
    retune = {"planner": {"load_predictor": {"choices": ["kalman", "constant"]}}}
    ctl, _ = make(retune, planner=SWAP_PLANNER, read=short_history)
    ticks = run_ticks(ctl, 70)
    event = decisions(ticks)[70.0]
    assert event["predictor_presweep"]["winner"] == 0
    assert event["outcome"] == "failed" and event["reason"].startswith(
        "warm-up too short for a swapped predictor"
    )
    assert event["planner_changes"] == {} and ticks[70.0][0] == live()
    assert ctl.live_config.load_predictor == "constant"


def test_candidate_replays_start_from_the_counts_recorded_at_the_window_start():
    seen = []

    def replay(spec, config):
        seen.append(spec.ready_counts.ready_decode)
        return summary(100.0)

    ctl, _ = make(replay=replay)
    ctl.initial_tick(0.0)
    t = DELTA_S
    while t <= 130:
        ctl.on_tick(t, WorkerCounts(0, 1 + int(t // 30)))  # 1 worker until 30 s, 2 until 60 s...
        t += DELTA_S
    # Window 0 has no record at 0 s: nothing scales before the first tick (5 s, 1 worker).
    # Window 1 starts at 60 s, recorded as 3 workers at the 60 s tick.
    assert set(seen[:3]) == {1} and set(seen[3:]) == {3}


def test_advisory_never_changes_planner_fields():
    def by_sensitivity(spec, config):
        return summary(float(dict(config.planner)["load_scaling_down_sensitivity"]))

    scaling = {
        "optimization_target": "sla",
        "enable_throughput_scaling": True,
        "throughput_adjustment_interval_seconds": 30,
    }
    retune = {
        "advisory": True,
        "router": {},
        "planner": {"load_scaling_down_sensitivity": {"choices": [80, 95]}},
    }
    ctl, _ = make(retune, replay=by_sensitivity, planner=scaling)
    events = list(decisions(run_ticks(ctl, 130)).values())
    assert [e["outcome"] for e in events] == ["advisory", "advisory"]
    assert events[0]["changes"]["planner"] == {"load_scaling_down_sensitivity": 95}
    assert all(e["planner_changes"] == {} for e in events)
    assert ctl.live_config.load_scaling_down_sensitivity == 80


def test_an_applied_planner_change_is_handed_to_the_host_and_becomes_the_current_point():
    def by_sensitivity(spec, config):
        return summary(float(dict(config.planner)["load_scaling_down_sensitivity"]))

    scaling = {
        "optimization_target": "sla",
        "enable_throughput_scaling": True,
        "throughput_adjustment_interval_seconds": 30,
    }
    retune = {"router": {}, "planner": {"load_scaling_down_sensitivity": {"choices": [80, 95]}}}
    ctl, _ = make(retune, replay=by_sensitivity, planner=scaling)
    events = list(decisions(run_ticks(ctl, 130)).values())
    assert [e["outcome"] for e in events] == ["applied", "no_improvement"]
    assert events[0]["planner_changes"] == {"load_scaling_down_sensitivity": 95}
    assert events[0]["predictor_warmup"] is None  # the predictor did not change
    assert ctl.live_config.load_scaling_down_sensitivity == 95


def ramp_history(spec):
    """A steady ramp of request counts (constant lengths): eight history and two window buckets."""
    buckets = tuple((10.0 + 2.0 * i, 100.0, 20.0) for i in range(10))
    return WindowData(
        "unused",
        38,
        {},
        presweep_history=buckets[:8],
        presweep_window=buckets[8:],
        swap_warmup=buckets,
        inner_warmup=buckets[:8],
    )


def test_a_predictor_swap_with_enough_warmup_carries_its_warmup_observations():
    # A trend-following Kalman filter beats repeating the last value on a ramp.
    retune = {"planner": {"load_predictor": {"choices": ["constant", "kalman"]}}}
    ctl, _ = make(retune, planner=SWAP_PLANNER, read=ramp_history)
    event = decisions(run_ticks(ctl, 70))[70.0]
    presweep = event["predictor_presweep"]
    assert presweep["winner"] == 1 and presweep["losses"][1] < presweep["losses"][0]
    assert event["outcome"] == "applied"
    assert event["planner_changes"] == {"load_predictor": "kalman"}
    assert event["predictor_warmup"] == [[10.0 + 2.0 * i, 100.0, 20.0] for i in range(10)]
    assert ctl.live_config.load_predictor == "kalman"


class _Interrupt(Exception):
    pass


def test_close_after_an_interrupted_wait_for_the_sweep_waits_until_the_sweep_has_ended():
    """Ctrl-C while the planner waits for a sweep: ``close`` cancels it and waits for its
    thread to finish with the executor before closing it (a CPython 3.11 ``Thread.join`` cut
    short by a signal handler's exception marks the running thread as stopped, so a join-based
    close closed the pool under the sweep thread's feet)."""
    import signal
    import threading
    import time

    events: list[str] = []
    release = threading.Event()

    def blocking_read(spec):
        release.wait(10.0)  # the sweep runs until close() cancels it
        time.sleep(0.2)  # and is still busy for a while after that
        events.append("sweep ended")
        return WindowData("unused", 10, {})

    ctl, executor = make(read=blocking_read)
    executor.cancel = lambda: (events.append("cancelled"), release.set())
    executor.close = lambda: events.append("closed")
    previous = signal.signal(signal.SIGALRM, lambda *_: (_ for _ in ()).throw(_Interrupt()))
    signal.setitimer(signal.ITIMER_REAL, 0.2)
    try:
        with pytest.raises(_Interrupt):
            run_ticks(ctl, 70.0)  # window 0 launches at 65 s and waits for its sweep
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
    ctl.close()
    assert events == ["cancelled", "sweep ended", "closed"]
