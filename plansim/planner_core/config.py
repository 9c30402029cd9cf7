"""``PlannerConfig``: the validated planner configuration (the offline subset of Dynamo's).

A Dynamo planner config (JSON or YAML mapping) validates as is: fields that only mean something
to a live planner (Prometheus, ports, Kubernetes, AIC, power, gateway, ...) are accepted and
ignored, and :func:`parse_planner_config` lists them once in one warning. Any other unknown key,
or an invalid value, raises :class:`~plansim.errors.ConfigError` naming the field.

Defaults and validators follow the reference (``spec/reference/planner_core.md`` section 1):

- ``scheduling.scale_interval_seconds`` defaults to the GCD, at millisecond resolution, of the
  load interval and (with ``optimization_target: sla`` and throughput scaling on) the throughput
  interval; every enabled interval must be an integer multiple of it.
- "Easy mode": any target other than ``sla`` forces load scaling on and throughput scaling off.
- Retune-only mode: a ``retune`` block with both scaling flags explicitly false; the planner then
  never scales (the easy-mode forcing and the "one loop enabled" rule do not apply).
"""

from __future__ import annotations

import logging
import math
from typing import Any, Literal

from pydantic import ConfigDict, Field, PrivateAttr, ValidationError, create_model, model_validator

from plansim.errors import ConfigError
from plansim.limits import MAX_SPAN_S
from plansim.planner_core.predictors.factory import (
    PREDICTORS,
    all_predictor_params,
    predictor_params,
)
from plansim.planner_core.scaling_policies import SCALING_POLICIES, validate_params
from plansim.roles import PlannerMode, Role
from plansim.validation import StrictModel, config_error

log = logging.getLogger("plansim.planner")

# Keys a live Dynamo planner reads that have no offline meaning: accepted, ignored, warned once.
LIVE_ONLY_FIELDS = frozenset(
    {
        "pre_deployment_sweeping_mode",
        "environment",
        "namespace",
        "backend",
        "log_dir",
        "control_api_port",
        "aic_interpolation",
        "aic_perf_model",
        "metric_pulling_prometheus_endpoint",
        "metric_pulling_prometheus_token",
        "metric_pulling_prometheus_token_file",
        "metric_pulling_prometheus_ssl_verify",
        "metric_pulling_prometheus_extra_query_params",
        "metric_pulling_prometheus_ca_bundle",
        "metric_pulling_prometheus_request_timeout_seconds",
        "metric_reporting_prometheus_port",
        "throughput_metrics_source",
        "model_name",
        "global_planner_namespace",
        "enable_power_awareness",
        "total_gpu_power_limit",
        "report_filename",
        "report_write_gzip_log",
        "live_dashboard_port",
        "plugin_registration",
        "no_operation",
        "load_metric_samples",
        "no_correction",
    }
)
LIVE_ONLY_SCHEDULING_FIELDS = frozenset(
    {"tick_max_duration_seconds", "external_plugins", "gateway"}
)

# Field name -> accepted older names (Dynamo keeps them as aliases).
ALIASES = {
    "throughput_adjustment_interval_seconds": "throughput_adjustment_interval",
    "load_adjustment_interval_seconds": "load_adjustment_interval",
    "ttft_ms": "ttft",
    "itl_ms": "itl",
}

DEFAULT_TTFT_MS = 500.0
DEFAULT_ITL_MS = 50.0
_TRUE_STRINGS = {"1", "true", "yes", "on"}


class PluginSpec(StrictModel):
    """A user plugin: ``import_path`` names a class or object as ``"package.module:attr"``;
    a class is instantiated with ``params`` as keyword arguments."""

    model_config = ConfigDict(frozen=False)

    import_path: str = Field(pattern=r"^[A-Za-z_][\w.]*:[A-Za-z_][\w.]*$")
    params: dict[str, Any] = Field(default_factory=dict)


