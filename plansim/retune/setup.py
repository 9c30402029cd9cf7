"""``RetuneSetup``: a planner config's ``retune:`` block parsed and checked against a deployment
once, before any trace is read (seed: Retune, Engine Integration).

``retune_setup(planner_config, deployment, source=...)`` validates the block's fields
(``RetuneConfig``), the scoring SLA, the searched router knobs (knobs a tick can patch, their
values within bounds) and planner fields (searchable ones; a searched load predictor needs
``optimization_target: sla`` with throughput scaling), every load-predictor candidate, the grid
size against ``max_candidates``, and which grid points validate and fit the deployment (the
others are dropped with one warning; a searched planner value that fits no point is an error).
``ConfigError`` names ``source`` and the field (``retune.router.<knob>``, ...).

The setup holds what that derives (the grid, the predictor candidates, the startup point and
the startup router map); ``plansim.api.setup`` keeps it in the ``ReplaySetup``, and each replay's
``RetuneController`` is built from it without parsing or checking anything again.
"""

from __future__ import annotations

import itertools
import logging
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from plansim.errors import ConfigError, located
from plansim.planner_core.config import PREDICTOR_FIELDS
from plansim.retune import domains
from plansim.retune.config import RetuneConfig, RetuneSla, load_retune_config
from plansim.retune.domains import Knob, Point
from plansim.retune.presweep import build_forecaster
from plansim.roles import Mode
from plansim.sim import routing

log = logging.getLogger("plansim.retune")

# Planner fields that are not searchable: structure, files, reporting and retune itself.
UNSEARCHABLE_PLANNER_FIELDS = frozenset(
    {
        "mode",
        "retune",
        "advisory",
        "plugins",
        "scheduling",
        "profile_results_dir",
        "report_interval_hours",
        "report_output_dir",
        "load_predictor_warmup_trace",
        "optimization_target",
        "enable_throughput_scaling",
        "enable_load_scaling",
    }
)


@dataclass(frozen=True, slots=True)
class RetuneSetup:
    """The parsed and checked ``retune:`` block of ``planner_config`` for ``deployment``.

    ``config``: the block; ``sla``: the scoring SLA (``retune.sla``, else the planner's TTFT/ITL
    targets); ``scaling``: whether the planner inside the candidate replays scales (False in
    retune-only mode); ``capabilities``: the deployment's workers as the planner sees them;
    ``grid``: the grid points that validate and fit, in grid order; ``predictor_candidates``:
    the complete load-predictor field sets the pre-sweep compares (empty: none searched);
    ``startup_point``: the searched knobs' startup values; ``router_parameters``: the startup
    desired router map per worker type (every patchable knob of the deployment's policy)."""

    planner_config: Any
    deployment: Any
    config: RetuneConfig
    sla: RetuneSla
    scaling: bool
    capabilities: Any
    grid: tuple[Point, ...]
    predictor_candidates: tuple[dict[str, Any], ...]
    startup_point: Point
    router_parameters: Mapping[str, Mapping[str, Any]]


def retune_setup(planner_config: Any, deployment: Any, *, source: str | None = None) -> RetuneSetup:
    """Parse and check ``planner_config.retune`` for ``deployment``; see the module docstring."""
    if planner_config.retune is None:
        raise ConfigError("retune is not set", source=source, field="retune")
    cfg = load_retune_config(planner_config.retune, source=source, prefix="retune")
    with located(source):
        return _checked(planner_config, deployment, cfg)


def _checked(planner_config: Any, deployment: Any, cfg: RetuneConfig) -> RetuneSetup:
    from plansim.sim import worker_capabilities

    scaling = bool(planner_config.enable_load_scaling or planner_config.enable_throughput_scaling)
    if getattr(planner_config, "retune_only", False):
        scaling = False
    capabilities = worker_capabilities(deployment)
    sla = cfg.scoring_sla(planner_config.ttft_ms, planner_config.itl_ms)

    router_knobs = domains.expand_knobs(domains.ROUTER, cfg.router)
    _check_router_knobs(router_knobs)
    planner_knobs = domains.expand_knobs(
        domains.PLANNER, cfg.planner, integer_fields=_integer_fields(planner_config)
    )
    _check_planner_knobs(planner_knobs, planner_config, scaling)
    # The predictor is never a grid dimension: its fields are searched by the pre-sweep.
    grid_knobs = router_knobs + [k for k in planner_knobs if k.name not in PREDICTOR_FIELDS]
    predictor_knobs = [k for k in planner_knobs if k.name in PREDICTOR_FIELDS]
    predictor_candidates = _predictor_candidates(
        predictor_knobs, planner_config, bucket_interval_s(planner_config, scaling)
    )
    size = domains.grid_size(grid_knobs)
    if size > cfg.max_candidates:
        raise ConfigError(
            f"the candidate grid has {size} points, more than max_candidates "
            f"{cfg.max_candidates}; narrow the domains or raise max_candidates",
            field="retune.max_candidates",
        )
    grid = _valid_grid(domains.grid(grid_knobs), grid_knobs, planner_config, capabilities)

    router = deployment.router
    startup_router = {k.name: _startup_router_value(router, k.name) for k in router_knobs}
    startup_planner = {k.name: getattr(planner_config, k.name) for k in planner_knobs}
    patchable = {
        k.name: getattr(router, k.name)
        for k in routing.router_knobs(router.mode)
        if k.patchable and k.alias_of is None
    }
    return RetuneSetup(
        planner_config=planner_config,
        deployment=deployment,
        config=cfg,
        sla=sla,
        scaling=scaling,
        capabilities=capabilities,
        grid=tuple(grid),
        predictor_candidates=tuple(predictor_candidates),
        startup_point=Point.of(startup_router, startup_planner),
        router_parameters={pool: dict(patchable) for pool in _router_pools(deployment)},
    )


