"""Constant (last-value) predictor: the next interval looks like the last one."""

from __future__ import annotations

from plansim.planner_core.predictors.base import LoadPredictor


class ConstantPredictor(LoadPredictor):
    """Forecast = last accepted value (0 before any). ``log1p`` has no effect."""

    tune_order = 1

    def __init__(self, *, log1p: bool = False) -> None:
        super().__init__(minimum_data_points=1, log1p=log1p)

    def _forecast(self) -> float:
        return self.get_last_value()
