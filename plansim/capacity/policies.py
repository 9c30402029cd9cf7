"""The planner policies a capacity run replays beside the static search and the bound.

By default, the planner's own policies: one planner config per registered scaling policy
(``planner_core.scaling_policies.SCALING_POLICIES``, in its order), built from the deployment's
``planner:`` block when it has one, else from defaults sized for the run (both scaling loops, the
SLA's TTFT and ITL as the planner's targets, a Kalman load predictor, the run's GPU budget). Each
``--planner-config`` adds one more, named after its file. A policy replay starts from the
deployment file's worker counts (the deployment a user would switch from), fitted into the run's
GPU budget, on the recommended variant, and pays every scale-up's start-up time.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plansim.errors import ConfigError
from plansim.planner_core import parse_planner_config
from plansim.planner_core.config import DEFAULT_ITL_MS, DEFAULT_TTFT_MS, PlannerConfig
from plansim.planner_core.scaling_policies import SCALING_POLICIES
from plansim.sim.deployment import Deployment

_MODES = {"agg": ("agg",), "disagg": ("disagg", "prefill", "decode")}


@dataclass(frozen=True, slots=True)
class Policy:
    """A planner config to replay, its name in tables and where it came from."""

    name: str
    config: PlannerConfig
    source: str


def default_base(deployment: Deployment, max_gpu_budget: int) -> dict[str, Any]:
    """The planner mapping default policies start from."""
    if deployment.planner is not None:
        return dict(deployment.planner)
    sla = deployment.sla
    return {
        "mode": deployment.mode,
        "optimization_target": "sla",
        "enable_throughput_scaling": True,
        "enable_load_scaling": True,
        "throughput_adjustment_interval_seconds": 60,
        "load_adjustment_interval_seconds": 5,
        "ttft_ms": sla.ttft_ms or DEFAULT_TTFT_MS,
        "itl_ms": sla.tpot_ms or DEFAULT_ITL_MS,
        "load_predictor": "kalman",
        "max_gpu_budget": max_gpu_budget,
        "report_interval_hours": None,
    }


def default_policies(deployment: Deployment, max_gpu_budget: int) -> tuple[list[Policy], list[str]]:
    """One policy per registered scaling policy on the same base config, and a note for each
    policy the deployment's planner block cannot run (its config rules refuse the block)."""
    names = SCALING_POLICIES.names()
    raw = default_base(deployment, max_gpu_budget)
    if deployment.planner is None:
        return [
            Policy(
                name, _checked({**raw, "scaling_policy": name}, deployment, "default"), "default"
            )
            for name in names
        ], []
    source = "deployment planner block"
    own = raw.get("scaling_policy", PlannerConfig.model_fields["scaling_policy"].default)
    policies = [Policy(own, _checked(raw, deployment, source), source)]
    notes = []
    for name in names:
        if name == own:
            continue
        try:
            config = _checked({**raw, "scaling_policy": name}, deployment, source)
        except ConfigError as exc:
            notes.append(
                f"scaling policy {name} not compared: the deployment's planner block "
                f"with scaling_policy {name}: {exc.message}"
            )
            continue
        policies.append(Policy(name, config, source))
    return policies, notes


def file_policies(
    paths: Sequence[str | Path], deployment: Deployment, taken: Sequence[str] = ()
) -> list[Policy]:
    """One policy per planner config file, named after the file (``-2``, ``-3`` on repeats)."""
    from plansim.planner_io import read_planner_mapping

    names = set(taken)
    out = []
    for path in paths:
        raw = read_planner_mapping(path)
        name = base = Path(path).stem
        k = 2
        while name in names:
            name, k = f"{base}-{k}", k + 1
        names.add(name)
        out.append(Policy(name, _checked(raw, deployment, str(path)), str(path)))
    return out


def _checked(raw: Mapping[str, Any], deployment: Deployment, source: str) -> PlannerConfig:
    config = parse_planner_config(dict(raw), source=source)
    if config.mode not in _MODES[deployment.mode]:
        raise ConfigError(
            f"mode: planner mode {config.mode} does not fit the {deployment.mode} deployment",
            source=source,
            field="mode",
        )
    if config.retune is not None:
        raise ConfigError(
            "retune: plansim capacity compares scaling policies; run retune with "
            "plansim retune sweep",
            source=source,
            field="retune",
        )
    return config
