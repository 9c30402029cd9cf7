"""``RetuneConfig``: the validated ``retune:`` block of a planner config.

Times in seconds. Defaults (issue 5): ``interval_seconds`` T = 900, ``grace_seconds`` G = 60,
``objective`` GoodputPerGPU, ``sla`` the planner's TTFT/ITL targets, ``min_improvement_percentage``
2.0, ``max_candidates`` 32, ``max_parallel`` the CPU count, ``timeout_seconds`` T/2,
``decision_latency_seconds`` D = 0 (or ``measured``: the sweep's wall time), ``advisory`` false,
``seed`` 0 (the canonical router seed of every candidate replay).

D and ``timeout_seconds`` stay within T so that at most one sweep is in flight.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator, model_validator

from plansim.errors import ConfigError
from plansim.limits import MAX_RETUNE_CANDIDATES, MAX_SEED, MAX_WORKER_PROCESSES
from plansim.retune import domains, scoring
from plansim.schema import DEFAULT_MIN_IMPROVEMENT_PERCENTAGE
from plansim.validation import StrictModel, config_error, older_spelling

Objective = Literal[
    "GoodputPerGPU",
    "Goodput",
    "Throughput",
    "ThroughputPerGPU",
    "ThroughputPerUser",
    "TTFT",
    "E2ELatency",
]

# Router knobs that a mid-replay patch cannot change consistently: the startup router also uses
# them to count cached tokens, which a patch leaves as it was (seed, Replay Integration).
UNSEARCHABLE_ROUTER_KNOBS = ("host_cache_hit_weight", "disk_cache_hit_weight")


class RetuneSla(StrictModel):
    """The scoring SLA of the Goodput objectives, per request, in milliseconds: ``tpot_ms``
    bounds the request's mean token gap (``itl_ms``, the reference's name, is accepted)."""

    ttft_ms: float | None = Field(default=None, gt=0)
    tpot_ms: float | None = Field(default=None, gt=0)
    e2e_ms: float | None = Field(default=None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _itl_spelling(cls, data: Any) -> Any:
        return older_spelling(data, "itl_ms", "tpot_ms")

    @model_validator(mode="after")
    def _one_kind_of_bound(self) -> RetuneSla:
        if self.e2e_ms is not None and (self.ttft_ms is not None or self.tpot_ms is not None):
            raise ValueError("e2e_ms cannot be combined with ttft_ms/tpot_ms")
        if self.e2e_ms is None and self.ttft_ms is None and self.tpot_ms is None:
            raise ValueError("an SLA needs at least one of ttft_ms, tpot_ms, e2e_ms")
        return self


class RetuneConfig(StrictModel):
    """The ``retune:`` block; see the module docstring for defaults."""

    interval_seconds: float = Field(default=900.0, gt=0)
    grace_seconds: float = Field(default=60.0, ge=0)
    objective: Objective = "GoodputPerGPU"
    sla: RetuneSla | None = None
    min_improvement_percentage: float = Field(default=DEFAULT_MIN_IMPROVEMENT_PERCENTAGE, ge=0)
    max_candidates: int = Field(default=32, ge=1, le=MAX_RETUNE_CANDIDATES)
    max_parallel: int = Field(
        default_factory=lambda: os.cpu_count() or 1, ge=1, le=MAX_WORKER_PROCESSES
    )
    timeout_seconds: float | None = Field(default=None, gt=0)
    decision_latency_seconds: float | Literal["measured"] = 0.0
    advisory: bool = False
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    router: dict[str, Any] = Field(default_factory=dict)
    planner: dict[str, Any] = Field(default_factory=dict)

    @field_validator("decision_latency_seconds")
    @classmethod
    def _latency_non_negative(cls, value: float | str) -> float | str:
        if isinstance(value, float) and not value >= 0:
            raise ValueError("decision_latency_seconds: must be >= 0 or 'measured'")
        return value

    @field_validator("router")
    @classmethod
    def _router_knobs_patchable(cls, value: dict[str, Any]) -> dict[str, Any]:
        for name in UNSEARCHABLE_ROUTER_KNOBS:
            if name in value:
                raise ValueError(
                    f"router.{name}: cannot be searched: a router patch does not change how "
                    "the startup router counts cached tokens"
                )
        return value

    @model_validator(mode="after")
    def _within_interval(self) -> RetuneConfig:
        timeout = self.timeout_seconds
        if timeout is None:
            object.__setattr__(self, "timeout_seconds", self.interval_seconds / 2)
        elif timeout > self.interval_seconds:
            raise ValueError(
                f"timeout_seconds: {timeout:g} exceeds interval_seconds {self.interval_seconds:g}"
            )
        d = self.decision_latency_seconds
        if isinstance(d, float) and d > self.interval_seconds:
            raise ValueError(
                f"decision_latency_seconds: {d:g} exceeds interval_seconds "
                f"{self.interval_seconds:g}"
            )
        return self

    @property
    def timeout_s(self) -> float:
        """The sweep's wall-clock limit (``timeout_seconds``, defaulted to T/2)."""
        assert self.timeout_seconds is not None
        return self.timeout_seconds

    @property
    def maximize(self) -> bool:
        return self.objective not in scoring.MINIMIZED

    def scoring_sla(self, planner_ttft_ms: float | None, planner_itl_ms: float | None) -> RetuneSla:
        """The SLA used for goodput: ``sla`` if set, else the planner's TTFT/ITL targets."""
        if self.sla is not None:
            return self.sla
        try:
            return RetuneSla(ttft_ms=planner_ttft_ms, tpot_ms=planner_itl_ms)
        except ValidationError as exc:
            raise ConfigError(
                "the Goodput objectives need an SLA: set retune.sla or the planner's ttft/itl",
                field="retune.sla",
            ) from exc


def load_retune_config(
    data: Any, *, source: str | None = None, prefix: str = "retune"
) -> RetuneConfig:
    """Validate a ``retune:`` mapping; ConfigError names the offending field (``retune.x.y``).

    Domain syntax (``router``/``planner`` fields) is checked here too, so a malformed domain
    fails at load rather than when the planner starts.
    """
    if not isinstance(data, Mapping):
        raise ConfigError("must be a mapping", source=source, field=prefix)
    router = data.get("router")
    if isinstance(router, Mapping):
        for name in UNSEARCHABLE_ROUTER_KNOBS:
            if name in router:
                raise ConfigError(
                    "cannot be searched: a router patch does not change how the startup router "
                    "counts cached tokens",
                    source=source,
                    field=f"{prefix}.router.{name}",
                )
    try:
        config = RetuneConfig.model_validate(dict(data))
    except ValidationError as exc:
        raise config_error(exc, source=source, prefix=prefix, model=RetuneConfig) from None
    for group in (domains.ROUTER, domains.PLANNER):
        raw = getattr(config, group)
        for name in raw:
            try:
                domains.parse_field(f"{prefix}.{group}.{name}", raw[name])
            except ConfigError as exc:
                raise ConfigError(exc.message, source=source, field=exc.field) from None
    return config
