"""``prepare``: a validated capacity run (``Plan``), everything checked that does not need the
trace: the target, the SLA, the budget, the segment length, the search dimensions and their
variants, the planner policies."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plansim.capacity import objective as objectives
from plansim.capacity import planner_search
from plansim.capacity import policies as planner_policies
from plansim.capacity.policies import Policy
from plansim.capacity.segments import DEFAULT_LEAD_IN_S, DEFAULT_SEGMENT_S
from plansim.capacity.variants import SearchDimension, Variant, build_variants, parse_search
from plansim.errors import InputError
from plansim.sim.deployment import Deployment

DEFAULT_MAX_GPU_BUDGET = 64
DEFAULT_BOUND_ROUNDS = 16
# Where planner policy replays start: the deployment file's worker counts (what a user switches
# from), or the cheapest static deployment the search finds (the planner turned on over it).
PLANNER_STARTS = ("deployment", "static")


@dataclass(frozen=True, slots=True)
class Plan:
    """A validated capacity run, ready to replay a workload."""

    deployment: Deployment
    target: float
    dimensions: tuple[SearchDimension, ...]
    variants: tuple[Variant, ...]
    policies: tuple[Policy, ...]
    max_gpu_budget: int
    segment_s: float
    lead_in_s: float
    seeds: int
    objective: objectives.Objective
    max_bound_rounds: int
    notes: tuple[str, ...] = ()
    # The planner knob search (``planner_search``): the knobs given with --search planner.KEY,
    # and whether the --tune-planner preset joins them; off when neither.
    knobs: tuple[planner_search.Knob, ...] = ()
    tune_planner: bool = False
    timing: Any = None  # a calibration's timing draws (plansim.calibrate.TimingDraws) or None
    planner_start: str = "deployment"  # one of PLANNER_STARTS

    @property
    def tunes_planner(self) -> bool:
        return self.tune_planner or bool(self.knobs)


def prepare(
    deployment: Deployment,
    target: float = 0.95,
    *,
    search: Sequence[SearchDimension | str] | Mapping[str, Sequence[Any]] = (),
    planner_configs: Sequence[str | Path | Policy] = (),
    default_policies: bool = True,
    max_gpu_budget: int = DEFAULT_MAX_GPU_BUDGET,
    segment_s: float = DEFAULT_SEGMENT_S,
    lead_in_s: float = DEFAULT_LEAD_IN_S,
    seeds: int = 1,
    objective: objectives.Objective | None = None,
    max_bound_rounds: int = DEFAULT_BOUND_ROUNDS,
    tune_planner: bool = False,
    timing: Any = None,
    planner_start: str = "deployment",
) -> Plan:
    """Validate a capacity run; ``InputError`` names the option at fault. ``timing``: the
    timing draws of a calibration (``plansim.calibrate.load_timing_draws``), replayed at the
    chosen points so that their intervals include the timing's uncertainty. ``planner_start``:
    where the planner policies start, one of ``PLANNER_STARTS``."""
    if not (isinstance(target, (int, float)) and 0 < target <= 1):
        raise InputError(f"must be in (0, 1], got {target}", field="--target")
    if not deployment.sla.is_set:
        raise InputError(
            "plansim capacity scores goodput and needs an SLA: set sla.ttft_ms, "
            "sla.tpot_ms or sla.e2e_ms in the deployment, or --sla-ttft-ms, "
            "--sla-tpot-ms, --sla-e2e-ms",
            field="--sla-ttft-ms",
        )
    if max_gpu_budget < 1:
        raise InputError(f"must be at least 1, got {max_gpu_budget}", field="--max-gpu-budget")
    if not segment_s > 0:
        raise InputError(f"must be > 0, got {segment_s}", field="--segment-s")
    if not lead_in_s >= 0:
        raise InputError(f"must be >= 0, got {lead_in_s}", field="lead_in_s")
    if seeds < 1:
        raise InputError(f"must be at least 1, got {seeds}", field="--seeds")
    if planner_start not in PLANNER_STARTS:
        raise InputError(
            f"must be one of {', '.join(PLANNER_STARTS)}, got {planner_start!r}",
            field="--planner-start",
        )
    dims = _dimensions(search)
    knobs = [
        planner_search.parse_knob(d.key.split(".", 1)[1], d.values)
        for d in dims
        if d.key.startswith("planner.")
    ]
    dims = [d for d in dims if not d.key.startswith("planner.")]
    planner_search.check_knobs(knobs)
    if knobs or tune_planner:
        base = planner_search.tune_base(planner_policies.default_base(deployment, max_gpu_budget))
        planner_search.check_values(base, knobs, deployment.sla.model_dump())
    notes: list[str] = []
    if timing is not None:
        notes += _check_timing(deployment, dims, timing)
    variants = build_variants(deployment, dims, max_gpu_budget=max_gpu_budget)
    if isinstance(objective, objectives.GpuCost):
        for variant in variants:
            objective.check(variant.label, variant.layout)
    policies, policy_notes = (
        planner_policies.default_policies(deployment, max_gpu_budget)
        if default_policies
        else ([], [])
    )
    notes += policy_notes
    policies += [p for p in planner_configs if isinstance(p, Policy)]
    paths = [p for p in planner_configs if not isinstance(p, Policy)]
    policies += planner_policies.file_policies(paths, deployment, taken=[p.name for p in policies])
    return Plan(
        deployment,
        float(target),
        tuple(dims),
        tuple(variants),
        tuple(policies),
        max_gpu_budget,
        float(segment_s),
        float(lead_in_s),
        int(seeds),
        objective or objectives.GpuHours(),
        max_bound_rounds,
        tuple(notes),
        tuple(knobs),
        bool(tune_planner),
        timing,
        planner_start,
    )


def _check_timing(
    deployment: Deployment, dims: Sequence[SearchDimension], timing: Any
) -> list[str]:
    """Refuse a search over a key the calibration's draws set, check every draw against the
    deployment; a note when the deployment's timing is not the calibration's fit."""
    from plansim.errors import located
    from plansim.sim.deployment import with_overrides

    for d in dims:
        for key in timing.keys:
            if d.key == key or d.key.startswith(key + ".") or key.startswith(d.key + "."):
                raise InputError(
                    f"{d.key}: set by the calibration ({timing.source}), so it "
                    "cannot be searched with --calibration",
                    field="--search",
                )
    with located(timing.source):
        for draw in timing.draws:
            with_overrides(deployment, draw)
        fitted = with_overrides(deployment, timing.keys)
    if fitted.model_dump() != deployment.model_dump():
        return [
            f"the deployment's timing is not the fit of {timing.source} (its "
            f"calibrated_deployment.yaml): the search uses the deployment's, the intervals "
            "the calibration's draws"
        ]
    return []


def _dimensions(search: Any) -> list[SearchDimension]:
    if isinstance(search, Mapping):
        return [SearchDimension(str(k), tuple(v)) for k, v in search.items()]
    return [d if isinstance(d, SearchDimension) else parse_search(d) for d in search]