def bucket_interval_s(planner_config: Any, scaling: bool) -> float | None:
    """The planner's throughput interval, when the planner of the candidate replays scales on
    throughput (its window history is bucketed by it)."""
    if (
        scaling
        and planner_config.enable_throughput_scaling
        and planner_config.optimization_target == "sla"
    ):
        return float(planner_config.throughput_adjustment_interval_seconds)
    return None


def fit_problem(config: Any, capabilities: Any) -> str | None:
    """Why ``config`` does not fit the deployment's workers (None when it does): the planner's
    own check (mode, roles, minimum endpoints within the GPU budget)."""
    from plansim.planner_core import check_fits

    try:
        check_fits(config, capabilities)
    except ConfigError as exc:
        return str(exc)
    return None


def _check_router_knobs(knobs: list[Knob]) -> None:
    """Searched router knobs are knobs a tick can patch, of any routing policy (a knob the
    deployment's policy does not use changes nothing: its candidates share one replay)."""
    searchable = {k.name: k for k in routing.all_router_knobs().values() if k.patchable}
    for knob in knobs:
        declared = searchable.get(knob.name)
        if declared is None:
            raise ConfigError(
                "not a router parameter a tick can patch "
                f"(searchable: {', '.join(searchable) or 'none'})",
                field=knob.path,
            )
        for value in knob.values:
            declared.check(value, field=knob.path)


def _check_planner_knobs(knobs: list[Knob], planner_config: Any, scaling: bool) -> None:
    fields = type(planner_config).model_fields
    for knob in knobs:
        if knob.name not in fields or knob.name in UNSEARCHABLE_PLANNER_FIELDS:
            raise ConfigError("not a searchable planner field", field=knob.path)
    predictor = [k for k in knobs if k.name in PREDICTOR_FIELDS]
    if predictor and not (
        planner_config.optimization_target == "sla"
        and planner_config.enable_throughput_scaling
        and scaling
    ):
        raise ConfigError(
            "the load predictor is chosen by the pre-sweep, which needs "
            "optimization_target sla with throughput scaling",
            field=predictor[0].path,
        )


def _predictor_candidates(
    knobs: list[Knob], planner_config: Any, interval_s: float | None
) -> list[dict[str, Any]]:
    """The product of the predictor field domains, each candidate complete (the startup
    predictor fields with the searched ones replaced) and validated once: an invalid
    candidate fails the setup."""
    if not knobs:
        return []
    base = {k: getattr(planner_config, k) for k in PREDICTOR_FIELDS}
    out = []
    for combo in itertools.product(*(k.values for k in knobs)):
        fields = {**base, **{k.name: v for k, v in zip(knobs, combo)}}
        try:
            build_forecaster(fields, interval_s or 180.0)
        except ConfigError as exc:
            searched = {k.name: fields[k.name] for k in knobs}
            raise ConfigError(
                f"invalid load-predictor candidate {searched}: {exc.message}",
                field=f"retune.planner.{exc.field or 'load_predictor'}",
            ) from None
        out.append(fields)
    return out


def _valid_grid(
    points: list[Point], grid_knobs: list[Knob], planner_config: Any, capabilities: Any
) -> list[Point]:
    """Drop grid points whose planner fields fail validation or do not fit the deployment,
    with one warning; fail when a searched planner value fits no remaining point."""
    from plansim.planner_core.config import with_changes

    kept: list[Point] = []
    dropped: list[tuple[Point, str]] = []
    checked: dict[tuple, str | None] = {}
    for point in points:
        key = point.planner
        if not key:  # router knobs only: the startup config, which the engine accepted
            kept.append(point)
            continue
        if key not in checked:
            try:
                changed = with_changes(planner_config, point.planner_map)
                checked[key] = fit_problem(changed, capabilities)
            except ConfigError as exc:
                checked[key] = str(exc)
        if checked[key] is None:
            kept.append(point)
        else:
            dropped.append((point, checked[key]))  # type: ignore[arg-type]
    if dropped:
        example, error = dropped[0]
        log.warning(
            "retune: dropped %d of %d grid points that do not validate or fit the "
            "deployment; e.g. %s: %s",
            len(dropped),
            len(points),
            example.label(),
            error,
        )
    for knob in grid_knobs:
        if knob.group != domains.PLANNER:
            continue
        for value in knob.values:
            if not any((knob.name, value) in p.planner for p in kept):
                raise ConfigError(
                    f"value {value!r} fits no grid point after dropping invalid ones "
                    f"(e.g. {dropped[0][1] if dropped else 'no point'})",
                    field=knob.path,
                )
    return kept


def _startup_router_value(router: Any, name: str) -> Any:
    """A knob's startup value; a deprecated spelling (cleared when the deployment was built)
    starts at its target's value."""
    knob = routing.all_router_knobs().get(name)
    if knob is not None and knob.alias_of is not None and getattr(router, name) is None:
        return getattr(router, knob.alias_of)
    return getattr(router, name)


def _router_pools(deployment: Any) -> tuple[str, ...]:
    """Worker types whose router parameters the host patches: the planner roles of the
    deployment's pools (``decode`` stands for the one pool in agg mode, as in
    ``WorkerCounts``)."""
    return tuple(role.value for role in Mode(deployment.mode).planner_roles)


def _integer_fields(planner_config: Any) -> list[str]:
    out = []
    for name, info in type(planner_config).model_fields.items():
        args = typing.get_args(info.annotation) or (info.annotation,)
        if int in args and bool not in args:
            out.append(name)
    return out