class SchedulingConfig(StrictModel):
    model_config = ConfigDict(frozen=False)

    scale_interval_seconds: float = Field(5.0, gt=0, le=MAX_SPAN_S)
    # Live-only pipeline deadline and gRPC plugin transport: accepted, ignored offline.
    tick_max_duration_seconds: float = Field(30.0, gt=0)
    external_plugins: list[Any] = Field(default_factory=list)
    gateway: Any = None


class _PlannerFields(StrictModel):
    """Planner settings. Times in seconds unless the name says ``_ms``; intervals at most
    ``limits.MAX_SPAN_S`` (no trace is longer). The load predictors' parameter fields
    (``load_predictor_log1p``, ``kalman_*``, ``prophet_window_size``) are added from their
    declarations (``LoadPredictor.Params``) to make ``PlannerConfig``."""

    model_config = ConfigDict(frozen=False, populate_by_name=True, validate_assignment=False)

    mode: PlannerMode = PlannerMode.DISAGG
    optimization_target: Literal["throughput", "latency", "load", "sla"] = "throughput"
    enable_throughput_scaling: bool = True
    enable_load_scaling: bool = False
    throughput_adjustment_interval_seconds: float = Field(
        180.0, gt=0, le=MAX_SPAN_S, alias="throughput_adjustment_interval"
    )
    load_adjustment_interval_seconds: float = Field(
        5.0, gt=0, le=MAX_SPAN_S, alias="load_adjustment_interval"
    )
    scheduling: SchedulingConfig = Field(default_factory=SchedulingConfig)

    ttft_ms: float = Field(DEFAULT_TTFT_MS, alias="ttft")
    itl_ms: float = Field(DEFAULT_ITL_MS, alias="itl")

    max_gpu_budget: int = 8
    min_gpu_budget: int = -1
    min_endpoint: int = Field(1, ge=0)
    prefill_min_endpoint: int | None = Field(None, ge=1)
    decode_min_endpoint: int | None = Field(None, ge=1)
    prefill_engine_num_gpu: int | None = Field(None, ge=1)
    decode_engine_num_gpu: int | None = Field(None, ge=1)
    max_throughput_scaling_replicas: int = Field(8, gt=0)

    # A name of the predictor registry (``predictors.factory.PREDICTORS``).
    load_predictor: str = "arima"
    load_predictor_warmup_trace: str | None = None

    max_num_fpm_samples: int = Field(64, ge=1)
    fpm_sample_bucket_size: int = Field(16, ge=1)
    load_min_observations: int = Field(5, ge=1)
    load_scaling_down_sensitivity: int = Field(80, ge=0, le=100)
    prefill_scale_up_queue_tokens: int | None = Field(None, ge=0)
    prefill_scale_down_queue_tokens: int | None = Field(None, ge=0)
    decode_scale_up_kv_rate: float | None = Field(None, ge=0, le=100)
    decode_scale_down_kv_rate: float | None = Field(None, ge=0, le=100)
    speculative_nextn: int = Field(0, ge=0)

    advisory: bool = False
    profile_results_dir: str = "profiling_results"
    report_interval_hours: float | None = 24.0
    report_output_dir: str = "./planner_reports"

    plugins: list[PluginSpec] = Field(default_factory=list)
    # The raw ``retune:`` block; plansim.retune.setup.retune_setup validates it.
    retune: dict[str, Any] | None = None

    # plansim extension: which registered scaling policy proposes targets, and its parameters
    # (validated against the policy's own parameter model; see planner_core.scaling_policies).
    scaling_policy: str = "dynamo"
    scaling_policy_params: dict[str, Any] = Field(default_factory=dict)
    _policy_params: Any = PrivateAttr(default=None)

    # Whether scheduling.scale_interval_seconds was given (not the GCD default): a changed
    # interval recomputes a defaulted cadence but keeps an explicit one.
    _explicit_scale_interval: bool = PrivateAttr(default=False)

    # -- before: GCD default for the base cadence ----------------------------------------
    @model_validator(mode="wrap")
    @classmethod
    def _default_scale_interval(cls, raw: Any, handler: Any) -> Any:
        scheduling = raw.get("scheduling") if isinstance(raw, dict) else None
        explicit = isinstance(scheduling, dict) and "scale_interval_seconds" in scheduling
        config = handler(cls._with_gcd_default(raw))
        if isinstance(raw, dict) and isinstance(config, PlannerConfig):
            config._explicit_scale_interval = explicit
        return config

    @classmethod
    def _with_gcd_default(cls, raw: Any) -> Any:
        if not isinstance(raw, dict):
            return raw
        scheduling = raw.get("scheduling")
        if isinstance(scheduling, dict) and "scale_interval_seconds" in scheduling:
            return raw
        if scheduling is not None and not isinstance(scheduling, dict):
            return raw  # let field validation name the error
        load = _raw_field(raw, "load_adjustment_interval_seconds", 5.0)
        intervals = [load]
        throughput_on = _truthy(raw.get("enable_throughput_scaling", True))
        if throughput_on and raw.get("optimization_target", "throughput") == "sla":
            intervals.append(_raw_field(raw, "throughput_adjustment_interval_seconds", 180.0))
        try:
            interval_s = gcd_seconds(float(x) for x in intervals)
        except (TypeError, ValueError, OverflowError):
            return raw  # a non-numeric or absurd interval: the field validator reports it
        if interval_s <= 0:
            return raw
        out = dict(raw)
        out["scheduling"] = {**(scheduling or {}), "scale_interval_seconds": interval_s}
        return out

    # -- after: cross-field rules, in the reference order --------------------------------
    @model_validator(mode="after")
    def _check(self) -> PlannerConfig:
        if not self.ttft_ms > 0:
            raise ValueError("ttft_ms: must be > 0")
        # A role's own minimum only where that role is a pool of its own (not in agg).
        if (
            self.mode not in (PlannerMode.DISAGG, PlannerMode.PREFILL)
            and self.prefill_min_endpoint is not None
        ):
            raise ValueError(f"prefill_min_endpoint: not allowed in mode {self.mode}")
        if (
            self.mode not in (PlannerMode.DISAGG, PlannerMode.DECODE)
            and self.decode_min_endpoint is not None
        ):
            raise ValueError(f"decode_min_endpoint: not allowed in mode {self.mode}")
        hours = self.report_interval_hours
        if hours is not None and not (math.isfinite(hours) and hours > 0):
            raise ValueError("report_interval_hours: must be positive and finite, or null")
        root = math.isqrt(self.fpm_sample_bucket_size)
        if root * root != self.fpm_sample_bucket_size:
            raise ValueError("fpm_sample_bucket_size: must be a perfect square")
        if self.load_predictor not in PREDICTORS:
            raise ValueError(f"load_predictor: {PREDICTORS.unknown(self.load_predictor)}")
        if self.optimization_target == "load":
            self._check_load_thresholds()
        self._check_scaling_policy()
        if self.retune_only:
            return self
        if self.optimization_target != "sla":
            # Easy mode: static thresholds on the fast loop only.
            object.__setattr__(self, "enable_load_scaling", True)
            object.__setattr__(self, "enable_throughput_scaling", False)
        if not (self.enable_load_scaling or self.enable_throughput_scaling):
            raise ValueError(
                "enable_load_scaling: at least one of enable_load_scaling and "
                "enable_throughput_scaling must be true (or set retune for retune-only mode)"
            )
        base = self.scheduling.scale_interval_seconds
        for name in self.enabled_interval_fields():
            ratio = getattr(self, name) / base
            if abs(ratio - round(ratio)) > 1e-9 or round(ratio) < 1:
                raise ValueError(
                    f"{name}: must be an integer multiple of scheduling.scale_interval_seconds "
                    f"({base:g} s)"
                )
        if (
            self.enable_load_scaling
            and self.enable_throughput_scaling
            and not self.load_adjustment_interval_seconds
            < self.throughput_adjustment_interval_seconds
        ):
            raise ValueError(
                "load_adjustment_interval_seconds: must be shorter than "
                "throughput_adjustment_interval_seconds when both loops are enabled"
            )
        return self

    def _check_scaling_policy(self) -> None:
        if self.scaling_policy not in SCALING_POLICIES:
            raise ValueError(f"scaling_policy: {SCALING_POLICIES.unknown(self.scaling_policy)}")
        policy = SCALING_POLICIES.get(self.scaling_policy)
        self._policy_params = validate_params(self.scaling_policy, self.scaling_policy_params)
        problem = policy.check(self) if policy.check is not None else None
        if problem is not None:
            raise ValueError(problem)

    @property
    def policy_params(self) -> Any:
        """The validated parameters of ``scaling_policy``."""
        return self._policy_params

    def _check_load_thresholds(self) -> None:
        roles = self.active_roles()
        if Role.PREFILL in roles:
            self._check_threshold_pair(
                "prefill_scale_up_queue_tokens", "prefill_scale_down_queue_tokens"
            )
        if Role.DECODE in roles:
            self._check_threshold_pair("decode_scale_up_kv_rate", "decode_scale_down_kv_rate")

    def _check_threshold_pair(self, up_name: str, down_name: str) -> None:
        """Easy mode needs both thresholds of a role, the scale-up one above the scale-down one."""
        up, down = getattr(self, up_name), getattr(self, down_name)
        if up is None or down is None:
            raise ValueError(f"{up_name}: optimization_target load needs {up_name} and {down_name}")
        if not up > down:
            raise ValueError(f"{up_name}: must be greater than {down_name}")

    # -- derived views -------------------------------------------------------------------
    @property
    def retune_only(self) -> bool:
        """Retune set and both scaling flags explicitly false: the planner never scales."""
        explicit = self.model_fields_set
        return (
            self.retune is not None
            and "enable_load_scaling" in explicit
            and "enable_throughput_scaling" in explicit
            and not self.enable_load_scaling
            and not self.enable_throughput_scaling
        )

    @property
    def easy_mode(self) -> bool:
        return self.optimization_target != "sla"

    @property
    def scale_interval_s(self) -> float:
        return self.scheduling.scale_interval_seconds

    def enabled_interval_fields(self) -> list[str]:
        names = []
        if self.enable_load_scaling:
            names.append("load_adjustment_interval_seconds")
        if self.enable_throughput_scaling:
            names.append("throughput_adjustment_interval_seconds")
        return names

    def active_roles(self) -> tuple[Role, ...]:
        """Roles this planner scales: agg workers count as decode."""
        return PlannerMode(self.mode).roles

    def min_endpoint_for(self, role: Role | str) -> int:
        """``resolve_min_endpoint``: the role-specific minimum if set, else ``min_endpoint``."""
        specific = self.prefill_min_endpoint if role == Role.PREFILL else self.decode_min_endpoint
        return self.min_endpoint if specific is None else specific

    def active_min_endpoints(self) -> tuple[int | None, int | None]:
        """(prefill, decode) minimums; ``None`` for a role the mode does not have."""
        roles = self.active_roles()
        return (
            self.min_endpoint_for(Role.PREFILL) if Role.PREFILL in roles else None,
            self.min_endpoint_for(Role.DECODE) if Role.DECODE in roles else None,
        )

    def predictor_params(self) -> dict[str, Any]:
        """Keyword arguments (PlannerConfig field names) for
        ``predictors.make_predictor(self.load_predictor, **params)``: the parameters the chosen
        predictor declares, from this config."""
        return {p.name: getattr(self, p.name) for p in predictor_params(self.load_predictor)}


