"""``prepare``: a validated fleet run (``FleetPlan``), everything checked that needs no trace.

Per model: its deployment (with an SLA: goodput needs one), its search space as capacity
variants (``plansim.capacity.variants``), each variant's GPU systems (every pool needs an aic
timing model, whose ``system`` names the GPU it runs on and so its price), the GPUs its search
may use (the inventory's count of its systems, at most the model's ``max_gpu_budget``) and its
planner block (without ``retune``). A combination of the search that is not a valid deployment
(a TP the model's heads do not divide, weights that do not fit the GPU) or whose one worker per
pool does not fit the GPUs its systems have is left out with a note; a model left without any
is an error, as are a GPU system the inventory does not hold and an unknown one.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any

from plansim.capacity.variants import SearchDimension, Variant, build_variants
from plansim.errors import ConfigError, InputError
from plansim.fleet.config import FleetSpec, ModelSpec
from plansim.roles import Mode
from plansim.sim.deployment import Deployment, load_deployment

ON_DEMAND, SPOT = "on_demand", "spot"
# The largest search budget build_variants is asked to check (each variant gets its own).
_UNBOUNDED = 1 << 30


@dataclass(frozen=True, slots=True)
class Tier:
    """One way of holding GPUs of a system: its price per GPU-hour and, for spot capacity, how
    often per hour a GPU of it is preempted."""

    system: str
    name: str
    price_per_gpu_hour: float
    preemptions_per_gpu_hour: float = 0.0


@dataclass(frozen=True, slots=True)
class Inventory:
    """What the fleet may hold: GPUs per system (``counts``), the tiers of each system (on
    demand first) and the budget per hour (None: none)."""

    counts: dict[str, int]
    tiers: dict[str, tuple[Tier, ...]]
    budget_per_hour: float | None

    def on_demand(self, system: str) -> Tier:
        return self.tiers[system][0]

    def spot(self, system: str) -> Tier | None:
        tiers = self.tiers[system]
        return tiers[1] if len(tiers) > 1 else None


@dataclass(frozen=True, slots=True)
class ModelPlan:
    """One model, validated. ``budgets[i]``: the most GPUs variant ``i``'s search may use."""

    index: int
    name: str
    target: float
    traces: tuple[str, ...]
    format: str
    trace_block_size: int | None
    deployment: Deployment
    dimensions: tuple[SearchDimension, ...]
    variants: tuple[Variant, ...]
    budgets: tuple[int, ...]
    planner: dict[str, Any] | None
    source: str

    def systems(self, variant: Variant) -> tuple[str, ...]:
        """The variant's GPU system per pool (every pool has one: ``prepare`` checks it)."""
        return tuple(s for s in variant.layout.gpu_systems if s is not None)


@dataclass(frozen=True, slots=True)
class FleetPlan:
    """A validated fleet run."""

    inventory: Inventory
    models: tuple[ModelPlan, ...]
    seed: int
    source: str
    notes: tuple[str, ...] = ()


def inventory_of(spec: FleetSpec) -> Inventory:
    tiers = {}
    for system, entry in spec.inventory.items():
        own = [Tier(system, ON_DEMAND, entry.price_per_gpu_hour)]
        if entry.spot is not None:
            own.append(
                Tier(system, SPOT, entry.spot.price_per_gpu_hour, entry.spot.preemptions_per_hour)
            )
        tiers[system] = tuple(own)
    return Inventory({s: e.count for s, e in spec.inventory.items()}, tiers, spec.budget_per_hour)


def prepare(spec: FleetSpec, *, source: str = "") -> FleetPlan:
    """Validate ``spec`` (read from ``source``); ``InputError`` names the model and the key."""
    inventory = inventory_of(spec)
    notes: list[str] = []
    models = tuple(_model(k, m, inventory, source, notes) for k, m in enumerate(spec.models))
    return FleetPlan(inventory, models, spec.seed, source, tuple(notes))


def _model(
    k: int, spec: ModelSpec, inventory: Inventory, source: str, notes: list[str]
) -> ModelPlan:
    where = f"models.{k}"
    deployment = load_deployment(spec.deployment)
    if not deployment.sla.is_set:
        raise ConfigError(
            f"{spec.name}: the fleet scores goodput and needs an SLA: set "
            f"sla.ttft_ms, sla.tpot_ms or sla.e2e_ms in {spec.deployment}",
            source=source,
            field=f"{where}.deployment",
        )
    for key, values in spec.search.items():
        if key.endswith(".timing_model.system"):
            for value in values:
                _check_held(inventory, value, spec.name, source, f"{where}.search.{key}")
    planner = _planner_block(deployment, spec, source, where)
    dims = tuple(SearchDimension(key, tuple(values)) for key, values in spec.search.items())
    variants, budgets, dropped = _variants(deployment, dims, spec, inventory, source, where)
    if not variants:
        raise ConfigError(
            f"{spec.name}: no point of its search space is feasible: " + "; ".join(dropped),
            source=source,
            field=where,
        )
    notes += [f"{spec.name}: {reason} (left out of the search)" for reason in dropped]
    return ModelPlan(
        k,
        spec.name,
        spec.target,
        tuple(spec.trace),
        spec.format,
        spec.trace_block_size,
        deployment,
        dims,
        variants,
        budgets,
        planner,
        spec.deployment,
    )


