"""Base rules shared by every load predictor (reference planner_core.md 2.1)."""

import math

import pytest

from plansim.planner_core.predictors import PREDICTOR_NAMES, make_predictor
from plansim.planner_core.predictors.base import LoadPredictor


@pytest.mark.parametrize("name", ["constant", "kalman", "arima"])
def test_leading_zeros_are_skipped(name):
    p = make_predictor(name)
    for x in [0, 0, 0, 5, 0, 7]:
        p.observe(x)
    assert p.values == (5.0, 0.0, 7.0)


def test_non_finite_and_negative_readings_become_zero():
    p = make_predictor("constant")
    for x in [3, math.nan, math.inf, -math.inf, -2]:
        p.observe(x)
    assert p.values == (3.0, 0.0, 0.0, 0.0, 0.0)


def test_non_finite_reading_counts_as_idle_before_traffic():
    p = make_predictor("constant")
    p.observe(math.nan)
    p.observe(math.inf)
    assert p.num_points == 0
    assert p.predict_next() == 0.0


def test_interior_zeros_are_kept():
    p = make_predictor("constant")
    for x in [4, 0]:
        p.observe(x)
    assert p.predict_next() == 0.0
    assert p.values == (4.0, 0.0)


def test_warm_rearms_the_idle_skip_and_keeps_history():
    p = make_predictor("constant")
    p.warm([0, 3, 0, 5])
    p.observe(0)  # post-deploy idle stretch: dropped again
    p.observe(0)
    assert p.values == (3.0, 0.0, 5.0)
    p.observe(2)
    p.observe(0)  # after traffic resumes, zeros are kept again
    assert p.values == (3.0, 0.0, 5.0, 2.0, 0.0)


def test_reset_idle_skip_rearms_explicitly():
    p = make_predictor("constant")
    p.observe(1)
    p.reset_idle_skip()
    p.observe(0)
    assert p.values == (1.0,)


def test_empty_predictor_forecasts_zero():
    for name in PREDICTOR_NAMES:
        p = make_predictor(name)
        assert p.get_last_value() == 0.0
        assert p.predict_next() == 0.0


def test_below_minimum_points_falls_back_to_last_value():
    p = make_predictor("kalman", kalman_min_points=4)
    for x in [10, 20, 30]:
        p.observe(x)
    assert p.predict_next() == 30.0  # constant fallback, not the trend extrapolation


class _Exploding(LoadPredictor):
    name = "exploding"

    def __init__(self):
        super().__init__(minimum_data_points=1)

    def _forecast(self):
        raise ValueError("singular matrix")


class _NotFinite(LoadPredictor):
    name = "nan"

    def __init__(self):
        super().__init__(minimum_data_points=1)

    def _forecast(self):
        return math.nan


def test_failed_forecast_falls_back_to_last_value_and_is_flagged():
    p = _Exploding()
    p.observe(7)
    assert p.predict_next() == 7.0
    assert p.last_forecast_failed
    assert "singular matrix" in p.last_error


def test_non_finite_forecast_counts_as_failed():
    p = _NotFinite()
    p.observe(7)
    assert p.predict_next() == 7.0
    assert p.last_forecast_failed


def test_failure_flag_clears_on_next_good_forecast():
    p = make_predictor("constant")
    p.observe(1)
    p.last_forecast_failed = True
    p.predict_next()
    assert not p.last_forecast_failed
