"""The load-predictor pre-sweep (seed: Load-Predictor Pre-Sweep) and the swap preparation."""

from __future__ import annotations

import math

import pytest

from plansim.errors import ConfigError
from plansim.retune.presweep import (
    PredictorError,
    pick_winner,
    prepare_predictor_task,
    presweep_task,
)
from plansim.workers.executor import TaskContext

CTX = TaskContext(".")
CONSTANT = {"load_predictor": "constant", "load_predictor_log1p": False}
KALMAN = {"load_predictor": "kalman", "kalman_min_points": 5}


def err(forecast: float, actual: float) -> float:
    return abs(math.log1p(forecast) - math.log1p(actual))


def test_loss_weights_tokens_40_40_and_lengths_10_10_one_step_ahead():
    # The constant predictor forecasts the last bucket: (10 req, 100, 20), then (20 req, 100, 40).
    history = [(10.0, 100.0, 20.0)]
    window = [(20.0, 100.0, 40.0), (20.0, 150.0, 40.0)]
    first = 0.4 * err(1000, 2000) + 0.4 * err(200, 800) + 0.1 * err(100, 100) + 0.1 * err(20, 40)
    second = 0.4 * err(2000, 3000) + 0.4 * err(800, 800) + 0.1 * err(100, 150) + 0.1 * err(40, 40)
    loss = presweep_task(CTX, CONSTANT, history, window, 60.0)
    assert loss == pytest.approx((first + second) / 2)


def test_an_empty_window_bucket_forecast_is_scored_against_zero_tokens():
    history = [(10.0, 100.0, 20.0)]
    window = [(0.0, 0.0, 0.0)]
    expected = 0.4 * err(1000, 0) + 0.4 * err(200, 0) + 0.1 * err(100, 0) + 0.1 * err(20, 0)
    assert presweep_task(CTX, CONSTANT, history, window, 60.0) == pytest.approx(expected)


def test_the_lowest_loss_wins_the_earliest_on_ties_and_a_failed_candidate_never():
    assert pick_winner([0.3, 0.1, 0.1]) == 1
    assert pick_winner([None, 0.5, math.inf]) == 1
    assert pick_winner([None, None]) is None


def test_a_swapped_predictor_needs_its_minimum_points_of_warmup():
    with pytest.raises(PredictorError, match="num_req has 4 of 5 points"):
        prepare_predictor_task(CTX, KALMAN, [(10.0, 100.0, 20.0)] * 4, 60.0)
    prepared = prepare_predictor_task(CTX, KALMAN, [(10.0, 100.0, 20.0)] * 5, 60.0)
    assert prepared["points"] == {"num_req": 5, "isl": 5, "osl": 5}


def test_an_invalid_predictor_candidate_names_its_field():
    with pytest.raises(ConfigError) as error:
        presweep_task(CTX, {"load_predictor": "oracle"}, [], [(1.0, 1.0, 1.0)], 60.0)
    assert error.value.field == "load_predictor"