def _check_held(inventory: Inventory, system: Any, model: str, source: str, field: str) -> None:
    if inventory.counts.get(system, 0) < 1:
        held = ", ".join(f"{s} ({n})" for s, n in inventory.counts.items())
        raise ConfigError(
            f"{model} needs {system} GPUs, which the inventory does not hold (it holds {held})",
            source=source,
            field=field,
        )


def _variants(
    base: Deployment,
    dims: tuple[SearchDimension, ...],
    spec: ModelSpec,
    inventory: Inventory,
    source: str,
    where: str,
) -> tuple[tuple[Variant, ...], tuple[int, ...], list[str]]:
    """Each combination of ``dims`` as a capacity variant with its search budget, and why the
    combinations left out were (invalid, or one worker per pool does not fit)."""
    variants: list[Variant] = []
    budgets: list[int] = []
    dropped: list[str] = []
    seen: set[str] = set()
    for values in itertools.product(*(d.values for d in dims)):
        combo = [SearchDimension(d.key, (v,)) for d, v in zip(dims, values)]
        label = ", ".join(f"{d.key}={v}" for d, v in zip(dims, values)) or "the deployment"
        try:
            (variant,) = build_variants(base, combo, max_gpu_budget=_UNBOUNDED)
        except InputError as exc:
            if (
                exc.message.endswith(("not a deployment key", "searched twice"))
                or "not a search dimension" in exc.message
                or "accepted for compatibility" in exc.message
            ):
                raise ConfigError(exc.message, source=source, field=f"{where}.search") from None
            dropped.append(f"{label}: {exc.message.removeprefix(label + ': ')}")
            continue
        dump = variant.deployment.model_dump_json()
        if dump in seen:
            continue
        seen.add(dump)
        layout = variant.layout
        for pool, system in zip(layout.names, layout.gpu_systems):
            if system is None:
                raise ConfigError(
                    f"{spec.name}: the {pool} pool ({label}) has no aic timing model, so its "
                    "GPU system (and price) is unknown: set engine.timing_model.type aic",
                    source=source,
                    field=f"{where}.deployment",
                )
            _check_held(inventory, system, spec.name, source, f"{where}.deployment")
        budget = sum(inventory.counts[s] for s in dict.fromkeys(layout.gpu_systems))
        if spec.max_gpu_budget is not None:
            budget = min(budget, spec.max_gpu_budget)
        if min(layout.max_counts(budget)) < 1:
            need = " + ".join(map(str, layout.gpus_per_worker))
            dropped.append(
                f"{label}: one worker per pool needs {need} GPUs, more than the "
                f"{budget} its search may use"
            )
            continue
        variants.append(variant)
        budgets.append(budget)
    return tuple(variants), tuple(budgets), dropped


def _planner_block(
    deployment: Deployment, spec: ModelSpec, source: str, where: str
) -> dict[str, Any] | None:
    """The deployment's planner block, checked now (an autoscaled fleet replays it)."""
    if deployment.planner is None:
        return None
    from plansim.planner_core import parse_planner_config

    raw = dict(deployment.planner)
    config = parse_planner_config(raw, source=spec.deployment)
    if config.retune is not None:
        raise ConfigError(
            f"{spec.name}: a fleet replays planners without retune; remove the "
            "planner's retune block",
            source=source,
            field=f"{where}.deployment",
        )
    return raw


# The planner modes that fit a deployment's mode (a disaggregated one may scale one pool).
_PLANNER_MODES = {Mode.AGG: ("agg",), Mode.DISAGG: ("disagg", "prefill", "decode")}


def planner_for(plan: ModelPlan, mode: Mode) -> tuple[dict[str, Any] | None, str | None]:
    """The model's planner block for a deployment in ``mode``, and a note when its ``mode``
    (default ``disagg``) did not fit and was set to ``mode``."""
    if plan.planner is None:
        return None, None
    raw = dict(plan.planner)
    given = raw.get("mode", "disagg")
    if given in _PLANNER_MODES[mode]:
        return raw, None
    raw["mode"] = mode.value
    return raw, (
        f"{plan.name}: its planner block's mode {given} does not fit the recommended "
        f"{mode.value} deployment; the planner ran with mode {mode.value}"
    )
