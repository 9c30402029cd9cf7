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

Adding a policy: one module declaring its ``POLICY`` and one line in ``SCALING_POLICIES``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError

from plansim.registry import Registry, load_target


@dataclass(slots=True)
class PolicyPlugins:
    """What a policy contributes to the pipeline: its two loops and a per-tick observer."""

    throughput: Any = None
    load: Any = None
    observe: Callable[[Any], None] | None = None


@dataclass(frozen=True, slots=True)
class ScalingPolicy:
    """One policy's declaration. ``build``: ``"module:attribute"`` of ``build(state, params,
    sla) -> PolicyPlugins`` (``sla``: the deployment's goodput SLA, ``SlaTargets``, when the host
    knows it, else None); ``check(config)``: a config rule the policy adds (the problem in
    ``field: message`` form, or None); ``sizes_for_deployment_sla``: the policy sizes for the
    deployment's SLA, so a planner ``ttft_ms``/``itl_ms`` that differs has no effect."""

    summary: str
    params: type[BaseModel]
    build: str
    check: Callable[[Any], str | None] | None = None
    sizes_for_deployment_sla: bool = False

    def plugins(self, state: Any, params: BaseModel, sla: Any) -> PolicyPlugins:
        """The policy's loops for one planner (``build`` imported now)."""
        return load_target(self.build)(state, params, sla)


SCALING_POLICIES: Registry[ScalingPolicy] = Registry("scaling policy", {
    "dynamo": "plansim.planner_core.scaling_policies.dynamo:POLICY",
    "sla_goodput": "plansim.planner_core.scaling_policies.sla_goodput:POLICY",
})


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
