"""``scaling_policy: dynamo`` (the default): Dynamo 1.6.1's two builtin loops, as the Planner
Design document describes them (``plansim.planner_core.builtins``). The throughput loop sizes
replicas from predicted demand over one engine's capacity under the SLA (a floor when the load
loop is on); the load loop moves +/-1 replica from the engines' forward-pass metrics and the
online perf models. ``docs/planner-fidelity.md`` lists, rule by rule, where plansim differs from
Dynamo 1.6.1."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from plansim.planner_core.scaling_policies.base import ScalingPolicy


class DynamoParams(BaseModel):
    """No parameters of its own: the policy reads the Dynamo PlannerConfig fields."""

    model_config = ConfigDict(extra="forbid", frozen=True)


POLICY = ScalingPolicy(
    summary="Dynamo 1.6.1's throughput and load scaling (the reference planner)",
    params=DynamoParams,
    build="plansim.planner_core.builtins:dynamo_plugins",
)
