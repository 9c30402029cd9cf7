"""Parameter uncertainty: a bootstrap over the training windows.

Each resample draws as many training windows as there are, with replacement, and weighs every
cell by how often its window was drawn. Refitting each resample by replaying would cost a fit
per resample; instead the fit's residuals are linear in the parameters near the fit (its
Jacobian, one replay per parameter, already taken), so each resample's parameters are the
fit's plus the weighted Gauss-Newton step of that resample (the one-step bootstrap), kept
within the family's bounds. The resamples come from a generator seeded by the deployment's
seed, so the same inputs give the same intervals.

A parameter the trace does not determine (its Jacobian column nearly in the span of the others
or nearly zero: e.g. the square term of the KV fill in a trace that never filled the KV cache)
is reported as such: its interval says only what the resamples did not move.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LEVEL = 0.90
RESAMPLES = 500
# A direction of the scaled parameters whose singular value is under this share of the largest
# is one the residuals do not see.
NULL_SHARE = 1e-3


@dataclass(frozen=True, slots=True)
class Bootstrap:
    """``draws``: resampled parameter vectors (resamples x parameters), in draw order; ``low``
    and ``high``: their ``LEVEL`` interval per parameter; ``identified``: per parameter,
    whether the trace determines it."""

    draws: np.ndarray
    low: np.ndarray
    high: np.ndarray
    identified: np.ndarray
    level: float = LEVEL


def identified(jacobian: np.ndarray, scale: np.ndarray) -> np.ndarray:
    """Per parameter, whether no direction the residuals do not see loads on it by more than
    half (Jacobian in natural units, ``scale`` the parameters' magnitudes)."""
    js = jacobian * scale
    if not np.any(js):
        return np.zeros(js.shape[1], dtype=bool)
    _, s, vt = np.linalg.svd(js, full_matrices=True)
    s = np.concatenate([s, np.zeros(vt.shape[0] - s.shape[0])])
    null = vt[s < NULL_SHARE * s.max()]
    return ~np.any(np.abs(null) > 0.5, axis=0) if null.shape[0] else np.ones(js.shape[1], bool)


def bootstrap(values: np.ndarray, residuals: np.ndarray, jacobian: np.ndarray,
              cell_window: np.ndarray, lower: np.ndarray, upper: np.ndarray, scale: np.ndarray,
              *, seed: int, resamples: int = RESAMPLES) -> Bootstrap:
    """One-step bootstrap of a fit (module docstring): ``values`` the fitted parameters,
    ``residuals`` and ``jacobian`` the training cells' weighted residuals and their Jacobian at
    the fit (natural units), ``cell_window`` each training cell's window."""
    rng = np.random.default_rng(seed)
    windows = np.unique(cell_window)
    position = np.searchsorted(windows, cell_window)
    js = jacobian * scale
    draws = np.empty((resamples, values.shape[0]))
    for b in range(resamples):
        counts = np.bincount(rng.integers(windows.shape[0], size=windows.shape[0]),
                             minlength=windows.shape[0])
        w = np.sqrt(counts[position].astype(np.float64))
        step, *_ = np.linalg.lstsq(js * w[:, None], -residuals * w, rcond=NULL_SHARE)
        draws[b] = np.clip(values + step * scale, lower, upper)
    low, high = np.quantile(draws, [(1 - LEVEL) / 2, (1 + LEVEL) / 2], axis=0)
    return Bootstrap(draws, low, high, identified(jacobian, scale))
