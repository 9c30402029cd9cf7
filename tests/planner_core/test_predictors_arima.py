"""ARIMA predictor: order search, collapse fallback, tracking known series."""

import numpy as np
import pytest

from plansim.planner_core.predictors import make_predictor
from plansim.planner_core.predictors.arima import choose_d
from plansim.planner_core.predictors.blas import single_threaded_blas


def _one_step(series, warm, **params):
    p = make_predictor("arima", **params)
    p.warm(series[:warm])
    forecasts = []
    for x in series[warm:]:
        forecasts.append(p.predict_next())
        assert not p.last_forecast_failed, p.last_error
        p.observe(x)
    return p, np.array(forecasts)


def test_fewer_than_five_points_returns_last_value():
    p = make_predictor("arima")
    for x in [1, 5, 2, 8]:
        p.observe(x)
    assert p.predict_next() == 8.0
    assert p.order is None  # no model fitted yet


def test_identical_values_forecast_that_value():
    _p, forecasts = _one_step(np.full(12, 42.0), 6)
    np.testing.assert_array_equal(forecasts, 42.0)


def test_choose_d_differences_a_ramp_but_not_noise():
    rng = np.random.default_rng(1)
    assert choose_d(rng.normal(100, 5, 60)) == 0
    assert choose_d(np.arange(60.0) * 3 + rng.normal(0, 1, 60)) >= 1


def test_arima_tracks_a_linear_ramp():
    series = 100 + 5.0 * np.arange(50)
    _, forecasts = _one_step(series, 20)
    np.testing.assert_allclose(forecasts, series[20:], rtol=1e-3)


def test_arima_tracks_a_sinusoid():
    t = np.arange(90)
    series = 200 + 50 * np.sin(2 * np.pi * t / 30)
    p, forecasts = _one_step(series, 40)
    errors = np.abs(forecasts - series[40:])
    # An AR model captures the oscillation: far better than the mean or the last value.
    assert np.mean(errors) < 0.1 * np.mean(np.abs(series[40:] - 200))
    assert np.mean(errors) < 0.25 * np.mean(np.abs(np.diff(series[39:])))
    assert p.order[0] >= 1


def test_white_noise_collapses_to_log1p_and_forecasts_near_the_mean():
    rng = np.random.default_rng(7)
    series = rng.normal(1000, 10, 40)
    p, forecasts = _one_step(series, 30)
    assert p.order[0] == 0 and p.order[2] == 0  # (0, d, 0): nothing to model but a level
    assert p.log1p  # the reference collapse-to-log1p fallback switched modes
    np.testing.assert_allclose(forecasts, 1000, rtol=0.02)


def test_refits_when_history_doubles():
    rng = np.random.default_rng(3)
    series = 50 + np.cumsum(rng.normal(0, 1, 25))
    p = make_predictor("arima")
    fitted_at = []
    for x in series:
        p.observe(x)
        p.predict_next()
        fitted_at.append(p._fitted_points)
    assert sorted(set(fitted_at) - {0}) == [5, 10, 20]


@pytest.mark.parametrize("order", [(2, 0, 1), (1, 1, 1), (1, 2, 0)])
def test_incremental_update_matches_refiltering_the_whole_history(order):
    import warnings

    from statsmodels.tsa.arima.model import ARIMA

    rng = np.random.default_rng(4)
    y = 100 + np.cumsum(rng.normal(1, 3, 40))
    trend = {0: "c", 1: "t", 2: "n"}[order[1]]
    with warnings.catch_warnings(), single_threaded_blas():
        warnings.simplefilter("ignore")
        fitted = ARIMA(y[:20], order=order, trend=trend).fit()
        p = make_predictor("arima")
        p.warm(y[:20])
        p._results, p.order, p._fitted_points = fitted, order, 20
        for x in y[20:30]:
            p.observe(x)
        expected = float(fitted.append(y[20:30], refit=False).forecast(1)[0])
    assert p.predict_next() == pytest.approx(expected, rel=1e-9)
