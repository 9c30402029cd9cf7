"""Parameter uncertainty: a bootstrap over the training windows.

Each resample draws as many training windows as there are, with replacement, and weighs every
cell by how often its window was drawn. Refitting each resample by replaying would cost a fit
per resample; instead the fit's residuals are linear in the parameters near the fit (its
Jacobian, one replay per parameter, already taken), so each resample's parameters are the
fit's plus the weighted Gauss-Newton step of that resample less the step of all the training
windows (the one-step bootstrap, centred on the fit), kept within the family's bounds. A
handful of windows is a small sample for a bootstrap: where its interval is narrower than the
normal interval of the parameter's standard error at the fit, the draws are widened to it. The
resamples come from a generator seeded by the deployment's seed, so the same inputs give the
same intervals.

A parameter the trace does not determine (its standard error at the fit more than
``UNDETERMINED_ERROR`` of its typical magnitude: its Jacobian column nearly zero or nearly in
the span of the others, e.g. the square term of the KV fill in a trace that never filled the KV
cache) is reported as such: its interval says only what the resamples did not move.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

LEVEL = 0.90
RESAMPLES = 500
# A direction of the scaled parameters whose singular value is under this share of the largest
# is one the residuals do not see.
NULL_SHARE = 1e-3
# A parameter whose standard error exceeds this share of its typical magnitude (a change of
# about half a pass time) is one the trace does not determine.
UNDETERMINED_ERROR = 0.5


@dataclass(frozen=True, slots=True)
class Bootstrap:
    """``draws``: resampled parameter vectors (resamples x parameters), in draw order; ``low``
    and ``high``: their ``LEVEL`` interval per parameter; ``standard_error`` per parameter
    (natural units) and ``identified``: whether the trace determines it."""

    draws: np.ndarray
    low: np.ndarray
    high: np.ndarray
    standard_error: np.ndarray
    identified: np.ndarray
    level: float = LEVEL


def standard_errors(jacobian: np.ndarray, residuals: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Per parameter, its standard error in units of its typical magnitude (``scale``): the
    diagonal of ``s^2 (J'J)^-1`` of the Jacobian in those units, ``s^2`` the residuals' mean
    square over their degrees of freedom; infinite along a direction the residuals do not see
    (a singular value under ``NULL_SHARE`` of the largest)."""
    js = jacobian * scale
    m, p = js.shape
    if not np.any(js):
        return np.full(p, np.inf)
    _, s, vt = np.linalg.svd(js, full_matrices=False)
    s2 = float(residuals @ residuals) / max(m - p, 1)
    seen = s >= NULL_SHARE * s.max()
    variance = (vt[seen].T ** 2) @ (1.0 / s[seen] ** 2) * s2
    blind = np.any(np.abs(vt[~seen]) > 0.5, axis=0) if (~seen).any() else np.zeros(p, bool)
    return np.where(blind, np.inf, np.sqrt(variance))


def bootstrap(
    values: np.ndarray,
    residuals: np.ndarray,
    jacobian: np.ndarray,
    cell_window: np.ndarray,
    lower: np.ndarray,
    upper: np.ndarray,
    scale: np.ndarray,
    *,
    seed: int,
    resamples: int = RESAMPLES,
) -> Bootstrap:
    """One-step bootstrap of a fit (module docstring): ``values`` the fitted parameters,
    ``residuals`` and ``jacobian`` the training cells' weighted residuals and their Jacobian at
    the fit (natural units), ``cell_window`` each training cell's window."""
    rng = np.random.default_rng(seed)
    windows = np.unique(cell_window)
    position = np.searchsorted(windows, cell_window)
    js = jacobian * scale

    def step(w: np.ndarray) -> np.ndarray:
        out, *_ = np.linalg.lstsq(js * w[:, None], -residuals * w, rcond=NULL_SHARE)
        return out

    # Each draw moves the fit by its resample's step less the step of the whole training set:
    # an optimiser stopped short of the minimum shifts every step alike, not the spread.
    whole = step(np.ones(residuals.shape[0]))
    draws = np.empty((resamples, values.shape[0]))
    for b in range(resamples):
        counts = np.bincount(
            rng.integers(windows.shape[0], size=windows.shape[0]), minlength=windows.shape[0]
        )
        draws[b] = np.clip(
            values + (step(np.sqrt(counts[position].astype(np.float64))) - whole) * scale,
            lower,
            upper,
        )
    errors = standard_errors(jacobian, residuals, scale)
    # A bootstrap over a few windows sees little of the spread: on each side of the fit, a
    # parameter's draws are widened until their interval reaches at least as far as the
    # normal one of its standard error.
    reach = np.where(
        np.isfinite(errors), NormalDist().inv_cdf((1 + LEVEL) / 2) * errors * scale, 0.0
    )
    low, high = np.quantile(draws, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], axis=0)
    up = np.maximum(1.0, reach / np.maximum(high - values, 1e-300))
    down = np.maximum(1.0, reach / np.maximum(values - low, 1e-300))
    deviation = draws - values
    draws = np.clip(values + deviation * np.where(deviation > 0, up, down), lower, upper)
    low, high = np.quantile(draws, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], axis=0)
    return Bootstrap(draws, low, high, errors * scale, errors <= UNDETERMINED_ERROR)
