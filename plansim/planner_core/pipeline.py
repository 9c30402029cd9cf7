"""The plugin pipeline: stages, the plugin interface, scheduling and the merge rules.

A plugin is any object with these attributes and one method (builtin and user plugins alike)::

    plugin_id: str
    stage: Stage                              # PREDICT, PROPOSE, RECONCILE or CONSTRAIN
    priority: int                             # smaller runs first / wins SET conflicts
    execution_interval_seconds: float | None  # None: every tick
    needs: frozenset[str]                     # subset of {"traffic", "fpm", "workers"}
    observation_window_seconds: float | None  # traffic window it wants, if it needs traffic
    def run(self, ctx: PipelineContext) -> StageResult | None

PREDICT plugins run in ascending priority as a chain: the first writer of a prediction field
wins, ``final=True`` ends the chain. PROPOSE, RECONCILE and CONSTRAIN plugins each see the
targets merged so far and return overrides; per stage and component, the SET with the smallest
priority wins, AT_LEAST floors combine by max, AT_MOST ceilings by min (floors, then ceilings),
and any REJECT short-circuits the tick (no scaling).
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import IntEnum, StrEnum
from typing import Any, Protocol, runtime_checkable

from plansim.errors import ConfigError
from plansim.planner_core.observations import ForwardPassMetrics, TrafficObservation, WorkerCounts

TIME_TOLERANCE_S = 1e-9


class Stage(IntEnum):
    PREDICT = 0
    PROPOSE = 1
    RECONCILE = 2
    CONSTRAIN = 3


class OverrideType(StrEnum):
    SET = "SET"
    AT_LEAST = "AT_LEAST"
    AT_MOST = "AT_MOST"
    REJECT = "REJECT"


@dataclass(frozen=True, slots=True)
class Override:
    """One plugin's opinion on one component (``prefill``/``decode``; agg pools are ``decode``).
    ``value`` is a replica count (ignored for REJECT)."""

    component: str
    type: OverrideType
    value: int = -1
    reason: str = ""


@dataclass(frozen=True, slots=True)
class StageResult:
    predictions: dict[str, float | None] = field(default_factory=dict)
    final: bool = False
    overrides: tuple[Override, ...] = ()


@dataclass(frozen=True, slots=True)
class Observations:
    now_s: float
    worker_counts: WorkerCounts
    traffic: TrafficObservation | None
    fpm: dict[str, tuple[ForwardPassMetrics, ...]]


@dataclass(slots=True)
class PipelineContext:
    """Per-tick data plane. ``targets`` holds the merged targets so far (the baseline, then each
    stage's result); ``predictions`` the PREDICT chain's output."""

    observations: Observations
    targets: dict[str, int]
    predictions: dict[str, float | None] = field(default_factory=dict)
    run_load_scaling: bool = False
    run_throughput_scaling: bool = False


@runtime_checkable
class PlannerPlugin(Protocol):
    plugin_id: str
    stage: Stage
    priority: int
    execution_interval_seconds: float | None
    needs: frozenset[str]
    observation_window_seconds: float | None

    def run(self, ctx: PipelineContext) -> StageResult | None: ...


class PluginScheduler:
    """Fires each plugin when its interval has elapsed since it last fired (registration counts
    as a firing, so a plugin first fires one interval after start)."""

    def __init__(self, plugins: Sequence[PlannerPlugin], start_s: float) -> None:
        self.plugins = sorted(plugins, key=lambda p: (int(p.stage), p.priority))
        self._last: dict[str, float] = {p.plugin_id: start_s for p in self.plugins}

    def due(self, now_s: float) -> list[PlannerPlugin]:
        out = []
        for plugin in self.plugins:
            interval = plugin.execution_interval_seconds
            if (
                interval is None
                or now_s - self._last[plugin.plugin_id] >= interval - TIME_TOLERANCE_S
            ):
                out.append(plugin)
        return out

    def mark_fired(self, plugins: Sequence[PlannerPlugin], now_s: float) -> None:
        for plugin in plugins:
            self._last[plugin.plugin_id] = now_s

    def carry_over(self, previous: PluginScheduler) -> None:
        """Keep the last firing times of plugins both schedulers know (a config change)."""
        for plugin_id, at_s in previous._last.items():
            if plugin_id in self._last:
                self._last[plugin_id] = at_s


@dataclass(slots=True)
class PipelineOutcome:
    targets: dict[str, int]
    touched: set[str]
    rejected: str | None
    overrides: list[tuple[str, str, str, str, int]]
    reconcile_reasons: dict[str, str]


def run_pipeline(plugins: Sequence[PlannerPlugin], ctx: PipelineContext) -> PipelineOutcome:
    """Run the due ``plugins`` over ``ctx`` (PREDICT chain, then the merged stages)."""
    outcome = PipelineOutcome(dict(ctx.targets), set(), None, [], {})
    predictors = sorted((p for p in plugins if p.stage == Stage.PREDICT), key=lambda p: p.priority)
    for plugin in predictors:
        result = plugin.run(ctx) or StageResult()
        for key, value in result.predictions.items():
            ctx.predictions.setdefault(key, value)
        if result.final:
            break
    for stage in (Stage.PROPOSE, Stage.RECONCILE, Stage.CONSTRAIN):
        stage_plugins = [p for p in plugins if p.stage == stage]
        if not stage_plugins:
            continue
        results = [(p, p.run(ctx) or StageResult()) for p in stage_plugins]
        for plugin, result in results:
            for o in result.overrides:
                outcome.overrides.append(
                    (plugin.plugin_id, stage.name, str(o.type), o.component, o.value)
                )
                if o.type == OverrideType.REJECT and outcome.rejected is None:
                    outcome.rejected = o.reason or f"rejected by {plugin.plugin_id}"
        if outcome.rejected is not None:
            return outcome
        merged, reasons = merge_overrides(ctx.targets, results)
        outcome.touched |= {o.component for _, r in results for o in r.overrides}
        outcome.reconcile_reasons.update(reasons)
        ctx.targets = merged
    outcome.targets = dict(ctx.targets)
    return outcome


def merge_overrides(
    targets: dict[str, int], results: Sequence[tuple[PlannerPlugin, StageResult]]
) -> tuple[dict[str, int], dict[str, str]]:
    """Merge one stage: smallest-priority SET wins (earlier registration on ties), then the max
    of AT_LEAST floors, then the min of AT_MOST ceilings."""
    merged = dict(targets)
    reasons: dict[str, str] = {}
    components = {o.component for _, r in results for o in r.overrides}
    for component in sorted(components):
        sets = [
            (p.priority, i, o.value)
            for i, (p, r) in enumerate(results)
            for o in r.overrides
            if o.component == component and o.type == OverrideType.SET
        ]
        floors = [
            o.value
            for _, r in results
            for o in r.overrides
            if o.component == component and o.type == OverrideType.AT_LEAST
        ]
        ceilings = [
            o.value
            for _, r in results
            for o in r.overrides
            if o.component == component and o.type == OverrideType.AT_MOST
        ]
        value = min(sets)[2] if sets else merged.get(component, 0)
        if floors and value < max(floors):
            value = max(floors)
            reasons[component] = "reconcile_clamped_to_floor"
        if ceilings and value > min(ceilings):
            value = min(ceilings)
            reasons[component] = "reconcile_clamped_to_ceiling"
        merged[component] = value
    return merged, reasons


def load_plugin(import_path: str, params: dict[str, Any]) -> PlannerPlugin:
    """Import ``package.module:attr``; a class is instantiated with ``params``."""
    module_name, _, attr = import_path.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot import plugin {import_path!r}: {exc}", field="plugins") from None
    if isinstance(obj, type):
        try:
            obj = obj(**params)
        except TypeError as exc:
            raise ConfigError(f"plugin {import_path!r}: {exc}", field="plugins") from None
    return normalise_plugin(obj, import_path)


def normalise_plugin(obj: Any, import_path: str) -> PlannerPlugin:
    """Check a plugin object's interface; fill optional attributes; accept stage names."""
    missing = [a for a in ("plugin_id", "stage", "priority", "run") if not hasattr(obj, a)]
    if missing:
        raise ConfigError(f"plugin {import_path!r} lacks {', '.join(missing)}", field="plugins")
    for attr_name, default in (
        ("execution_interval_seconds", None),
        ("needs", frozenset()),
        ("observation_window_seconds", None),
    ):
        if not hasattr(obj, attr_name):
            try:
                setattr(obj, attr_name, default)
            except AttributeError:
                raise ConfigError(
                    f"plugin {import_path!r} lacks {attr_name}", field="plugins"
                ) from None
    try:
        obj.stage = Stage(obj.stage) if not isinstance(obj.stage, str) else Stage[obj.stage.upper()]
    except (KeyError, ValueError):
        raise ConfigError(
            f"plugin {import_path!r}: unknown stage {obj.stage!r}", field="plugins"
        ) from None
    return obj
