"""Kalman predictor: a local-linear-trend state-space model filtered with numpy.

State ``[level, trend]``; transition F = [[1, 1], [0, 1]]; observation H = [1, 0];
process noise Q = diag(q_level, q_trend); observation noise R = r; initial covariance 1000 * I.
The first accepted point sets the state to ``[z, 0]``; every later point runs one predict and one
update step. ``z = log1p(x)`` in log1p mode, else ``x``.

The forecast is the level of the one-step prediction F x (computed without changing the filter,
so asking twice in one interval is harmless), mapped back with ``expm1`` in log1p mode and
clamped at 0. Forecasting starts after ``min_points`` accepted observations (the Planner Design
document's rule); before that the last value is returned.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from plansim.params import param
from plansim.planner_core.predictors.base import LoadPredictor, Log1pParams

_F = np.array([[1.0, 1.0], [0.0, 1.0]])
_INITIAL_VARIANCE = 1000.0


@dataclass(frozen=True, slots=True)
class KalmanParams(Log1pParams):
    kalman_q_level: float = param(1.0, ge=0, help="process noise of the level")
    kalman_q_trend: float = param(0.1, ge=0, help="process noise of the trend")
    kalman_r: float = param(10.0, ge=0, help="observation noise")
    kalman_min_points: int = param(5, ge=1, help="observations before the first forecast")


class KalmanPredictor(LoadPredictor):
    Params = KalmanParams
    tune_order = 0

    @classmethod
    def from_params(cls, params: KalmanParams) -> KalmanPredictor:
        return cls(
            q_level=params.kalman_q_level,
            q_trend=params.kalman_q_trend,
            r=params.kalman_r,
            min_points=params.kalman_min_points,
            log1p=params.load_predictor_log1p,
        )

    def __init__(
        self,
        *,
        q_level: float = 1.0,
        q_trend: float = 0.1,
        r: float = 10.0,
        min_points: int = 5,
        log1p: bool = False,
    ) -> None:
        super().__init__(minimum_data_points=min_points, log1p=log1p)
        # Floors keep the covariance positive definite when a user asks for zero noise.
        self._q = np.diag([max(1e-12, float(q_level)), max(1e-12, float(q_trend))])
        self._r = max(1e-9, float(r))
        self._x: np.ndarray | None = None
        self._p = np.eye(2) * _INITIAL_VARIANCE

    @property
    def state(self) -> tuple[float, float] | None:
        """Filtered ``(level, trend)`` in model space, ``None`` before the first point."""
        return None if self._x is None else (float(self._x[0]), float(self._x[1]))

    @property
    def covariance(self) -> np.ndarray:
        return self._p.copy()

    def _accept(self, value: float) -> None:
        z = math.log1p(value) if self.log1p else value
        if self._x is None:
            self._x = np.array([z, 0.0])
            return
        x_prior = _F @ self._x
        p_prior = _F @ self._p @ _F.T + self._q
        innovation_var = p_prior[0, 0] + self._r
        gain = p_prior[:, 0] / innovation_var
        self._x = x_prior + gain * (z - x_prior[0])
        # (I - K H) P_prior, symmetrised against round-off drift.
        p_post = p_prior - np.outer(gain, p_prior[0, :])
        self._p = 0.5 * (p_post + p_post.T)

    def _forecast(self) -> float:
        if self._x is None:
            return self.get_last_value()
        level = float(self._x[0] + self._x[1])
        return math.expm1(level) if self.log1p else level
