"""Prophet predictor: windowing, synthetic time axis and a short tracking check."""

import itertools
import logging

import numpy as np
import pytest

from plansim.planner_core.predictors import make_predictor


def test_fewer_than_five_points_returns_last_value_without_fitting():
    p = make_predictor("prophet")
    for x in [3, 4, 5, 6]:
        p.observe(x)
    assert p.predict_next() == 6.0


def test_window_keeps_the_last_points_and_steps_skip_leading_zeros():
    p = make_predictor("prophet", prophet_window_size=3)
    for x in [0, 0, 1, 2, 3, 4]:
        p.observe(x)
    assert list(p._window) == [(1, 2.0), (2, 3.0), (3, 4.0)]


def test_a_window_under_five_points_never_fits_and_forecasts_the_last_value():
    # The reference counts its buffer (the window) against the 5-point minimum.
    p = make_predictor("prophet", prophet_window_size=1)
    for x in [3, 5, 8, 13, 21, 34]:
        p.observe(x)
    assert p.predict_next() == 34.0 and not p.last_forecast_failed


def test_prophet_tracks_a_ramp_and_is_silent(caplog, capfd):
    series = 100 + 5.0 * np.arange(14)
    p = make_predictor("prophet", throughput_adjustment_interval_seconds=60)
    p.warm(series[:10])
    with caplog.at_level(logging.INFO):
        for x in series[10:]:
            forecast = p.predict_next()
            assert not p.last_forecast_failed, p.last_error
            assert forecast == pytest.approx(x, rel=0.01)
            assert p.predict_next() == forecast  # cached until the next observation
            p.observe(x)
    assert "cmdstanpy" not in capfd.readouterr().err
    assert not [r for r in caplog.records if r.name.startswith(("cmdstanpy", "prophet"))]


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::FutureWarning")
def test_trend_shortcut_equals_prophet_predict():
    import pandas as pd
    from prophet import Prophet

    from plansim.planner_core.predictors.prophet import _silence_prophet_logging, next_yhat

    _silence_prophet_logging()
    rng = np.random.default_rng(5)
    frame = pd.DataFrame(
        {"ds": pd.date_range("2024-01-01", periods=20, freq="60s"), "y": rng.normal(50, 5, 20)}
    )
    future = pd.DataFrame({"ds": [frame["ds"].iloc[-1] + pd.Timedelta("60s")]})
    model = Prophet(uncertainty_samples=0)
    model.fit(frame, algorithm="BFGS")
    assert not model.seasonalities  # 20 minutes of data: the shortcut applies
    assert next_yhat(model, future) == pytest.approx(
        float(model.predict(future)["yhat"].iloc[0]), rel=1e-12
    )


def test_synthetic_time_axis_steps_by_the_interval():
    p = make_predictor("prophet", throughput_adjustment_interval_seconds=90)
    stamps = p._timestamps(np.array([0.0, 1.0, 3.0]))
    assert str(stamps[0]) == "2024-01-01 00:00:00"
    assert [(b - a).total_seconds() for a, b in itertools.pairwise(stamps)] == [90.0, 180.0]
