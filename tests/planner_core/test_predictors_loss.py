"""Retune pre-sweep loss, checked by hand."""

import math

import numpy as np
import pytest

from plansim.planner_core.predictors import presweep_loss, presweep_window_losses


def test_perfect_forecast_has_zero_loss():
    assert presweep_loss((10, 100, 20), (10, 100, 20)) == 0.0


def test_one_window_by_hand():
    # forecast n=4, isl=100, osl=10; actual n=6, isl=200, osl=20.
    # Input tokens 400 vs 1200, output tokens 40 vs 120.
    expected = (
        0.4 * abs(math.log(401) - math.log(1201))
        + 0.4 * abs(math.log(41) - math.log(121))
        + 0.1 * abs(math.log(101) - math.log(201))
        + 0.1 * abs(math.log(11) - math.log(21))
    )
    assert presweep_loss((4, 100, 10), (6, 200, 20)) == pytest.approx(expected, rel=1e-12)


def test_loss_is_the_mean_over_windows():
    f = [[4, 1], [100, 1], [10, 1]]
    a = [[6, 1], [200, 1], [20, 1]]
    losses = presweep_window_losses(f, a)
    assert losses[1] == 0.0
    assert presweep_loss(f, a) == pytest.approx(losses[0] / 2)


def test_negative_values_count_as_zero():
    # e(p, a) clamps both sides at 0: a forecast of -5 requests equals a forecast of 0.
    assert presweep_loss((-5, 100, 10), (3, 100, 10)) == presweep_loss((0, 100, 10), (3, 100, 10))


def test_no_window_gives_infinite_loss():
    assert presweep_loss(np.empty((3, 0)), np.empty((3, 0))) == math.inf


def test_shape_mismatch_is_rejected():
    with pytest.raises(ValueError):
        presweep_loss((1, 2), (1, 2))
