"""Pipeline merge rules and the plugin scheduler."""

from plansim.planner_core.observations import WorkerCounts
from plansim.planner_core.pipeline import (
    Observations,
    Override,
    OverrideType,
    PipelineContext,
    PluginScheduler,
    Stage,
    StageResult,
    merge_overrides,
    run_pipeline,
)


class Plugin:
    def __init__(
        self, plugin_id, stage, priority, overrides=(), predictions=None, final=False, interval=None
    ):
        self.plugin_id, self.stage, self.priority = plugin_id, stage, priority
        self.execution_interval_seconds = interval
        self.needs = frozenset()
        self.observation_window_seconds = None
        self._result = StageResult(
            predictions=predictions or {}, final=final, overrides=tuple(overrides)
        )
        self.seen_targets = None
        self.seen_predictions = None

    def run(self, ctx):
        self.seen_targets = dict(ctx.targets)
        self.seen_predictions = dict(ctx.predictions)
        return self._result


def _ctx(targets=None):
    obs = Observations(now_s=5.0, worker_counts=WorkerCounts(1, 2), traffic=None, fpm={})
    return PipelineContext(observations=obs, targets=targets or {"prefill": 1, "decode": 2})


def _set(c, v):
    return Override(c, OverrideType.SET, v)


def test_smallest_priority_set_wins():
    a = Plugin("a", Stage.PROPOSE, 20, [_set("decode", 5)])
    b = Plugin("b", Stage.PROPOSE, 10, [_set("decode", 3)])
    merged, _ = merge_overrides({"decode": 2}, [(a, a._result), (b, b._result)])
    assert merged == {"decode": 3}


def test_floors_take_max_and_ceilings_min():
    a = Plugin(
        "a",
        Stage.CONSTRAIN,
        0,
        [Override("decode", OverrideType.AT_LEAST, 4), Override("decode", OverrideType.AT_MOST, 9)],
    )
    b = Plugin(
        "b",
        Stage.CONSTRAIN,
        1,
        [Override("decode", OverrideType.AT_LEAST, 6), Override("decode", OverrideType.AT_MOST, 7)],
    )
    merged, reasons = merge_overrides({"decode": 2}, [(a, a._result), (b, b._result)])
    assert merged == {"decode": 6}
    assert reasons == {"decode": "reconcile_clamped_to_floor"}
    merged, reasons = merge_overrides({"decode": 12}, [(a, a._result), (b, b._result)])
    assert merged == {"decode": 7}
    assert reasons == {"decode": "reconcile_clamped_to_ceiling"}


def test_reject_short_circuits_later_stages():
    propose = Plugin("p", Stage.PROPOSE, 10, [_set("decode", 5)])
    reject = Plugin(
        "r", Stage.RECONCILE, 0, [Override("decode", OverrideType.REJECT, reason="frozen")]
    )
    later = Plugin("c", Stage.CONSTRAIN, 0, [Override("decode", OverrideType.AT_MOST, 1)])
    out = run_pipeline([propose, reject, later], _ctx())
    assert out.rejected == "frozen"
    assert later.seen_targets is None


def test_later_stage_sees_merged_targets():
    propose = Plugin("p", Stage.PROPOSE, 10, [_set("decode", 5)])
    cap = Plugin("c", Stage.CONSTRAIN, 0, [Override("decode", OverrideType.AT_MOST, 4)])
    out = run_pipeline([propose, cap], _ctx())
    assert cap.seen_targets == {"prefill": 1, "decode": 5}
    assert out.targets == {"prefill": 1, "decode": 4}
    assert out.touched == {"decode"}


def test_predict_chain_first_writer_wins_and_final_stops():
    first = Plugin("a", Stage.PREDICT, 0, predictions={"num_req": 10.0})
    second = Plugin("b", Stage.PREDICT, 5, predictions={"num_req": 99.0, "isl": 100.0}, final=True)
    third = Plugin("c", Stage.PREDICT, 9, predictions={"osl": 7.0})
    ctx = _ctx()
    run_pipeline([third, second, first], ctx)
    assert ctx.predictions == {"num_req": 10.0, "isl": 100.0}
    assert third.seen_predictions is None


def test_scheduler_fires_on_interval_from_registration():
    fast = Plugin("fast", Stage.PROPOSE, 0, interval=5.0)
    slow = Plugin("slow", Stage.PROPOSE, 1, interval=15.0)
    sched = PluginScheduler([fast, slow], start_s=0.0)
    fired = []
    for t in (5.0, 10.0, 15.0, 20.0, 25.0, 30.0):
        due = sched.due(t)
        fired.append((t, [p.plugin_id for p in due]))
        sched.mark_fired(due, t)
    assert fired == [
        (5.0, ["fast"]),
        (10.0, ["fast"]),
        (15.0, ["fast", "slow"]),
        (20.0, ["fast"]),
        (25.0, ["fast"]),
        (30.0, ["fast", "slow"]),
    ]
