"""Build predictors by name from PlannerConfig-named parameters.

``make_predictor(name, **params)`` takes the reference PlannerConfig field names, so a planner
can pass its config straight through; a parameter that does not apply to the chosen predictor is
ignored (one config serves every predictor), an unknown name or a bad value raises
``ConfigError`` naming the field.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plansim.errors import ConfigError
from plansim.planner_core.predictors.base import LoadPredictor
from plansim.planner_core.predictors.constant import ConstantPredictor
from plansim.planner_core.predictors.kalman import KalmanPredictor

PREDICTOR_NAMES: tuple[str, ...] = ("constant", "arima", "kalman", "prophet")

# Reference PlannerConfig names and defaults (planner_core.md 1.1). Prophet's synthetic time axis
# steps by the throughput interval, hence the last entry.
PREDICTOR_PARAM_DEFAULTS: Mapping[str, Any] = {
    "load_predictor_log1p": False,
    "prophet_window_size": 50,
    "kalman_q_level": 1.0,
    "kalman_q_trend": 0.1,
    "kalman_r": 10.0,
    "kalman_min_points": 5,
    "throughput_adjustment_interval_seconds": 180,
}

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


# How each parameter is checked: (kind, minimum, minimum is exclusive).
_KINDS: Mapping[str, tuple[type, float, bool]] = {
    "load_predictor_log1p": (bool, 0, False),
    "prophet_window_size": (int, 2, False),
    "kalman_q_level": (float, 0.0, False),
    "kalman_q_trend": (float, 0.0, False),
    "kalman_r": (float, 0.0, False),
    "kalman_min_points": (int, 1, False),
    "throughput_adjustment_interval_seconds": (float, 0.0, True),
}


def coerce_param(name: str, value: Any) -> Any:
    """Validate one predictor parameter (strings from a command line are parsed) and return it
    with its proper type. Raises ``ConfigError`` with ``field=name``."""
    if name not in _KINDS:
        known = ", ".join(PREDICTOR_PARAM_DEFAULTS)
        raise ConfigError(f"unknown predictor parameter (known: {known})", field=name)
    kind, minimum, exclusive = _KINDS[name]
    if kind is bool:
        if isinstance(value, bool):
            return value
        text = str(value).strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
        raise ConfigError(f"expected true or false, got {value!r}", field=name)
    what = "an integer" if kind is int else "a number"
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise ConfigError(f"expected {what}, got {value!r}", field=name) from None
    if isinstance(value, bool) or not math.isfinite(number):
        raise ConfigError(f"expected {what}, got {value!r}", field=name)
    if kind is int and not number.is_integer():
        raise ConfigError(f"expected an integer, got {value!r}", field=name)
    if number < minimum or (exclusive and number == minimum):
        bound = f"> {minimum:g}" if exclusive else f">= {minimum:g}"
        raise ConfigError(f"must be {bound}, got {value!r}", field=name)
    if kind is int:
        return int(number)
    # Integral floats print without ".0" in candidate labels; keep ints as given.
    return int(number) if isinstance(value, int) else number


def resolve_params(params: Mapping[str, Any]) -> dict[str, Any]:
    """Defaults overlaid with validated ``params``."""
    resolved = dict(PREDICTOR_PARAM_DEFAULTS)
    for key, value in params.items():
        resolved[key] = coerce_param(key, value)
    return resolved


def make_predictor(name: str, **params: Any) -> LoadPredictor:
    """A fresh predictor called ``name`` (one of ``PREDICTOR_NAMES``)."""
    if name not in PREDICTOR_NAMES:
        raise ConfigError(
            f"unknown load predictor {name!r} (known: {', '.join(PREDICTOR_NAMES)})",
            field="load_predictor",
        )
    p = resolve_params(params)
    log1p = p["load_predictor_log1p"]
    if name == "constant":
        return ConstantPredictor(log1p=log1p)
    if name == "kalman":
        return KalmanPredictor(
            q_level=p["kalman_q_level"],
            q_trend=p["kalman_q_trend"],
            r=p["kalman_r"],
            min_points=p["kalman_min_points"],
            log1p=log1p,
        )
    if name == "arima":
        from plansim.planner_core.predictors.arima import ArimaPredictor

        return ArimaPredictor(log1p=log1p)
    from plansim.planner_core.predictors.prophet import ProphetPredictor

    return ProphetPredictor(
        window_size=p["prophet_window_size"],
        step_s=p["throughput_adjustment_interval_seconds"],
        log1p=log1p,
    )


@dataclass(frozen=True, slots=True)
class PredictorSpec:
    """A predictor candidate: a name and its explicitly set parameters (validated, sorted)."""

    name: str
    params: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, name: str, params: Mapping[str, Any] | None = None) -> PredictorSpec:
        if name not in PREDICTOR_NAMES:
            raise ConfigError(
                f"unknown load predictor {name!r} (known: {', '.join(PREDICTOR_NAMES)})",
                field="predictors",
            )
        checked = {k: coerce_param(k, v) for k, v in (params or {}).items()}
        return cls(name, tuple(sorted(checked.items())))

    @property
    def label(self) -> str:
        """Display name: ``kalman`` or ``kalman(kalman_q_level=0.1,kalman_r=10)``."""
        if not self.params:
            return self.name
        inner = ",".join(f"{k}={_fmt(v)}" for k, v in self.params)
        return f"{self.name}({inner})"

    def build(self, **extra: Any) -> LoadPredictor:
        """A fresh predictor; ``extra`` (e.g. the bucket interval) is overridden by ``params``."""
        return make_predictor(self.name, **{**extra, **dict(self.params)})


def _fmt(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


# Parameters that change each predictor's forecasts; others are ignored by it.
RELEVANT_PARAMS: Mapping[str, frozenset[str]] = {
    "constant": frozenset(),
    "arima": frozenset({"load_predictor_log1p"}),
    "kalman": frozenset(
        {
            "load_predictor_log1p",
            "kalman_q_level",
            "kalman_q_trend",
            "kalman_r",
            "kalman_min_points",
        }
    ),
    "prophet": frozenset(
        {"load_predictor_log1p", "prophet_window_size", "throughput_adjustment_interval_seconds"}
    ),
}


def expand_candidates(
    names: Sequence[str],
    params: Mapping[str, Any] | None = None,
    grid: Mapping[str, Sequence[Any]] | None = None,
) -> list[PredictorSpec]:
    """Candidates for a comparison: each predictor in ``names`` with the fixed ``params`` and
    every combination of the ``grid`` values, keeping only the parameters that predictor uses
    (so ``constant`` runs once however large a Kalman grid is). Order: ``names`` order, then grid
    combinations in the order given. Raises ``ConfigError`` for an unknown predictor or parameter,
    a bad value, an empty grid, or a parameter that no selected predictor uses."""
    params = {k: coerce_param(k, v) for k, v in (params or {}).items()}
    grid_values = {k: [coerce_param(k, v) for v in values] for k, values in (grid or {}).items()}
    for key, values in grid_values.items():
        if not values:
            raise ConfigError("grid needs at least one value", field=key)
        if key in params:
            raise ConfigError("given both as a fixed parameter and as a grid", field=key)
    for name in names:
        if name not in PREDICTOR_NAMES:
            raise ConfigError(
                f"unknown load predictor {name!r} (known: {', '.join(PREDICTOR_NAMES)})",
                field="predictors",
            )
    for key in [*params, *grid_values]:
        if not any(key in RELEVANT_PARAMS[name] for name in names):
            raise ConfigError(
                f"no selected predictor ({', '.join(names)}) uses this parameter", field=key
            )
    specs: list[PredictorSpec] = []
    for name in dict.fromkeys(names):
        relevant = RELEVANT_PARAMS[name]
        fixed = {k: v for k, v in params.items() if k in relevant}
        axes = [(k, vs) for k, vs in grid_values.items() if k in relevant]
        for combo in itertools.product(*(vs for _, vs in axes)):
            point = {**fixed, **{k: v for (k, _), v in zip(axes, combo, strict=True)}}
            spec = PredictorSpec(name, tuple(sorted(point.items())))
            if spec not in specs:
                specs.append(spec)
    return specs
