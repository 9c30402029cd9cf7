"""Sizing one start-up time ahead: observed start-ups, and the demand a worker started now
must carry when it is ready (hand-computed)."""

from __future__ import annotations

import math

import pytest

from plansim.planner_core.lead import LeadForecast, StartupTracker


def test_startup_timed_from_first_seen_starting_to_ready():
    t = StartupTracker(guess_s=30.0)
    assert t.lead_s() == 30.0  # nothing observed: the guess
    t.observe(0.0, starting=0, ready=2)
    t.observe(5.0, starting=1, ready=2)  # scale-up seen at 5 s
    for now in range(10, 65, 5):
        t.observe(float(now), starting=1, ready=2)
    t.observe(65.0, starting=0, ready=3)  # ready at 65 s: 60 s
    assert list(t.samples) == [60.0] and t.lead_s() == 60.0
    t.observe(70.0, starting=1, ready=3)
    t.observe(75.0, starting=0, ready=3)  # cancelled, not ready: not timed
    assert list(t.samples) == [60.0]


def ramp() -> LeadForecast:
    # A constant predictor (the forecast for the next interval is the last observed rate) on
    # 1, 1, 1, 1 req/s, then a ramp 2, 3, 4: one-step errors 0, 0, 0, 1, 1, 1.
    f = LeadForecast()
    for rate in (1, 1, 1, 1, 2, 3, 4):
        f.observe(float(rate), float(rate))
    return f


def test_demand_leads_the_ramp_by_the_startup_time():
    f = ramp()
    assert f.slope_per_interval() == pytest.approx(1.0)  # the last four: 1, 2, 3, 4
    # 60 s intervals. A worker started now with a 60 s start-up is ready for the interval
    # after next: the ramp is at 4 + 1 there; with a 120 s start-up, at 4 + 2.
    assert f.ahead(4.0, lead_s=60.0, interval_s=60.0, z=0.0) == pytest.approx(5.0)
    assert f.ahead(4.0, lead_s=120.0, interval_s=60.0, z=0.0) == pytest.approx(6.0)
    # No start-up, no lead.
    assert f.ahead(4.0, lead_s=0.0, interval_s=60.0, z=0.0) == pytest.approx(4.0)


def test_error_band_grows_with_the_steps_ahead():
    f = ramp()
    sigma = math.sqrt(3 / 6)  # rms of 0, 0, 0, 1, 1, 1
    assert f.sigma() == pytest.approx(sigma)
    # One step ahead of the next interval: sigma * sqrt(2) = 1.
    assert f.ahead(4.0, lead_s=60.0, interval_s=60.0, z=1.0) == pytest.approx(6.0)


def test_a_falling_trend_does_not_lower_the_demand():
    f = LeadForecast()
    for rate in (4, 3, 2, 1):
        f.observe(float(rate), float(rate))
    assert f.ahead(1.0, lead_s=60.0, interval_s=60.0, z=0.0) == pytest.approx(1.0)


def test_a_burst_is_no_trend():
    # The last four rates 0, 0, 0, 10: least-squares slope 15 / 5 = 3 per interval, residuals
    # 2, -1, -4, 3 (sum of squares 30), standard error sqrt(30 / 2 / 5) = 1.73: a slope of 3 is
    # within two standard errors, so no rise is added to the forecast.
    f = LeadForecast()
    for rate in (0, 0, 0, 10):
        f.observe(float(rate), float(rate))
    assert f.slope_per_interval() == 0.0
    assert f.ahead(10.0, lead_s=60.0, interval_s=60.0, z=0.0) == pytest.approx(10.0)
    # 0, 1, 2, 4: slope 1.3, residuals 0.2, -0.1, -0.4, 0.3 (0.3 summed squares), standard
    # error sqrt(0.3 / 2 / 5) = 0.17: a trend, 1.3 per interval ahead.
    f = LeadForecast()
    for rate in (0, 1, 2, 4):
        f.observe(float(rate), float(rate))
    assert f.slope_per_interval() == pytest.approx(1.3)
    assert f.ahead(4.0, lead_s=60.0, interval_s=60.0, z=0.0) == pytest.approx(5.3)


def test_surprise_beyond_twice_the_forecast_error():
    f = LeadForecast()
    for _ in range(6):
        f.observe(1.0, 1.0)  # five errors of 0 once the first forecast exists
    assert not f.surprise
    f.observe(5.0, 5.0)  # 4 over the forecast of 1, errors so far 0: a surprise
    assert f.surprise
    f.observe(5.0, 5.0)  # on forecast: none
    assert not f.surprise
