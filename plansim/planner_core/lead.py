"""Sizing one start-up time ahead: what a worker started now must carry when it is ready.

- ``StartupTracker``: the start-up times the planner observes (from the tick a worker is first
  seen starting to the tick it is seen ready), per pool; the lead is a high quantile of them,
  a guess until one is seen. A live planner can measure this too: it needs only the worker
  counts every tick.
- ``LeadForecast``: the demand ``lead_s`` seconds ahead from the load predictor's one-step
  forecast: the forecast, plus the rising trend of the observed rates over the lead (a slope
  beyond two of its standard errors: bursts are no trend), plus
  ``z`` standard deviations of the predictor's own one-step errors (grown with the square
  root of the steps ahead). It also tells a forecast surprise: an observed rate above the
  forecast made for it by more than ``SURPRISE_SIGMAS`` of those errors.

Rates are requests per second; times are seconds.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np

# Start-ups kept, and the quantile of them the lead uses.
STARTUPS_KEPT = 32
LEAD_QUANTILE = 90.0
# One-step errors kept, intervals in the trend fit, and the least errors before they count.
ERRORS_KEPT = 24
TREND_POINTS = 4
MIN_ERRORS = 4
SURPRISE_SIGMAS = 2.0
# A slope counts as a trend beyond this many of its standard errors.
TREND_SIGMAS = 2.0


class StartupTracker:
    """Observed start-up times of one pool's workers."""

    def __init__(self, guess_s: float) -> None:
        self.guess_s = float(guess_s)
        self._pending: deque[float] = deque()  # when each starting worker was first seen
        self._ready: int | None = None
        self.samples: deque[float] = deque(maxlen=STARTUPS_KEPT)

    def observe(self, now_s: float, starting: int, ready: int) -> None:
        """One tick's counts. Workers that left ``starting`` while ``ready`` grew became ready
        (oldest first); others were cancelled and are not timed."""
        became_ready = max(ready - self._ready, 0) if self._ready is not None else 0
        self._ready = ready
        while len(self._pending) > starting:
            started = self._pending.popleft()
            if became_ready > 0:
                became_ready -= 1
                self.samples.append(now_s - started)
        while len(self._pending) < starting:
            self._pending.append(now_s)

    def lead_s(self) -> float:
        """The ``LEAD_QUANTILE``-th percentile of the observed start-ups, else the guess."""
        if not self.samples:
            return self.guess_s
        return float(np.percentile(np.asarray(self.samples), LEAD_QUANTILE))


class LeadForecast:
    """Demand ahead from one-step forecasts and their errors (one call per interval)."""

    def __init__(self) -> None:
        self._observed: deque[float] = deque(maxlen=TREND_POINTS)
        self._errors: deque[float] = deque(maxlen=ERRORS_KEPT)
        self._last_forecast: float | None = None
        self.surprise = False

    def observe(self, observed_rps: float, forecast_rps: float) -> None:
        """The interval just ended delivered ``observed_rps``; ``forecast_rps`` is the
        predictor's forecast for the next one."""
        self.surprise = False
        if self._last_forecast is not None:
            error = observed_rps - self._last_forecast
            sigma = self.sigma()
            self.surprise = sigma is not None and error > SURPRISE_SIGMAS * sigma
            self._errors.append(error)
        self._observed.append(observed_rps)
        self._last_forecast = forecast_rps

    def sigma(self) -> float | None:
        """Root mean square of the one-step errors (None before ``MIN_ERRORS``)."""
        if len(self._errors) < MIN_ERRORS:
            return None
        return math.sqrt(float(np.mean(np.square(self._errors))))

    def slope_per_interval(self) -> float:
        """The least-squares slope of the last observed rates, per interval; 0 unless it
        exceeds ``TREND_SIGMAS`` of its own standard error (a trend, not one burst: a burst
        that has passed when a worker started for it is ready buys an idle worker)."""
        if len(self._observed) < 3:
            return 0.0
        y = np.asarray(self._observed)
        x = np.arange(y.size, dtype=float)
        slope, intercept = np.polyfit(x, y, 1)
        residual = y - (slope * x + intercept)
        se = math.sqrt(
            float(residual @ residual) / (y.size - 2) / float(((x - x.mean()) ** 2).sum())
        )
        return float(slope) if abs(slope) > TREND_SIGMAS * se else 0.0

    def ahead(self, forecast_rps: float, lead_s: float, interval_s: float, z: float) -> float:
        """The demand to size for when what is started now is ready ``lead_s`` from now and
        must carry the interval after: the forecast, the rising trend over ``lead_s``, and
        ``z`` standard deviations of the one-step error grown to the steps ahead."""
        steps = max(lead_s / interval_s, 0.0)
        rise = max(self.slope_per_interval(), 0.0) * steps
        sigma = self.sigma()
        band = z * sigma * math.sqrt(1.0 + steps) if sigma is not None and z > 0 else 0.0
        return max(forecast_rps + rise + band, 0.0)
