"""Planner scaling policies: the registry of what decides replica targets in the PROPOSE stage.

A policy is one module that registers a :class:`ScalingPolicy`: its name (the value of
``PlannerConfig.scaling_policy``), a one-line summary, its parameters as a pydantic model (every
field's default, bounds and description written once; ``scaling_policy_params`` validates
against it) and ``build``, which returns the policy's two loop plugins:

- ``throughput``: fires every ``throughput_adjustment_interval_seconds`` (the slow, predictive
  loop; it receives the same-tick predictions of ``builtin_load_predict``);
- ``load``: fires every ``load_adjustment_interval_seconds`` (the fast, reactive loop).

Either may be ``None``. The engine runs ``observe(tick_input)`` of the returned object on every
tick, before the pipeline. Registered policies:

- ``dynamo`` (default): Dynamo 1.6.1's throughput and load scaling, faithfully;
- ``sla_goodput``: plansim's policy sizing for the goodput SLA per request.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ValidationError


@dataclass(slots=True)
class PolicyPlugins:
    """What a policy contributes to the pipeline: its two loops and a per-tick observer."""

    throughput: Any = None
    load: Any = None
    observe: Callable[[Any], None] | None = None


@dataclass(frozen=True, slots=True)
class ScalingPolicy:
    name: str
    summary: str
    params: type[BaseModel]
    # build(state, params, sla) -> PolicyPlugins; ``sla`` is the deployment's goodput SLA
    # (``SlaTargets``) when the host knows it, else None.
    build: Callable[..., PolicyPlugins]
    # check(config) -> problem or None: config rules the policy adds (field: message form).
    check: Callable[[Any], str | None] | None = None


_REGISTRY: dict[str, ScalingPolicy] = {}


def register(policy: ScalingPolicy) -> ScalingPolicy:
    if policy.name in _REGISTRY:
        raise ValueError(f"scaling policy {policy.name!r} is already registered")
    _REGISTRY[policy.name] = policy
    return policy


def _load_builtins() -> None:
    # Importing a policy module registers it; done lazily because the policy modules import
    # the planner state, which imports the config that validates against this registry.
    from plansim.planner_core.scaling_policies import dynamo, sla_goodput  # noqa: F401


def policy_names() -> tuple[str, ...]:
    _load_builtins()
    return tuple(_REGISTRY)


def get_policy(name: str) -> ScalingPolicy:
    _load_builtins()
    try:
        return _REGISTRY[name]
    except KeyError:
        raise KeyError(f"unknown scaling policy {name!r} (one of {', '.join(_REGISTRY)})") from None


def validate_params(name: str, raw: dict[str, Any]) -> BaseModel:
    """The policy's parameters from ``raw``; ``ValueError`` naming the first bad key as
    ``scaling_policy_params.<key>: <problem>``."""
    policy = get_policy(name)
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
