"""TrafficForecaster: the planner's live feeding rules for request count, ISL and OSL."""

import math

from plansim.planner_core.predictors import TrafficForecaster, make_predictor


def _constant():
    return TrafficForecaster(lambda: make_predictor("constant"))


def test_idle_window_after_traffic_feeds_the_last_lengths():
    t = _constant()
    t.observe(5, 300, 40)
    assert t.observe(0, 0, 0) == (0.0, 300.0, 40.0)
    assert t.num_req.values == (5.0, 0.0)
    assert t.isl.values == (300.0, 300.0)
    assert t.osl.values == (40.0, 40.0)


def test_idle_window_before_traffic_feeds_zero_which_is_skipped():
    t = _constant()
    assert t.observe(0, 0, 0) == (0.0, 0.0, 0.0)
    assert t.isl.num_points == 0
    assert t.num_req.num_points == 0


def test_missing_average_is_not_fed():
    t = _constant()
    t.observe(5, 300, 40)
    assert t.observe(2, None, math.nan) == (2.0, None, None)
    assert t.isl.values == (300.0,)
    assert t.osl.values == (40.0,)


def test_warm_forgets_traffic_and_rearms_the_idle_skip():
    t = _constant()
    t.warm([(0, 0, 0), (4, 100, 10), (6, 200, 20)])
    t.observe(0, 0, 0)  # post-deploy idle: no traffic seen since warm-up, zeros skipped
    assert t.num_req.values == (4.0, 6.0)
    assert t.isl.values == (100.0, 200.0)


def test_predict_reports_the_three_series():
    t = _constant()
    t.observe(4, 100, 10)
    f = t.predict()
    assert (f.num_req, f.isl, f.osl, f.failed) == (4.0, 100.0, 10.0, ())


def test_warm_from_bucket_windows():
    t = _constant()
    t.warm([(3, 100.0, 10.0), (0, 0.0, 0.0), (5, 300.0, 30.0)])
    assert t.num_req.values == (3.0, 0.0, 5.0)
    assert t.isl.values == (100.0, 100.0, 300.0)  # the idle bucket repeats the last ISL
    f = t.predict()
    assert (f.num_req, f.isl, f.osl) == (5.0, 300.0, 30.0)
