"""ARIMA predictor (statsmodels) with a cheap automatic order search.

Order search (at the first forecast with at least 5 points, and again whenever the history has
doubled since the last search):

1. ``d``: the number of differences (0..2) after which a KPSS level-stationarity test no longer
   rejects at 5% (the usual auto-ARIMA rule), with the short lag truncation
   ``int(4 (n / 100) ** 0.25)``: statsmodels' data-dependent lag choice rejects white noise of
   5-10 points 12-32% of the time, and a spurious difference plus drift extrapolates far off.
   A constant differenced series stops early.
2. ``(p, q)`` in {0, 1, 2} x {0, 1, 2}, each fitted by maximum likelihood, ranked by AICc (the
   small-sample AIC, as R's auto.arima: plain AIC picks near-non-invertible MA models from 10
   points whose forecasts run away); ties keep the simpler (smaller p + q, then smaller p)
   order. A constant (d = 0) or drift (d = 1) term is included, as auto-ARIMA does for d < 2.

Collapse fallback (reference behaviour): when raw values were requested and the chosen order is
(0, d, 0), the history is searched again in log1p space and the predictor switches to log1p mode;
if that refit fails it stays in raw mode.

Between searches new points are filtered in with the fitted parameters (no re-estimation), so a
forecast costs one Kalman-filter step over the new points (a pass over the whole history for
d = 1, see ``_model_forecast``). The reference fits once and only updates, which freezes
parameters estimated from the first 5 points forever; searching again on doubling (5, 10, 20,
40, ... points) keeps the total fitting cost within twice that of the final search.

With every stored value equal the forecast is that value (a fitted model would drift towards its
mean). A failed forecast drops the pending points and falls back to the last value (see
``LoadPredictor``). Model work runs with single-threaded BLAS (``blas.py``: 10-30x faster on a
busy host).
"""

from __future__ import annotations

import math
import warnings

import numpy as np

from plansim.planner_core.predictors.base import LoadPredictor, Log1pParams
from plansim.planner_core.predictors.blas import single_threaded_blas

ARIMA_MINIMUM_DATA_POINTS = 5
_MAX_D = 2
_PQ_GRID = tuple((p, q) for p in range(3) for q in range(3))


class ArimaPredictor(LoadPredictor):
    Params = Log1pParams
    tune_order = 2

    @classmethod
    def from_params(cls, params: Log1pParams) -> ArimaPredictor:
        return cls(log1p=params.load_predictor_log1p)

    def __init__(self, *, log1p: bool = False) -> None:
        super().__init__(minimum_data_points=ARIMA_MINIMUM_DATA_POINTS, log1p=log1p)
        self._results = None  # statsmodels ARIMAResults for the data filtered so far
        self._pending: list[float] = []
        self._fitted_points = 0
        self.order: tuple[int, int, int] | None = None

    @classmethod
    def preload(cls) -> None:
        import statsmodels.tsa.arima.model
        import statsmodels.tsa.stattools  # noqa: F401

    def _accept(self, value: float) -> None:
        if self._results is not None:
            self._pending.append(value)

    def _forecast(self) -> float:
        history = self._values
        if min(history) == max(history):
            return history[-1]
        self.preload()  # load scipy's BLAS before single_threaded_blas() looks for it
        with single_threaded_blas():
            return self._model_forecast(history)

    def _model_forecast(self, history: list[float]) -> float:
        try:
            if self._results is None or len(history) >= 2 * self._fitted_points:
                self._fit(np.asarray(history, dtype=float))
            elif self._pending:
                new = self._to_model(np.asarray(self._pending, dtype=float))
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    if self.order[1] == 1:
                        # extend() misplaces the drift term of a d = 1 model with trend "t"
                        # (forecasts off by several units in a check against append()), so
                        # re-filter the whole history with the fitted parameters.
                        self._results = self._results.append(new, refit=False)
                    else:
                        # Filters only the new points from the last state: ~5x cheaper,
                        # identical forecasts to append() for d = 0 ("c") and d = 2 ("n").
                        self._results = self._results.extend(new)
            self._pending.clear()
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                forecast = float(np.asarray(self._results.forecast(1))[0])
        except Exception:
            self._pending.clear()
            raise
        return math.expm1(forecast) if self.log1p else forecast

    def _to_model(self, raw: np.ndarray) -> np.ndarray:
        return np.log1p(raw) if self.log1p else raw

    def _fit(self, raw: np.ndarray) -> None:
        results, order = search_arima(self._to_model(raw))
        if not self.log1p and order[0] == 0 and order[2] == 0:
            try:
                results, order = search_arima(np.log1p(raw))
            except (ArithmeticError, ValueError, RuntimeError, IndexError, TypeError):
                pass  # keep the raw-space model
            else:
                self.log1p = True
        self._results, self.order = results, order
        self._fitted_points = raw.size


def choose_d(y: np.ndarray, *, alpha: float = 0.05, max_d: int = _MAX_D) -> int:
    """Differences needed before KPSS stops rejecting level stationarity at ``alpha``."""
    from statsmodels.tsa.stattools import kpss

    series = np.asarray(y, dtype=float)
    for d in range(max_d + 1):
        if d == max_d or series.size < 4 or np.ptp(series) == 0.0:
            return d
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            lags = max(1, int(4 * (series.size / 100) ** 0.25))
            p_value = kpss(series, regression="c", nlags=lags)[1]
        if p_value >= alpha:
            return d
        series = np.diff(series)
    return max_d


def search_arima(y: np.ndarray):
    """Best ``(results, (p, d, q))`` over the small grid by AICc; raises ``ValueError`` when no
    order can be fitted."""
    from statsmodels.tsa.arima.model import ARIMA

    d = choose_d(y)
    trend = {0: "c", 1: "t"}.get(d, "n")
    best = None
    for p, q in sorted(_PQ_GRID, key=lambda pq: (pq[0] + pq[1], pq[0])):
        if p + q + 2 > y.size - d:  # not enough points for the parameters
            continue
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                results = ARIMA(y, order=(p, d, q), trend=trend).fit()
        except (ArithmeticError, ValueError, RuntimeError, IndexError, np.linalg.LinAlgError):
            continue
        aicc = float(results.aicc)
        if math.isfinite(aicc) and (best is None or aicc < best[0]):
            best = (aicc, results, (p, d, q))
    if best is None:
        raise ValueError(f"no ARIMA order could be fitted to {y.size} points")
    return best[1], best[2]
