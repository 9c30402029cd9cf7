"""The builtin plugins: the local planner's scaling loops expressed as pipeline plugins.

| plugin | stage | priority | fires every | needs |
|---|---|---|---|---|
| ``builtin_load_predict`` | PREDICT | 0 | throughput interval | traffic |
| ``builtin_throughput_propose`` | PROPOSE | 20 | throughput interval | traffic, predictions |
| ``builtin_load_propose`` | PROPOSE | 10 | load interval | fpm, workers (+ traffic, see below) |

On a tick where both loops fire, ``builtin_load_propose`` first refreshes the throughput lower
bound from the same-tick predictions (once per tick), then decides; with load scaling on, the
throughput proposer only sets floors. The load proposer also reads the traffic over the load
interval when the deployment has an ``sla`` and no throughput loop runs.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from plansim.planner_core.load_scaling import advance_load
from plansim.planner_core.observations import TrafficObservation
from plansim.planner_core.pipeline import (
    Override,
    OverrideType,
    PipelineContext,
    Stage,
    StageResult,
)
from plansim.planner_core.predictors import TrafficForecaster, make_predictor
from plansim.planner_core.reasons import ThroughputReason
from plansim.planner_core.scaling_policies.base import PolicyPlugins
from plansim.planner_core.state import PlannerScalingState
from plansim.planner_core.throughput_scaling import Predictions, advance_throughput


def _set_overrides(targets: dict[str, int] | None, reason: str) -> tuple[Override, ...]:
    if not targets:
        return ()
    return tuple(
        Override(role, OverrideType.SET, value, reason) for role, value in sorted(targets.items())
    )


class _EveryThroughputInterval:
    """A built-in plugin that runs, and looks back, once per throughput adjustment interval."""

    needs = frozenset({"traffic"})

    def __init__(self, state: PlannerScalingState) -> None:
        self.state = state

    @property
    def execution_interval_seconds(self) -> float:
        return self.state.config.throughput_adjustment_interval_seconds

    @property
    def observation_window_seconds(self) -> float:
        return self.state.config.throughput_adjustment_interval_seconds


class BuiltinLoadPredict(_EveryThroughputInterval):
    """Owns the request-count, ISL and OSL predictors; emits the same-tick predictions."""

    plugin_id = "builtin_load_predict"
    stage = Stage.PREDICT
    priority = 0

    def __init__(self, state: PlannerScalingState) -> None:
        super().__init__(state)
        self.forecaster = self.build_forecaster()

    def build_forecaster(self) -> TrafficForecaster:
        config = self.state.config
        params = config.predictor_params()
        return TrafficForecaster(lambda: make_predictor(config.load_predictor, **params))

    def warm(self, observations: Iterable[Any]) -> None:
        """Warm start from traffic windows (``TrafficObservation`` or ``(num_req, isl, osl)``)."""
        self.forecaster.warm(_as_window(o) for o in observations)

    def replace_predictor(self, warmup: Iterable[Any] | None) -> None:
        self.forecaster = self.build_forecaster()
        if warmup is not None:
            self.warm(warmup)

    def run(self, ctx: PipelineContext) -> StageResult:
        traffic = ctx.observations.traffic
        diag = self.state.diag
        if traffic is None or traffic.duration_s <= 0:
            diag.throughput_decision_reason = ThroughputReason.NO_TRAFFIC_DATA
            return StageResult()
        self.forecaster.observe(traffic.num_req, traffic.isl, traffic.osl)
        forecast = self.forecaster.predict()
        if forecast.failed:
            diag.throughput_decision_reason = ThroughputReason.PREDICT_FAILED
            return StageResult()
        predictions = {
            "num_req": forecast.num_req,
            "isl": forecast.isl,
            "osl": forecast.osl,
            "kv_hit_rate": self.state.last_kv_hit_rate,
            "accept_length": self.state.accept_length(),
            "duration_s": traffic.duration_s,
        }
        diag.predicted_num_req = forecast.num_req
        diag.predicted_rps = forecast.num_req / traffic.duration_s
        diag.predicted_isl = forecast.isl
        diag.predicted_osl = forecast.osl
        diag.predicted_kv_hit_rate = self.state.last_kv_hit_rate
        diag.predicted_accept_length = predictions["accept_length"]
        return StageResult(predictions=predictions)


class BuiltinThroughputPropose(_EveryThroughputInterval):
    """Predicted demand -> replica counts (or, with load scaling on, the lower bounds)."""

    plugin_id = "builtin_throughput_propose"
    stage = Stage.PROPOSE
    priority = 20

    def __init__(self, state: PlannerScalingState) -> None:
        super().__init__(state)
        self._refreshed_at: float | None = None
        self._last_targets: dict[str, int] | None = None

    def refresh(self, ctx: PipelineContext) -> dict[str, int] | None:
        """Run the throughput step once per tick (the load proposer may call it first)."""
        now = ctx.observations.now_s
        if self._refreshed_at != now:
            self._refreshed_at = now
            self._last_targets = None
            if {"num_req", "isl", "osl"} <= ctx.predictions.keys():
                predictions = Predictions(
                    num_req=ctx.predictions["num_req"],
                    isl=ctx.predictions["isl"],
                    osl=ctx.predictions["osl"],
                    kv_hit_rate=ctx.predictions.get("kv_hit_rate"),
                    accept_length=ctx.predictions.get("accept_length"),
                )
                self._last_targets = advance_throughput(
                    self.state, predictions, ctx.predictions.get("duration_s") or 0.0
                )
            elif not self.state.config.enable_throughput_scaling:
                self.state.diag.throughput_decision_reason = ThroughputReason.DISABLED
        return self._last_targets

    def run(self, ctx: PipelineContext) -> StageResult:
        targets = self.refresh(ctx)
        if self.state.config.enable_load_scaling:
            return StageResult()
        return StageResult(overrides=_set_overrides(targets, ThroughputReason.SCALE))


class BuiltinLoadPropose:
    """The +/-1 load loop above the throughput floor."""

    plugin_id = "builtin_load_propose"
    stage = Stage.PROPOSE
    priority = 10

    def __init__(self, state: PlannerScalingState, throughput: BuiltinThroughputPropose) -> None:
        self.state = state
        self.throughput = throughput

    @property
    def execution_interval_seconds(self) -> float:
        return self.state.config.load_adjustment_interval_seconds

    @property
    def needs(self) -> frozenset[str]:
        config = self.state.config
        if config.optimization_target == "sla" and not config.enable_throughput_scaling:
            return frozenset({"fpm", "workers", "traffic"})
        return frozenset({"fpm", "workers"})

    @property
    def observation_window_seconds(self) -> float:
        return self.state.config.load_adjustment_interval_seconds

    def run(self, ctx: PipelineContext) -> StageResult:
        if self.state.config.enable_throughput_scaling and ctx.run_throughput_scaling:
            self.throughput.refresh(ctx)
        targets = advance_load(self.state, ctx.observations.fpm)
        return StageResult(
            overrides=_set_overrides(targets, self.state.diag.load_decision_reason or "")
        )


def dynamo_plugins(state: PlannerScalingState, params: Any, sla: Any) -> PolicyPlugins:
    """``scaling_policy: dynamo``'s loops (``scaling_policies.dynamo``): the throughput loop
    and the load loop above its floor."""
    throughput = BuiltinThroughputPropose(state)
    return PolicyPlugins(throughput=throughput, load=BuiltinLoadPropose(state, throughput))


def _as_window(obs: Any) -> tuple[float, float | None, float | None]:
    if isinstance(obs, TrafficObservation):
        return obs.num_req, obs.isl, obs.osl
    num_req, isl, osl = obs
    return num_req, isl, osl
