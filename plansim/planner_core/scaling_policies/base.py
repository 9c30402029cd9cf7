"""What a scaling policy declares (``ScalingPolicy``) and what its ``build`` returns
(``PolicyPlugins``); the registry is ``plansim.planner_core.scaling_policies``."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from plansim.registry import load_target


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
