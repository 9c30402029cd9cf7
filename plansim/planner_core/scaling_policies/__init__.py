"""Planner scaling policies: the registry of what decides replica targets in the PROPOSE stage.

``SCALING_POLICIES`` maps each name (the value of ``PlannerConfig.scaling_policy``) to the
policy's :class:`ScalingPolicy` declaration, one module each: a one-line summary, its parameters
as a pydantic model (every field's default, bounds and description written once;
``scaling_policy_params`` validates against it), the config rules it adds, and ``build``, the
``"module:attribute"`` of the function that returns the policy's two loop plugins:

- ``throughput``: fires every ``throughput_adjustment_interval_seconds`` (the slow, predictive
  loop; it receives the same-tick predictions of ``builtin_load_predict``);
- ``load``: fires every ``load_adjustment_interval_seconds`` (the fast, reactive loop).

Either may be ``None``. The engine runs ``observe(tick_input)`` of the returned object on every
tick, before the pipeline. ``build`` is imported only when a planner is built, so a config is
validated against a policy's parameters without importing its loops (which import the planner
state, which imports the config).

Adding a policy: one module declaring its ``POLICY`` (``base.ScalingPolicy``) and one line in
``SCALING_POLICIES``.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ValidationError

from plansim.planner_core.scaling_policies.base import PolicyPlugins, ScalingPolicy
from plansim.registry import Registry

SCALING_POLICIES: Registry[ScalingPolicy] = Registry(
    "scaling policy",
    {
        "dynamo": "plansim.planner_core.scaling_policies.dynamo:POLICY",
        "sla_goodput": "plansim.planner_core.scaling_policies.sla_goodput:POLICY",
    },
)


def validate_params(name: str, raw: dict[str, Any]) -> BaseModel:
    """Policy ``name``'s parameters from ``raw``; ``ValueError`` naming the first bad key as
    ``scaling_policy_params.<key>: <problem>``."""
    policy = SCALING_POLICIES.get(name)
    try:
        return policy.params.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err.get("loc", ()))
        msg = err.get("msg", "invalid value")
        if err.get("type") == "extra_forbidden":
            msg = f"not a parameter of scaling policy {name}"
        elif "input" in err:
            msg = f"{msg} (got {err['input']!r})"
        raise ValueError(f"scaling_policy_params.{key}: {msg}") from None


__all__ = ["SCALING_POLICIES", "PolicyPlugins", "ScalingPolicy", "validate_params"]
