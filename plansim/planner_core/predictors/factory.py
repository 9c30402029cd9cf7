"""The load-predictor registry, and building predictors by name from PlannerConfig-named
parameters.

``PREDICTORS`` maps each name to its predictor class, which declares its parameters once
(``LoadPredictor.Params``). ``make_predictor(name, **params)`` takes the PlannerConfig field
names, so a planner can pass its config straight through; a parameter that does not apply to the
chosen predictor is checked and ignored (one config serves every predictor), an unknown name or
a bad value raises ``ConfigError`` naming the field.

Adding a predictor: one module with its class (``Params``, ``from_params``, ``tune_order``) and
one line in ``PREDICTORS``.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from plansim.errors import ConfigError
from plansim.params import Param, format_value, params_of
from plansim.planner_core.predictors.base import LoadPredictor
from plansim.registry import Registry

PREDICTORS: Registry[type[LoadPredictor]] = Registry(
    "load predictor",
    {
        "constant": "plansim.planner_core.predictors.constant:ConstantPredictor",
        "arima": "plansim.planner_core.predictors.arima:ArimaPredictor",
        "kalman": "plansim.planner_core.predictors.kalman:KalmanPredictor",
        "prophet": "plansim.planner_core.predictors.prophet:ProphetPredictor",
    },
)
PREDICTOR_NAMES: tuple[str, ...] = PREDICTORS.names()


def predictor_params(name: str) -> tuple[Param, ...]:
    """The parameters predictor ``name`` declares."""
    return params_of(predictor_class(name).Params)


@functools.cache
def all_predictor_params() -> dict[str, Param]:
    """Every predictor's parameters by name; predictors sharing one declare it alike."""
    out: dict[str, Param] = {}
    for name in PREDICTOR_NAMES:
        for p in predictor_params(name):
            if out.setdefault(p.name, p) != p:
                raise TypeError(
                    f"predictor parameter {p.name} of {name} differs from another "
                    "predictor's declaration"
                )
    return out


def predictor_class(name: str, *, field: str = "load_predictor") -> type[LoadPredictor]:
    """The class registered as ``name``; ``ConfigError`` at ``field`` for an unknown one."""
    if name not in PREDICTORS:
        raise ConfigError(PREDICTORS.unknown(name), field=field)
    return PREDICTORS.get(name)


# Every parameter's default, by PlannerConfig field name.
PREDICTOR_PARAM_DEFAULTS: Mapping[str, Any] = {
    name: p.default for name, p in all_predictor_params().items()
}


def coerce_param(name: str, value: Any) -> Any:
    """Validate one predictor parameter (strings from a command line are parsed) and return it
    with its proper type. Raises ``ConfigError`` with ``field=name``."""
    declared = all_predictor_params().get(name)
    if declared is None:
        known = ", ".join(all_predictor_params())
        raise ConfigError(f"unknown predictor parameter (known: {known})", field=name)
    return declared.check(value)


def make_predictor(name: str, **params: Any) -> LoadPredictor:
    """A fresh predictor called ``name`` (one of ``PREDICTOR_NAMES``); parameters it does not
    declare are checked, then ignored."""
    cls = predictor_class(name)
    checked = {key: coerce_param(key, value) for key, value in params.items()}
    return cls.from_params(
        cls.Params(**{p.name: checked.get(p.name, p.default) for p in params_of(cls.Params)})
    )


@dataclass(frozen=True, slots=True)
class PredictorSpec:
    """A predictor candidate: a name and its explicitly set parameters (validated, sorted)."""

    name: str
    params: tuple[tuple[str, Any], ...] = ()

    @classmethod
    def of(cls, name: str, params: Mapping[str, Any] | None = None) -> PredictorSpec:
        predictor_class(name, field="predictors")
        checked = {k: coerce_param(k, v) for k, v in (params or {}).items()}
        return cls(name, tuple(sorted(checked.items())))

    @property
    def label(self) -> str:
        """Display name: ``kalman`` or ``kalman(kalman_q_level=0.1,kalman_r=10)``."""
        if not self.params:
            return self.name
        inner = ",".join(f"{k}={format_value(v)}" for k, v in self.params)
        return f"{self.name}({inner})"

    def build(self, **extra: Any) -> LoadPredictor:
        """A fresh predictor; ``extra`` (e.g. the bucket interval) is overridden by ``params``."""
        return make_predictor(self.name, **{**extra, **dict(self.params)})


def relevant_params(name: str) -> frozenset[str]:
    """The parameters that change predictor ``name``'s forecasts; others are ignored by it."""
    return frozenset(p.name for p in predictor_params(name))


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
        predictor_class(name, field="predictors")
    for key in [*params, *grid_values]:
        if not any(key in relevant_params(name) for name in names):
            raise ConfigError(
                f"no selected predictor ({', '.join(names)}) uses this parameter", field=key
            )
    specs: list[PredictorSpec] = []
    for name in dict.fromkeys(names):
        relevant = relevant_params(name)
        fixed = {k: v for k, v in params.items() if k in relevant}
        axes = [(k, vs) for k, vs in grid_values.items() if k in relevant]
        for combo in itertools.product(*(vs for _, vs in axes)):
            point = {**fixed, **{k: v for (k, _), v in zip(axes, combo, strict=True)}}
            spec = PredictorSpec(name, tuple(sorted(point.items())))
            if spec not in specs:
                specs.append(spec)
    return specs
