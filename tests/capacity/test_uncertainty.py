"""The 90% interval: a bootstrap over seed replays and segments, reproducible."""

from __future__ import annotations

import numpy as np
import pytest

from plansim.capacity.uncertainty import Interval, bootstrap


def test_identical_segments_and_seeds_give_a_point_interval():
    good = np.array([[90, 90, 90]])
    iv = bootstrap(good, np.array([100, 100, 100]), seed=0)
    assert (iv.low, iv.high) == (0.9, 0.9) and (iv.seeds, iv.segments) == (1, 3)


def test_the_interval_spans_the_segment_spread_and_repeats_for_a_seed():
    good = np.array([[80, 100, 90, 95], [85, 99, 91, 96]])
    requests = np.array([100, 100, 100, 100])
    iv = bootstrap(good, requests, seed=7)
    assert 0.8 <= iv.low < 0.9 < iv.high <= 1.0
    assert bootstrap(good, requests, seed=7) == iv
    assert iv.seeds == 2 and iv.level == pytest.approx(0.9)


def test_verdict_against_the_target():
    assert Interval(0.951, 0.97, 1, 6).verdict(0.95) == "above"
    assert Interval(0.94, 0.96, 1, 6).verdict(0.95) == "uncertain"
    assert Interval(0.90, 0.94, 1, 6).verdict(0.95) == "below"
