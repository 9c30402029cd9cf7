"""Piecewise-linear interpolation with extrapolation along the end segments."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

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


def test_rising_points_keep_their_cell_until_they_reach_its_far_edge():
    from plansim.sim.timing.interp import interp2_rising

    # z = x + 10 y on the grid is reproduced exactly by bilinear interpolation, extrapolated
    # too: the walk from (-3, -1) to (17, 9) crosses every cell and leaves the grid both ways.
    xs, ys = Grid(GRID), Grid(np.array([0.0, 2.0, 4.0]))
    z = [[x + 10 * y for y in (0.0, 2.0, 4.0)] for x in GRID]
    got = interp2_rising(xs, ys, z, -3, 2, -1, 11)
    assert got == [(-3 + 2 * j) + 10 * (-1 + j) for j in range(11)]


@settings(max_examples=300, deadline=None)
@given(gx=st.lists(st.integers(-50, 400), min_size=2, max_size=7, unique=True),
       gy=st.lists(st.integers(-20, 100), min_size=2, max_size=6, unique=True),
       data=st.data(), x0=st.integers(-100, 500), dx=st.integers(0, 40),
       y0=st.integers(-40, 120), k=st.integers(0, 40))
def test_rising_points_get_the_scalar_lookups_floats(gx, gy, data, x0, dx, y0, k):
    from plansim.sim.timing.interp import interp2_rising, interp2_scalar

    gx, gy = sorted(gx), sorted(gy)
    z = [[data.draw(st.floats(-1e3, 1e3)) for _ in gy] for _ in gx]
    xs, ys = Grid(np.array(gx, dtype=float)), Grid(np.array(gy, dtype=float))
    expected = [interp2_scalar(xs, ys, z, float(x0 + j * dx), float(y0 + j)) for j in range(k)]
    assert interp2_rising(xs, ys, z, x0, dx, y0, k) == expected
