"""Three predictors (request count, average ISL, average OSL) fed with the planner's rules.

Feeding rules (reference ``BuiltinLoadPredict``): the request count is always observed. Once a
window with traffic has been seen, an idle window (``num_req == 0``) feeds the last observed
ISL/OSL instead of 0, so time-based predictors keep advancing without learning fake zero lengths;
before that an idle window feeds 0 (which the leading-idle skip drops). A missing or non-finite
average is not fed. ``warm`` feeds a sequence of windows, then re-arms the leading-idle skip and
forgets that traffic was seen.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from plansim.planner_core.predictors.base import LoadPredictor
from plansim.schema import BACKTEST_SERIES

BUCKET_COLUMNS = BACKTEST_SERIES


@dataclass(frozen=True, slots=True)
class TrafficForecast:
    """Forecast of the next interval: request count and average input/output lengths (tokens)."""

    num_req: float
    isl: float
    osl: float
    failed: tuple[str, ...] = ()  # series whose forecast fell back to the last value


class TrafficForecaster:
    """Request-count, ISL and OSL predictors built by ``build`` (a no-argument factory)."""

    SERIES = ("num_req", "isl", "osl")

    def __init__(self, build: Callable[[], LoadPredictor]) -> None:
        self.num_req = build()
        self.isl = build()
        self.osl = build()
        self._seen_traffic = False
        self._last_isl: float | None = None
        self._last_osl: float | None = None

    @property
    def predictors(self) -> dict[str, LoadPredictor]:
        return {"num_req": self.num_req, "isl": self.isl, "osl": self.osl}

    def observe(
        self, num_req: float, isl: float | None, osl: float | None
    ) -> tuple[float, float | None, float | None]:
        """Feed one window: requests offered and their average ISL/OSL (``None`` if unknown).
        Returns the values handed to the three predictors (``None``: that series was not fed)."""
        num_req = float(num_req) if _finite(num_req) and num_req > 0 else 0.0
        self.num_req.observe(num_req)
        fed_isl: float | None
        fed_osl: float | None
        if num_req > 0:
            self._seen_traffic = True
            fed_isl = float(isl) if _finite(isl) else None
            fed_osl = float(osl) if _finite(osl) else None
            if fed_isl is not None:
                self._last_isl = fed_isl
            if fed_osl is not None:
                self._last_osl = fed_osl
        else:
            fed_isl = self._last_isl if self._seen_traffic else 0.0
            fed_osl = self._last_osl if self._seen_traffic else 0.0
        if fed_isl is not None:
            self.isl.observe(fed_isl)
        if fed_osl is not None:
            self.osl.observe(fed_osl)
        return num_req, fed_isl, fed_osl

    def warm(self, windows: Iterable[tuple[float, float | None, float | None]]) -> None:
        """Warm start from ``(num_req, isl, osl)`` windows, e.g. trace buckets."""
        for num_req, isl, osl in windows:
            self.observe(num_req, isl, osl)
        for predictor in self.predictors.values():
            predictor.reset_idle_skip()
        self._seen_traffic = False

    def predict(self) -> TrafficForecast:
        """One-step forecasts of the three series."""
        values = {}
        failed = []
        for series, predictor in self.predictors.items():
            values[series] = predictor.predict_next()
            if predictor.last_forecast_failed:
                failed.append(series)
        return TrafficForecast(**values, failed=tuple(failed))


def _finite(value: float | None) -> bool:
    return value is not None and math.isfinite(float(value))
