"""Worker pools under a planner: scale-up after startup_time, drain newest first, advisory mode,
router parameter patches, tick inputs and worker-seconds."""

from __future__ import annotations

import pytest
from simkit import workload

from plansim.planner_core.observations import PlannerEffects, ScalingDecision, ScheduledTick
from plansim.sim.deployment import build_deployment
from plansim.sim.host import ReplayHost


class FakePlanner:
    """Scales agg to ``up`` at t=0, ticks at 1 s, then scales to ``down`` and stops."""

    def __init__(self, up=3, down=1, advisory=False, router=None):
        self.advisory = advisory
        self.up, self.down, self.router = up, down, router or {}
        self.inputs = []

    def initial_tick(self, now_s):
        return PlannerEffects(
            scale_to=ScalingDecision(None, self.up),
            next_tick=ScheduledTick(at_s=1.0, need_traffic_metrics=True, need_worker_fpm=True),
            diagnostics={"why": "start", "est": {"ttft_ms": 5.0}},
        )

    def tick(self, tick_input):
        self.inputs.append(tick_input)
        return PlannerEffects(
            scale_to=ScalingDecision(None, self.down),
            next_tick=None,
            diagnostics={"why": "tick"},
            router_parameters=self.router,
        )


ROWS = [(0.0, 1000, 5, [1, 2]), (3000.0, 1000, 5, [3, 4])]


def _host(planner, rows=ROWS, **deployment):
    dep = build_deployment({"engine": {"startup_time": 0.5}, **deployment})
    host = ReplayHost(workload(rows), dep, planner)
    host.run()
    return host, host.result(wall_ms=0.0)


def test_new_workers_become_ready_after_startup_time_and_removed_ones_drain_newest_first():
    planner = FakePlanner()
    _, result = _host(planner)
    workers = result.workers.set_index("worker_id")
    assert workers.loc[1, "ready_at_ms"] == 500.0 and workers.loc[2, "ready_at_ms"] == 500.0
    # At the 1 s tick the two newest (idle) workers go at once; worker 0 stays.
    assert workers.loc[1, "removed_at_ms"] == 1000.0 and workers.loc[2, "removed_at_ms"] == 1000.0
    assert workers.loc[0, "removed_at_ms"] != workers.loc[0, "removed_at_ms"]  # NaN
    events = [
        (e["at_s"], e["component"], e["from_count"], e["to_count"], e["reason"])
        for e in result.scaling_events
    ]
    assert events == [(0.0, "agg", 1, 3, "scale_up"), (1.0, "agg", 3, 1, "scale_down")]
    # Worker-seconds: worker 0 for the whole replay, workers 1 and 2 for 1 s each.
    duration_s = result.summary["duration_ms"] / 1000
    assert result.summary["decode_worker_seconds"] == pytest.approx(duration_s + 2.0)


def test_tick_input_carries_counts_traffic_and_each_ready_workers_passes_since_start():
    planner = FakePlanner()
    _host(planner)
    (tick,) = planner.inputs
    assert tick.now_s == 1.0
    assert tick.worker_counts.ready_decode == 3
    assert not tick.worker_counts.decode_in_progress  # the new workers are ready by 1 s
    assert tick.traffic.num_req == 1.0 and tick.traffic.duration_s == 1.0
    assert tick.traffic.isl == 1000.0 and tick.traffic.osl == 5.0
    by_worker = {f.worker_id: f for f in tick.fpm["decode"]}
    assert sorted(by_worker) == [0, 1, 2]
    # Worker 0 served the one request: its prefill pass, then 4 decode passes over 1001..1004.
    served = by_worker[0]
    assert (served.mixed.passes, served.mixed.prefill_tokens) == (1, 1000)
    assert (served.decode_only.passes, served.decode_only.decode_kv_tokens) == (4, 4010)
    # The two new workers never ran a pass: idle heartbeats.
    assert all(by_worker[w].num_passes == 0 and by_worker[w].wall_time_s == 0 for w in (1, 2))


