"""The retune pre-sweep loss of a traffic forecast (request count, average ISL, average OSL).

Per window, with ``e(p, a) = |log1p(max(p, 0)) - log1p(max(a, 0))|``::

    0.4 e(n^ isl^, n isl) + 0.4 e(n^ osl^, n osl) + 0.1 e(isl^, isl) + 0.1 e(osl^, osl)

(input tokens, output tokens, average lengths). The loss is the mean over windows, ``inf`` when
there are none.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from plansim.schema import PRESWEEP_WEIGHTS

WEIGHT_INPUT_TOKENS = PRESWEEP_WEIGHTS["input_tokens"]
WEIGHT_OUTPUT_TOKENS = PRESWEEP_WEIGHTS["output_tokens"]
WEIGHT_AVG_ISL = PRESWEEP_WEIGHTS["avg_isl"]
WEIGHT_AVG_OSL = PRESWEEP_WEIGHTS["avg_osl"]


def log_error(forecast: Any, actual: Any) -> np.ndarray:
    """``|log1p(max(f, 0)) - log1p(max(a, 0))|`` elementwise."""
    f = np.maximum(np.asarray(forecast, dtype=float), 0.0)
    a = np.maximum(np.asarray(actual, dtype=float), 0.0)
    return np.abs(np.log1p(f) - np.log1p(a))


def presweep_window_losses(forecast: Any, actual: Any) -> np.ndarray:
    """Loss per window. ``forecast`` and ``actual`` are ``(num_req, avg_isl, avg_osl)``: three
    scalars, or three equal-length 1-D arrays (shape ``(3,)`` or ``(3, n)``)."""
    f = _triple(forecast, "forecast")
    a = _triple(actual, "actual")
    if f.shape != a.shape:
        raise ValueError(f"forecast shape {f.shape} differs from actual shape {a.shape}")
    n_f, isl_f, osl_f = f
    n_a, isl_a, osl_a = a
    return np.atleast_1d(
        WEIGHT_INPUT_TOKENS * log_error(n_f * isl_f, n_a * isl_a)
        + WEIGHT_OUTPUT_TOKENS * log_error(n_f * osl_f, n_a * osl_a)
        + WEIGHT_AVG_ISL * log_error(isl_f, isl_a)
        + WEIGHT_AVG_OSL * log_error(osl_f, osl_a)
    )


def presweep_loss(forecast: Any, actual: Any) -> float:
    """Mean pre-sweep loss over windows; ``inf`` with no window."""
    losses = presweep_window_losses(forecast, actual)
    return float(losses.mean()) if losses.size else float("inf")


def _triple(value: Any, what: str) -> np.ndarray:
    arr = np.asarray(value, dtype=float)
    if arr.ndim not in (1, 2) or arr.shape[0] != 3:
        raise ValueError(f"{what} must be (num_req, avg_isl, avg_osl), got shape {arr.shape}")
    return arr
