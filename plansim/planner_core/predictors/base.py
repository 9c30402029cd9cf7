"""The load-predictor contract shared by every forecaster the planner can use.

A predictor forecasts one traffic series (request count, average ISL or average OSL per
adjustment interval) one step ahead. It is fed one value per interval with ``observe`` and asked
for the next value with ``predict_next``; ``predict_next`` is idempotent (asking twice in one
interval gives the same number and does not advance any state).

Base rules (the planner's reference behaviour, identical for every predictor):

- A non-finite reading (NaN, +-inf) becomes 0; a negative reading becomes 0 (loads are counts).
- Leading-idle skip: zeros are dropped until the first non-zero value. ``reset_idle_skip``
  re-arms it (called after a warm start so the post-deploy idle stretch is ignored again).
- After the first non-zero value, zeros are kept.
- With fewer than ``minimum_data_points`` accepted values, ``predict_next`` falls back to the
  constant predictor: the last accepted value (0 when none).
- A forecast that raises a numeric error (or is not finite) falls back to the last value and sets
  ``last_forecast_failed`` (and ``last_error``) so callers can report ``predict_failed``.
- Forecasts are never negative.
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any, ClassVar

from plansim.params import NoParams, param

# Errors a model fit can raise on awkward data; anything else is a bug and propagates.
FORECAST_ERRORS: tuple[type[BaseException], ...] = (
    ArithmeticError,
    IndexError,
    RuntimeError,
    TypeError,
    ValueError,  # includes numpy.linalg.LinAlgError
)


@dataclass(frozen=True, slots=True)
class Log1pParams:
    """The parameter every fitted predictor shares (a base for their parameter dataclasses)."""

    load_predictor_log1p: bool = param(
        False, help="fit log1p of the series and map forecasts back with expm1"
    )


class LoadPredictor(ABC):
    """One-step-ahead forecaster of a non-negative traffic series (one value per interval).

    A predictor declares its parameters once: ``Params``, a frozen dataclass of
    ``plansim.params.param`` fields named as the PlannerConfig fields they are (defaults,
    bounds, help), and ``from_params`` builds one from an instance of it. Its name is its line
    in the registry (``plansim.planner_core.predictors.factory.PREDICTORS``); the planner config
    fields and the ``predict compare`` help derive from them."""

    Params: ClassVar[type] = NoParams
    # Where ``plansim capacity --tune-planner`` tries this predictor after the base config's
    # own, lower first; None: not tried.
    tune_order: ClassVar[int | None] = None

    @classmethod
    def from_params(cls, params: Any) -> LoadPredictor:
        """A fresh predictor with ``params`` (a ``Params`` instance)."""
        return cls(**{f.name: getattr(params, f.name) for f in fields(params)})

    def __init__(self, *, minimum_data_points: int, log1p: bool = False) -> None:
        if minimum_data_points < 1:
            raise ValueError("minimum_data_points must be >= 1")
        self.minimum_data_points = int(minimum_data_points)
        self.log1p = bool(log1p)
        self.last_forecast_failed = False
        self.last_error: str | None = None
        self._values: list[float] = []
        self._skipping_idle = True

    # -- feeding -------------------------------------------------------------------------
    def observe(self, x: float) -> None:
        """Add one interval's reading (see the module rules for zeros and non-finite values)."""
        value = float(x)
        if not math.isfinite(value) or value < 0.0:
            value = 0.0
        if self._skipping_idle:
            if value == 0.0:
                return
            self._skipping_idle = False
        self._values.append(value)
        self._accept(value)

    def warm(self, values: Iterable[float]) -> None:
        """Warm start: observe each value in order, then re-arm the leading-idle skip."""
        for value in values:
            self.observe(value)
        self.reset_idle_skip()

    def reset_idle_skip(self) -> None:
        """Drop zeros again until the next non-zero reading (the stored history is kept)."""
        self._skipping_idle = True

    # -- forecasting ---------------------------------------------------------------------
    def predict_next(self) -> float:
        """Forecast of the next interval's value (>= 0); constant fallback while warming up."""
        self.last_forecast_failed = False
        self.last_error = None
        last = self.get_last_value()
        if len(self._values) < self.minimum_data_points:
            return last
        try:
            forecast = float(self._forecast())
        except FORECAST_ERRORS as exc:
            self.last_forecast_failed = True
            self.last_error = f"{type(exc).__name__}: {exc}"
            return last
        if not math.isfinite(forecast):
            self.last_forecast_failed = True
            self.last_error = f"non-finite forecast {forecast}"
            return last
        return max(0.0, forecast)

    def get_last_value(self) -> float:
        """The last accepted value, or 0 before any."""
        return self._values[-1] if self._values else 0.0

    @property
    def num_points(self) -> int:
        """Number of accepted values (skipped leading zeros do not count)."""
        return len(self._values)

    @property
    def values(self) -> tuple[float, ...]:
        """Accepted values, oldest first."""
        return tuple(self._values)

    # -- hooks for subclasses ------------------------------------------------------------
    @classmethod  # noqa: B027 - optional hook: most predictors import nothing heavy
    def preload(cls) -> None:
        """Import heavy modelling libraries now, so that timing a later forecast does not
        include a one-time import (statsmodels, prophet)."""

    def _accept(self, value: float) -> None:  # noqa: B027 - optional hook
        """Called after ``value`` was appended to the history (incremental models update here)."""

    @abstractmethod
    def _forecast(self) -> float:
        """Model forecast of the next value in raw units; only called with enough points."""
