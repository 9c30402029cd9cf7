"""Kalman local-linear-trend predictor: hand-computed filter steps and tracking."""

import math
from fractions import Fraction as Fr

import numpy as np
import pytest

from plansim.planner_core.predictors import make_predictor


def _kalman(**params):
    return make_predictor("kalman", kalman_q_level=1, kalman_q_trend=0.1, kalman_r=10, **params)


def test_first_point_sets_level_and_zero_trend():
    p = _kalman(kalman_min_points=1)
    p.observe(10)
    assert p.state == (10.0, 0.0)
    assert p.predict_next() == 10.0
    np.testing.assert_array_equal(p.covariance, np.eye(2) * 1000)


def test_filter_steps_by_hand():
    # Observations 10, 12, 14 with Q = diag(1, 0.1), R = 10, P0 = 1000 I, x0 = [10, 0].
    # Step 2: P' = F P F^T + Q = [[2001, 1000], [1000, 1000.1]], S = 2011,
    # K = [2001, 1000] / 2011, innovation 2 -> x = [10 + 4002/2011, 2000/2011].
    p = _kalman(kalman_min_points=1)
    p.observe(10)
    p.observe(12)
    level2, trend2 = 10 + Fr(4002, 2011), Fr(2000, 2011)
    assert p.state == pytest.approx((float(level2), float(trend2)), rel=1e-12)
    assert p.predict_next() == pytest.approx(float(level2 + trend2), rel=1e-12)  # 12.98458...
    # Posterior P = P' - K P'[0, :]: [[20010/2011, 10000/2011], [., 1000.1 - 10^6/2011]].
    p00, p01, p11 = Fr(20010, 2011), Fr(10000, 2011), Fr(10001, 10) - Fr(1000000, 2011)
    np.testing.assert_allclose(
        p.covariance, [[float(p00), float(p01)], [float(p01), float(p11)]], rtol=1e-12
    )
    # Step 3 (observe 14): P' = [[p00 + 2 p01 + p11 + 1, p01 + p11], [., p11 + 0.1]].
    q00, q01 = p00 + 2 * p01 + p11 + 1, p01 + p11
    s = q00 + 10
    innovation = 14 - (level2 + trend2)
    level3 = level2 + trend2 + q00 / s * innovation
    trend3 = trend2 + q01 / s * innovation
    p.observe(14)
    assert p.state == pytest.approx((float(level3), float(trend3)), rel=1e-12)
    assert p.predict_next() == pytest.approx(15.9416024, rel=1e-7)


def test_predict_next_does_not_advance_the_filter():
    p = _kalman(kalman_min_points=1)
    for x in [10, 12, 14]:
        p.observe(x)
    first = p.predict_next()
    assert p.predict_next() == first
    assert p.predict_next() == first


def test_forecasting_waits_for_kalman_min_points():
    p = _kalman(kalman_min_points=3)
    p.observe(10)
    p.observe(12)
    assert p.predict_next() == 12.0  # constant fallback
    p.observe(14)
    assert p.predict_next() > 14.0  # the filter's trend now shows


def test_log1p_mode_filters_log1p_values():
    p = _kalman(kalman_min_points=1, load_predictor_log1p=True)
    p.observe(math.expm1(3.0))
    assert p.state == pytest.approx((3.0, 0.0))
    assert p.predict_next() == pytest.approx(math.expm1(3.0))


def test_raw_forecast_is_clamped_at_zero():
    p = _kalman(kalman_min_points=1)
    for x in [100, 60, 20]:  # falling by 40 per step: the next level extrapolates below 0
        p.observe(x)
    level, trend = p.state
    assert level + trend < 0
    assert p.predict_next() == 0.0


def _one_step(name, series, warm, **params):
    p = make_predictor(name, **params)
    p.warm(series[:warm])
    forecasts = []
    for x in series[warm:]:
        forecasts.append(p.predict_next())
        p.observe(x)
    return np.array(forecasts)


def test_kalman_tracks_a_constant():
    forecasts = _one_step("kalman", np.full(30, 50.0), 10)
    np.testing.assert_allclose(forecasts, 50.0, rtol=1e-9)


def test_kalman_tracks_a_linear_ramp():
    series = 100 + 5.0 * np.arange(60)
    forecasts = _one_step("kalman", series, 20)
    # Once the trend is learnt the one-step error is a small fraction of the step (5).
    assert np.max(np.abs(forecasts[10:] - series[30:])) < 0.5


def test_kalman_tracks_a_sinusoid_better_than_its_mean():
    t = np.arange(120)
    series = 200 + 50 * np.sin(2 * np.pi * t / 30)
    forecasts = _one_step("kalman", series, 30, kalman_r=1)
    errors = np.abs(forecasts - series[30:])
    assert np.mean(errors) < 0.25 * np.mean(np.abs(series[30:] - 200))
