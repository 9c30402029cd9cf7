"""Piecewise-linear interpolation that extrapolates along the end segments (NPZ and aic
profiles)."""

from __future__ import annotations

from bisect import bisect_right

import numpy as np


class Axis:
    """One axis for array look-ups with the fewest numpy calls (the grid's inner points, left
    points and widths precomputed)."""

    __slots__ = ("inner", "left", "width")

    def __init__(self, grid: np.ndarray) -> None:
        self.inner = np.ascontiguousarray(grid[1:-1])
        self.left = np.ascontiguousarray(grid[:-1])
        self.width = grid[1:] - grid[:-1]

    def segment(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Index of the left grid point of x's segment (end segments extend outwards) and the
        fractional position within it (outside [0, 1] when extrapolating)."""
        # Counting the inner points at or below x is the left point's index clipped to the end
        # segments, without np.clip's per-call cost.
        i = self.inner.searchsorted(x, side="right")
        return i, (x - self.left.take(i)) / self.width.take(i)


class Surface:
    """Bilinear interpolation over fixed grids for arrays of points (``interp2_scalar``'s
    arithmetic, so the two agree to the bit), with each cell's corner values and edge
    differences precomputed, so that a look-up is a few flat takes and ufuncs (a decode run's
    passes are timed in one call)."""

    __slots__ = ("cols", "d0", "d1", "x", "y", "z00", "z10")

    def __init__(self, xs: np.ndarray, ys: np.ndarray, z: np.ndarray) -> None:
        self.x = Axis(xs)
        self.y = Axis(ys)
        self.cols = ys.shape[0] - 1
        z00, z01, z10, z11 = z[:-1, :-1], z[:-1, 1:], z[1:, :-1], z[1:, 1:]
        self.z00 = z00.ravel()
        self.d0 = (z01 - z00).ravel()
        self.z10 = z10.ravel()
        self.d1 = (z11 - z10).ravel()

    def __call__(self, x: np.ndarray, y: np.ndarray) -> np.ndarray:
        i, tx = self.x.segment(x)
        j, ty = self.y.segment(y)
        c = i * self.cols + j
        near = self.z00.take(c) + ty * self.d0.take(c)
        far = self.z10.take(c) + ty * self.d1.take(c)
        return near + tx * (far - near)


class Grid:
    """One axis for scalar look-ups in plain Python (a pass is timed one value at a time, where
    numpy's per-call cost dominates); the arithmetic is ``Axis.segment``'s, so scalar and array
    results agree to the bit."""

    __slots__ = ("last", "points")

    def __init__(self, grid: np.ndarray) -> None:
        self.points = [float(v) for v in grid]
        self.last = len(self.points) - 2

    def segment(self, x: float) -> tuple[int, float]:
        pts = self.points
        i = bisect_right(pts, x) - 1
        if i < 0:
            i = 0
        elif i > self.last:
            i = self.last
        return i, (x - pts[i]) / (pts[i + 1] - pts[i])


def interp1_scalar(xs: Grid, ys: list[float], x: float) -> float:
    i, t = xs.segment(x)
    return ys[i] + t * (ys[i + 1] - ys[i])


def interp2_scalar(xs: Grid, ys: Grid, z: list[list[float]], x: float, y: float) -> float:
    i, tx = xs.segment(x)
    j, ty = ys.segment(y)
    row, nxt = z[i], z[i + 1]
    z00, z01 = row[j], row[j + 1]
    z10, z11 = nxt[j], nxt[j + 1]
    near = z00 + ty * (z01 - z00)
    far = z10 + ty * (z11 - z10)
    return near + tx * (far - near)
