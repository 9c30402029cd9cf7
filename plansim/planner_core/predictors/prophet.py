"""Prophet predictor: a fresh default Prophet model per forecast, fitted on a sliding window.

The window holds the last ``window_size`` accepted points (log1p space when enabled); a window
of fewer than 5 points is not fitted (the last value is the forecast). Time is
synthetic: point k (counting accepted points only, so skipped leading zeros do not advance time)
sits at 2024-01-01 + k * ``step_s`` seconds; the forecast is the model's ``yhat`` at the next
step, mapped back with ``expm1`` in log1p mode and clamped at 0. At least 5 points are needed.

Cost control (Prophet is by far the slowest predictor): the forecast is cached until the next
observation (so the planner may ask repeatedly); uncertainty sampling is off (only ``yhat`` is
used); the MAP fit uses BFGS rather than Prophet's default Newton for short series (the same
optimum to about 1e-4 relative, about 3x faster); without seasonal terms the next value is read
from the fitted trend directly (``next_yhat``); cmdstanpy/prophet logging is silenced. Fits are
not warm-started from the previous window's parameters: tried, the optimiser then often stops at
its starting point.
"""

from __future__ import annotations

import logging
import math
import warnings
from collections import deque
from dataclasses import dataclass

import numpy as np

from plansim.params import param
from plansim.planner_core.predictors.base import LoadPredictor, Log1pParams

PROPHET_MINIMUM_DATA_POINTS = 5
_EPOCH = np.datetime64("2024-01-01T00:00:00", "ms")


def _silence_prophet_logging() -> None:
    import cmdstanpy

    # get_logger() configures the cmdstanpy logger on its first call only (lru_cache), so call it
    # before lowering the level or it resets the level to DEBUG later.
    cmdstanpy.utils.get_logger()
    # CRITICAL, not ERROR: a failed BFGS run is logged as an error by cmdstanpy although Prophet
    # then retries with Newton and succeeds; only a fit that fails both ways matters, and that
    # reaches the caller as an exception.
    for name in ("cmdstanpy", "prophet", "prophet.plot"):
        logger = logging.getLogger(name)
        logger.setLevel(logging.CRITICAL)
        logger.propagate = False


@dataclass(frozen=True, slots=True)
class ProphetParams(Log1pParams):
    prophet_window_size: int = param(
        50,
        ge=1,
        help="points in the sliding window Prophet is fitted on (under 5 it never "
        "fits and forecasts the last value, as the reference)",
    )
    # The planner's own field (PlannerConfig declares it): Prophet's synthetic time step.
    throughput_adjustment_interval_seconds: float = param(
        180.0, gt=0, help="seconds between points on Prophet's time axis (the throughput interval)"
    )


class ProphetPredictor(LoadPredictor):
    Params = ProphetParams
    tune_order = None  # a fit per interval, the slowest by far: the tuning preset skips it

    @classmethod
    def from_params(cls, params: ProphetParams) -> ProphetPredictor:
        return cls(
            window_size=params.prophet_window_size,
            step_s=params.throughput_adjustment_interval_seconds,
            log1p=params.load_predictor_log1p,
        )

    def __init__(
        self, *, window_size: int = 50, step_s: float = 180.0, log1p: bool = False
    ) -> None:
        super().__init__(minimum_data_points=PROPHET_MINIMUM_DATA_POINTS, log1p=log1p)
        if window_size < 1:
            raise ValueError("window_size must be >= 1")
        if not step_s > 0:
            raise ValueError("step_s must be > 0")
        self.window_size = int(window_size)
        self.step_ms = float(step_s) * 1000.0
        self._window: deque[tuple[int, float]] = deque(maxlen=self.window_size)
        self._cached: float | None = None

    @classmethod
    def preload(cls) -> None:
        import prophet  # noqa: F401

        _silence_prophet_logging()

    def _accept(self, value: float) -> None:
        step = len(self._values) - 1
        self._window.append((step, math.log1p(value) if self.log1p else value))
        self._cached = None

    def _forecast(self) -> float:
        if len(self._window) < PROPHET_MINIMUM_DATA_POINTS:
            # A window under the minimum never fits (the reference counts its buffer).
            return self.get_last_value()
        if self._cached is None:
            self._cached = self._fit_and_predict()
        return self._cached

    def _fit_and_predict(self) -> float:
        import pandas as pd
        from prophet import Prophet

        _silence_prophet_logging()
        steps = np.array([s for s, _ in self._window], dtype=float)
        y = np.array([v for _, v in self._window], dtype=float)
        frame = pd.DataFrame({"ds": self._timestamps(steps), "y": y})
        future = pd.DataFrame({"ds": self._timestamps(np.array([steps[-1] + 1.0]))})
        with warnings.catch_warnings():
            # Prophet's own pandas deprecation warnings are noise to a plansim user.
            warnings.simplefilter("ignore")
            model = Prophet(uncertainty_samples=0)
            model.fit(frame, algorithm="BFGS")
            yhat = next_yhat(model, future)
        return math.expm1(yhat) if self.log1p else yhat

    def _timestamps(self, steps: np.ndarray):
        import pandas as pd

        offsets = (steps * self.step_ms).astype("int64").astype("timedelta64[ms]")
        return pd.to_datetime(_EPOCH + offsets)


def next_yhat(model, future) -> float:
    """``yhat`` of a fitted Prophet model at the single row of ``future``. Without seasonalities
    or regressors (the usual case: a window spans less than two days of synthetic time) yhat is
    the trend alone, computed directly; ``Prophet.predict`` would spend most of its time building
    empty seasonal feature tables."""
    if model.seasonalities or model.extra_regressors:
        return float(model.predict(future)["yhat"].iloc[0])
    prepared = model.setup_dataframe(future.copy())
    return float(np.asarray(model.predict_trend(prepared))[0])
