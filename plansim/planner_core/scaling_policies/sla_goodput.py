"""``scaling_policy: sla_goodput``: plansim's policy, sizing each pool for the share of requests
over the goodput SLA. Its loops are ``plansim.planner_core.goodput_policy`` (whose docstring
describes them); here its parameters and config rule."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from plansim.planner_core.scaling_policies.base import ScalingPolicy


class SlaGoodputParams(BaseModel):
    """Parameters of ``sla_goodput`` (``scaling_policy_params``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    max_violation_fraction: float = Field(
        0.05,
        gt=0,
        lt=1,
        description="largest share of requests allowed over the SLA (half of it per pool when "
        "disaggregated)",
    )
    history_requests: int = Field(
        2048,
        ge=16,
        le=1_000_000,
        description="completed requests kept as the request mix the model sizes for",
    )
    ttft_worker_percentile: float = Field(
        50.0,
        ge=0,
        le=100,
        description="the fast loop grows a pool when this percentile of its workers' queue-aware "
        "TTFT estimates is over the TTFT bound",
    )
    kv_pressure: float = Field(
        0.9,
        gt=0,
        le=1,
        description="the fast loop grows a pool when that percentile of workers uses this "
        "fraction of their KV tokens",
    )
    scale_down_stabilization_s: float = Field(
        300.0,
        ge=0,
        le=86400,
        description="a pool shrinks only to the largest size sized within this many seconds "
        "(the Kubernetes HPA scale-down stabilization window), up to 3x longer for "
        "bursty traffic as far as the bursts spend the error budget: bursts that recur "
        "within it keep their capacity",
    )
    min_window_requests: int = Field(
        50, ge=1, description="completed requests a window needs before it calibrates the model"
    )
    slo_window_s: float = Field(
        3600.0,
        ge=0,
        le=30 * 86400,
        description="the goodput target holds over this many seconds (an error budget): an "
        "interval may spend half of what the last slo_window_s saved, up to three "
        "times the target share; 0: every interval meets the target on its own",
    )
    knee_gain: float = Field(
        0.02,
        ge=0,
        lt=1,
        description="share of requests a doubling of a pool must at least bring back under "
        "the SLA: replicas that together buy less are not added",
    )
    forecast_lead: bool = Field(
        True,
        description="size for the demand one start-up time ahead (what a worker started now "
        "must carry when it is ready): the load predictor's forecast plus the "
        "rising trend of the observed rates (a slope beyond two standard errors) "
        "over the observed start-up time; an "
        "observed rate beyond twice the forecast's error sizes at once",
    )
    startup_guess_s: float = Field(
        60.0,
        ge=0,
        le=86400,
        description="start-up time assumed until one is observed (then the p90 of the "
        "observed start-ups)",
    )
    forecast_error_z: float = Field(
        0.0,
        ge=0,
        le=5,
        description="standard deviations of the predictor's one-step error added to the "
        "demand ahead (grown with the square root of the steps ahead)",
    )
    routing: Literal["balanced", "random"] = Field(
        "balanced",
        description="how the router spreads requests over a pool's workers: balanced (the KV "
        "router, round robin: a worker's next request comes after the pool's next "
        "N - 1) or random (each worker sees a Poisson stream)",
    )


def check(config) -> str | None:
    if config.optimization_target != "sla":
        return (
            "scaling_policy: sla_goodput sizes for the SLA and needs optimization_target sla "
            f"(got {config.optimization_target})"
        )
    return None


POLICY = ScalingPolicy(
    summary="plansim's policy: sizes each pool for the fraction of requests over the goodput SLA",
    params=SlaGoodputParams,
    build="plansim.planner_core.goodput_policy:build",
    check=check,
    sizes_for_deployment_sla=True,
)
