"""The recommendation of a capacity run as files to deploy: the deployment file in the input's
own spellings, and the files Dynamo takes.

- ``deployment_file(deployment, raw)``: the recommended deployment as a plansim deployment
  mapping whose keys are spelled as the input file spelled them (``backend`` stays ``backend``,
  ``num_gpu_blocks_override`` stays so, the router's ``overlap_score_weight`` and the SLA's
  ``itl_ms`` keep their older names), canonical names for keys the input did not have;
- ``engine_files(deployment)``: each pool's engine args in Dynamo 1.6.1's canonical form
  (``--extra-engine-args``, or ``--prefill-engine-args``/``--decode-engine-args`` of a
  disaggregated deployment; ``worker_type`` set per pool, the values an ``aic`` timing model
  derived written out), with notes naming the fields that have no Dynamo key, left out;
- ``planner_config(deployment, max_gpu_budget)``: the Dynamo planner config sized for the
  deployment's SLA (its planner block when it has one), for Dynamo's planner ``--config``.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from plansim import schema
from plansim.configfile import read_config
from plansim.roles import Mode
from plansim.sim import engine_config
from plansim.sim.deployment import DERIVED, Deployment, deployment_mapping
from plansim.sim.routing import all_router_knobs

_ENGINE_SECTIONS = ("engine", "prefill_engine", "decode_engine")
# The planner keys that are plansim's own: Dynamo's planner runs its own policy.
_PLANSIM_PLANNER_KEYS = ("scaling_policy", "scaling_policy_params")


def deployment_file(
    deployment: Deployment, raw: Mapping[str, Any] | None, source: Path | None = None
) -> dict[str, Any]:
    """``deployment`` as a deployment file's mapping, spelled as ``raw`` (the input file's
    mapping; its engine sections may name engine-args files, relative to ``source``'s folder)
    spelled its keys; unset optional keys are left out."""
    raw = raw or {}
    out = _without_none(deployment_mapping(deployment, json=True))
    base = source.parent if source is not None else Path.cwd()
    for section in _ENGINE_SECTIONS:
        if isinstance(out.get(section), dict):
            given = raw.get(section)
            if isinstance(given, str):  # an engine-args file: its own spellings
                path = Path(given).expanduser()
                given = read_config(
                    path if path.is_absolute() else base / path, what="engine-args file"
                )
            spellings = engine_config.spellings(given) if isinstance(given, Mapping) else {}
            out[section] = engine_config.spelled(out[section], spellings)
    for section, new, old in _older_spellings():
        block, given = out.get(section), raw.get(section)
        if (
            isinstance(block, dict)
            and isinstance(given, Mapping)
            and new in block
            and old in given
            and new not in given
        ):
            block[old] = block.pop(new)
    return out


def _older_spellings() -> list[tuple[str, str, str]]:
    """(section, key, older spelling) of the deployment keys with an older name."""
    out = [
        ("router", knob.alias_of, knob.name)
        for knob in all_router_knobs().values()
        if knob.alias_of
    ]
    return [*out, ("sla", "tpot_ms", "itl_ms")]


def engine_files(deployment: Deployment) -> tuple[dict[str, Any], list[str]]:
    """File name -> content of each pool's engine args in Dynamo's canonical form; and notes
    naming what they leave out (see the module docstring)."""
    files: dict[str, Any] = {}
    notes: list[str] = []
    pools = (
        ((schema.RECOMMENDED_ENGINE_ARGS, deployment.engine, "aggregated"),)
        if Mode(deployment.mode) is Mode.AGG
        else (
            (schema.RECOMMENDED_PREFILL_ENGINE_ARGS, deployment.prefill_args, "prefill"),
            (schema.RECOMMENDED_DECODE_ENGINE_ARGS, deployment.decode_args, "decode"),
        )
    )
    for name, args, worker_type in pools:
        dump = args.model_dump(mode="json", exclude_unset=True)
        dump.pop("no_effect_keys", None)
        derived = dump.pop(DERIVED, None) or {}
        files[name], left_out = engine_config.canonical_file(
            {**_without_none(dump), **derived}, worker_type=worker_type
        )
        if left_out:
            notes.append(
                f"{name} leaves out {', '.join(left_out)}: no Dynamo 1.6.1 engine key "
                "(an npz timing model is Dynamo's --planner-profile-data)"
            )
    return files, notes


def planner_config(deployment: Deployment, max_gpu_budget: int) -> dict[str, Any]:
    """The Dynamo planner config for ``deployment``: its planner block, else the defaults sized
    for its SLA (``capacity.policies.default_base``), without plansim's own keys (Dynamo's
    planner runs its own policy)."""
    from plansim.capacity.policies import default_base

    # ``str`` of the pool mode (a StrEnum): a YAML file holds its plain value.
    return {
        k: str(v) if isinstance(v, Mode) else v
        for k, v in default_base(deployment, max_gpu_budget).items()
        if v is not None and k not in _PLANSIM_PLANNER_KEYS
    }


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    return value