# The predictors' parameters the planner does not declare itself become PlannerConfig fields.
_PREDICTOR_PARAMS = [
    p for name, p in all_predictor_params().items() if name not in _PlannerFields.model_fields
]
PlannerConfig = create_model(
    "PlannerConfig",
    __base__=_PlannerFields,
    __module__=__name__,
    **{p.name: p.field() for p in _PREDICTOR_PARAMS},
)
# The fields that choose and parameterise the load predictor: changing any of them replaces it.
PREDICTOR_FIELDS: tuple[str, ...] = ("load_predictor", *(p.name for p in _PREDICTOR_PARAMS))


def gcd_seconds(intervals_s: Any) -> float:
    """Greatest common divisor of intervals at millisecond resolution (7 s, 60 s -> 1 s)."""
    result = 0
    for value in intervals_s:
        result = math.gcd(result, int(round(float(value) * 1000)))
    return result / 1000.0


def parse_planner_config(raw: Any, *, source: str | None = None) -> PlannerConfig:
    """Validate a planner config mapping (as read from JSON/YAML).

    Live-only keys are dropped and listed in one warning; errors raise ``ConfigError`` with the
    offending field's dotted path.
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError("planner config must be a mapping", source=source)
    cleaned, ignored = strip_live_only(raw)
    if ignored:
        log.warning(
            "planner config: ignoring live-only field(s) with no offline meaning: %s",
            ", ".join(ignored),
        )
    try:
        config = PlannerConfig.model_validate(cleaned)
    except ValidationError as exc:
        raise _config_error(exc, source) from None
    targets_set = config.ttft_ms != DEFAULT_TTFT_MS or config.itl_ms != DEFAULT_ITL_MS
    if config.easy_mode and not config.retune_only and targets_set:
        log.warning(
            "planner config: ttft_ms/itl_ms are not used with optimization_target %s",
            config.optimization_target,
        )
    return config


def strip_live_only(raw: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """Split a raw config into the offline fields and the sorted names of ignored live fields."""
    cleaned = {k: v for k, v in raw.items() if k not in LIVE_ONLY_FIELDS}
    ignored = sorted(k for k in raw if k in LIVE_ONLY_FIELDS)
    scheduling = raw.get("scheduling")
    if isinstance(scheduling, dict):
        dropped = sorted(k for k in scheduling if k in LIVE_ONLY_SCHEDULING_FIELDS)
        if dropped:
            cleaned["scheduling"] = {
                k: v for k, v in scheduling.items() if k not in LIVE_ONLY_SCHEDULING_FIELDS
            }
            ignored += [f"scheduling.{k}" for k in dropped]
    return cleaned, ignored


def with_changes(config: PlannerConfig, changes: dict[str, Any]) -> PlannerConfig:
    """A new config with ``changes`` (field names, dotted for ``scheduling.*``) applied and
    everything re-validated. Raises ``ConfigError`` naming the field."""
    raw = config.model_dump(exclude_unset=True, by_alias=False)
    raw.pop("scheduling", None)
    scheduling = config.scheduling.model_dump(exclude_unset=True)
    if not config._explicit_scale_interval:
        scheduling.pop("scale_interval_seconds", None)  # recomputed from the new intervals
    if scheduling:
        raw["scheduling"] = scheduling
    for key, value in changes.items():
        if key.startswith("scheduling."):
            raw.setdefault("scheduling", {})[key.split(".", 1)[1]] = value
        else:
            raw[key] = value
    try:
        return PlannerConfig.model_validate(raw)
    except ValidationError as exc:
        raise _config_error(exc, None) from None


def _raw_field(raw: dict[str, Any], name: str, default: float) -> Any:
    if name in raw:
        return raw[name]
    return raw.get(ALIASES.get(name, name), default)


def _truthy(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in _TRUE_STRINGS
    return bool(value)


def _config_error(exc: ValidationError, source: str | None) -> ConfigError:
    return config_error(
        exc, source=source, aliases={v: k for k, v in ALIASES.items()}, model=PlannerConfig
    )