def test_advisory_planner_changes_nothing_and_records_recommendations():
    planner = FakePlanner(advisory=True, up=3, down=2)
    _, result = _host(planner)
    assert len(result.workers) == 1
    events = [(e["from_count"], e["to_count"], e["applied"]) for e in result.scaling_events]
    assert events == [(1, 3, False), (1, 2, False)]


def test_router_parameters_from_a_tick_are_applied():
    planner = FakePlanner(
        router={"decode": {"overlap_score_weight": 0.25, "router_queue_policy": "wspt"}}
    )
    host, _ = _host(planner, router={"mode": "kv_router"})
    router = host.routers["agg"]
    assert (router.prefill_load_scale, router.router_queue_policy) == (0.25, "wspt")
    assert router.queue.policy == "wspt"


def test_ticks_table_flattens_diagnostics():
    _, result = _host(FakePlanner())
    assert result.ticks["at_s"].tolist() == [0.0, 1.0]
    assert result.ticks["why"].tolist() == ["start", "tick"]
    assert result.ticks.loc[0, "est.ttft_ms"] == 5.0


def test_a_busy_worker_drains_before_it_is_removed():
    # Two workers; the second gets a long request; scaling to 1 at 1 s drains it.
    rows = [(0.0, 500, 5, [1]), (0.0, 500, 2000, [2]), (1500.0, 500, 5, [3])]
    planner = FakePlanner(up=2, down=1)
    _, result = _host(planner, rows=rows, num_workers=2)
    workers = result.workers.set_index("worker_id")
    long_done = result.requests.loc[1, "last_token_ms"]
    assert workers.loc[1, "removed_at_ms"] == pytest.approx(long_done)
    assert result.requests.loc[2, "decode_worker"] == 0


# Aggregated ranks behind round robin or random, which neither read the prefix caches nor act
# on first tokens, may take prompt and head runs; no other rank does.
RUN_ELIGIBLE = [
    ({"router": {"mode": "round_robin"}}, True),
    ({"router": {"mode": "random"}}, True),
    ({"router": {"mode": "kv_router"}}, False),
    ({"mode": "disagg", "router": {"mode": "round_robin"}}, False),
]


@pytest.mark.parametrize(("deployment", "expected"), RUN_ELIGIBLE)
def test_only_aggregated_ranks_whose_router_never_reads_prefix_caches_run_prompt_chunks(
    deployment, expected
):
    # A prompt run applies its KV changes when it ends, so a router that reads the caches
    # in between (kv_router) would see them late; prefill ranks hand prompts off and decode
    # ranks receive them computed.
    ranks = _ranks(ReplayHost(workload(ROWS), build_deployment(deployment)))
    assert ranks and all(r.prompt_runs is expected for r in ranks)


@pytest.mark.parametrize(("deployment", "expected"), RUN_ELIGIBLE)
def test_only_ranks_whose_router_ignores_first_tokens_run_a_pass_into_its_decode_run(
    deployment, expected
):
    # A head run reports its composed pass's tokens at the run's end: the KV router acts on
    # a request's first token (prefill_done, its queue), so its ranks take no head runs.
    ranks = _ranks(ReplayHost(workload(ROWS), build_deployment(deployment)))
    assert ranks and all(r.head_runs is expected for r in ranks)


def _ranks(host):
    return [r for pool in host.pools.values() for w in pool.workers for r in w.ranks]


def test_ranks_keep_pass_metrics_only_for_a_planner():
    alone = ReplayHost(workload(ROWS), build_deployment({}))
    assert all(r.passes is None for r in _ranks(alone))
    with pytest.raises(RuntimeError, match="pass window"):
        _ranks(alone)[0].take_fpm(0.0)
    planned = ReplayHost(workload(ROWS), build_deployment({}), FakePlanner(up=1, down=1))
    assert all(r.passes is not None for r in _ranks(planned))
