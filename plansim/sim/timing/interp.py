"""Piecewise-linear interpolation that extrapolates along the end segments (NPZ and aic
profiles)."""

from __future__ import annotations

import numpy as np


def segment(grid: np.ndarray, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Index of the left grid point of x's segment (end segments extend outwards) and the
    fractional position within it (outside [0, 1] when extrapolating)."""
    i = np.clip(np.searchsorted(grid, x, side="right") - 1, 0, grid.size - 2)
    t = (x - grid[i]) / (grid[i + 1] - grid[i])
    return i, t


def interp1(xs: np.ndarray, ys: np.ndarray, x: np.ndarray) -> np.ndarray:
    i, t = segment(xs, x)
    return ys[i] + t * (ys[i + 1] - ys[i])


def interp2(xs: np.ndarray, ys: np.ndarray, z: np.ndarray, x: np.ndarray,
             y: np.ndarray) -> np.ndarray:
    i, tx = segment(xs, x)
    j, ty = segment(ys, y)
    z00, z01 = z[i, j], z[i, j + 1]
    z10, z11 = z[i + 1, j], z[i + 1, j + 1]
    near = z00 + ty * (z01 - z00)
    far = z10 + ty * (z11 - z10)
    return near + tx * (far - near)
