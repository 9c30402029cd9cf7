"""calibrate.heldout: the held-out score is the fit's objective on the held-out windows only,
the family is chosen by it (of those within one standard error of the best, the lowest load
degree, then the fewest parameters), and a held-out window far off names what training never
saw."""

from __future__ import annotations

import numpy as np
import pytest

from plansim.calibrate.cells import Cells, Windows
from plansim.calibrate.families import FAMILIES
from plansim.calibrate.heldout import Score, WindowError, choose, score, unexplained


def _windows(held_out: list[bool]) -> Windows:
    n = len(held_out)
    return Windows(
        np.arange(n) * 1000.0, np.arange(n) * 1000.0 + 999.0, np.array(held_out), np.arange(n)
    )


def test_the_score_is_the_weighted_mean_square_of_the_held_out_cells_alone():
    # Windows 0 and 2 train, 1 and 3 held out; two cells per window.
    windows = _windows([False, True, False, True])
    cells = Cells(
        metric=np.array(["ttft", "tpot"] * 4),
        window=np.repeat(np.arange(4), 2),
        weight=np.array([1.0, 1.0, 1.0, 2.0, 1.0, 1.0, 1.0, 1.0]),
        members=tuple(np.array([i]) for i in range(8)),
    )
    residuals = np.array([9.0, 9.0, 0.1, 0.2, 9.0, 9.0, 0.3, 0.0])
    got = score(cells, residuals, windows)
    # Window 1: (1 * 0.01 + 4 * 0.04) / 5 = 0.034; window 3: (0.09 + 0) / 2 = 0.045.
    assert got.per_window == pytest.approx({1: 0.034, 3: 0.045})
    assert got.mean == pytest.approx(0.0395)
    # Sample standard deviation of (0.034, 0.045) over sqrt(2): 0.011 / 2.
    assert got.se == pytest.approx(0.0055)


def test_the_fewest_parameters_within_one_standard_error_of_the_best_are_chosen():
    scores = [Score(0.30, 0.01, {}), Score(0.105, 0.01, {}), Score(0.10, 0.01, {})]
    # Of one load degree, the best (0.10, eight parameters) allows up to 0.11: the
    # seven-parameter family is chosen.
    assert choose(["scaled", "a", "b"], scores, [(0, 3), (1, 7), (1, 8)]) == 1
    # Beyond one standard error, the extra parameter has earned its place.
    scores[1] = Score(0.115, 0.01, {})
    assert choose(["scaled", "a", "b"], scores, [(0, 3), (1, 7), (1, 8)]) == 2


def test_within_one_standard_error_a_square_load_term_yields_to_a_linear_one():
    # polynomial (a square term in KV fill, 7 parameters) scores 0.102, linear (8 parameters,
    # linear in the load) 0.100 +- 0.01: both are within one standard error, and the family
    # whose fitted terms grow only linearly with the load is chosen despite its extra parameter.
    scores = [Score(0.30, 0.01, {}), Score(0.102, 0.01, {}), Score(0.10, 0.01, {})]
    complexity = [(0, 3), (2, 7), (1, 8)]
    assert choose(["scaled", "polynomial", "linear"], scores, complexity) == 2
    # A square term that earns its place (linear beyond one standard error) is kept.
    scores[2] = Score(0.115, 0.01, {})
    scores[1] = Score(0.100, 0.01, {})
    assert choose(["scaled", "polynomial", "linear"], scores, complexity) == 1
    # The registry's families carry these degrees.
    assert [FAMILIES.get(n).load_degree for n in ("scaled", "linear", "polynomial")] == [0, 1, 2]


def _window(
    k: int, held: bool, ttft_error: float, in_flight: float, unrecorded: int = 0
) -> WindowError:
    return WindowError(
        window=k,
        start_s=k * 60.0,
        end_s=k * 60.0 + 60.0,
        held_out=held,
        requests=100,
        unrecorded=unrecorded,
        mean_in_flight=in_flight,
        recorded={},
        replayed={},
        error={"median_ttft_ms": ttft_error, "median_tpot_ms": 0.0},
    )


def test_a_held_out_window_far_off_names_the_load_training_never_reached():
    errors = [
        _window(0, False, 0.02, 4.0),
        _window(1, True, 0.30, 9.0),
        _window(2, False, -0.03, 5.0),
        _window(3, True, 0.05, 5.0),
    ]
    notes = unexplained(errors)
    assert len(notes) == 1
    assert notes[0].startswith("window 1 (60-120 s) is off by 30%")
    assert "a load never seen in training (9.0 requests in flight" in notes[0]
    assert "training windows at most 5.0" in notes[0]


def test_a_window_off_by_no_more_than_training_noise_is_not_named():
    # The worst training window is off by 8%: a held-out window at 11% is within 1.5 times it.
    errors = [_window(0, False, 0.08, 4.0), _window(1, True, 0.11, 9.0, unrecorded=3)]
    assert unexplained(errors) == []
    errors[1] = _window(1, True, 0.20, 4.0, unrecorded=3)
    assert "3 requests without recorded latencies" in unexplained(errors)[0]
