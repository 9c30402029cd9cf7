"""Piecewise-linear interpolation with extrapolation along the end segments."""

from __future__ import annotations

import numpy as np

from plansim.sim.timing.interp import Axis, Grid

GRID = np.array([0.0, 1.0, 5.0, 10.0])


def test_segment_extends_the_end_segments_outwards():
    i, t = Axis(GRID).segment(np.array([-2.0, 0.5, 5.0, 7.5, 20.0]))
    assert i.tolist() == [0, 0, 2, 2, 2]
    # -2 is two segment lengths left of 0; 20 is two lengths of [5, 10] past 10.
    assert t.tolist() == [-2.0, 0.5, 0.0, 0.5, 3.0]


def test_scalar_segments_agree_with_array_segments():
    grid = Grid(GRID)
    xs = [-2.0, 0.0, 0.5, 1.0, 4.999, 5.0, 9.0, 10.0, 20.0]
    i, t = Axis(GRID).segment(np.array(xs))
    assert [grid.segment(x) for x in xs] == list(zip(i.tolist(), t.tolist()))
