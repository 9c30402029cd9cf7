"""Per-interval traffic buckets of a workload (predictor warm-up, backtests, the pre-sweep).

``buckets(workload, interval_s)`` is a DataFrame with one row per interval from the first
non-empty interval to the last, empty intervals in between kept:

- ``interval_start`` (float, seconds after the origin; the origin is the first arrival unless
  ``origin_ms`` is given), ``request_count`` (int64), ``avg_isl`` and ``avg_osl`` (float64,
  tokens).

A request falls in interval ``floor((arrival_ms - origin_ms) / (interval_s * 1000))``. An empty
interval has ``request_count`` 0 and averages 0, as the reference warm-up reader does: the
planner's predictors treat an idle interval by its zero count and reuse the last lengths, so 0
carries the same information as NaN without poisoning sums.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from plansim.errors import InputError
from plansim.limits import MAX_BUCKETS, check_count
from plansim.traces.workload import Workload

COLUMNS = ("interval_start", "request_count", "avg_isl", "avg_osl")


def buckets(
    workload: Workload, interval_s: float, *, origin_ms: float | None = None
) -> pd.DataFrame:
    """Bucket ``workload`` by arrival into intervals of ``interval_s`` seconds."""
    return bucket_arrays(
        workload.arrival_ms,
        workload.isl_tokens,
        workload.osl_tokens,
        interval_s,
        origin_ms=origin_ms,
    )


def bucket_arrays(
    arrival_ms: np.ndarray,
    isl_tokens: np.ndarray,
    osl_tokens: np.ndarray,
    interval_s: float,
    *,
    origin_ms: float | None = None,
) -> pd.DataFrame:
    """``buckets`` on bare arrays (arrival in ms, lengths in tokens)."""
    if not (isinstance(interval_s, (int, float)) and math.isfinite(interval_s) and interval_s > 0):
        raise InputError(
            f"must be a positive number of seconds, got {interval_s!r}", field="interval_s"
        )
    arrival = np.asarray(arrival_ms, dtype=np.float64)
    if arrival.size == 0:
        return pd.DataFrame(
            {c: pd.Series(dtype="int64" if c == "request_count" else "float64") for c in COLUMNS}
        )
    origin = float(arrival.min()) if origin_ms is None else float(origin_ms)
    if arrival.min() < origin:
        raise InputError("origin_ms is after the first arrival", field="origin_ms")
    interval_ms = interval_s * 1000.0
    check_count(
        (float(arrival.max()) - origin) / interval_ms + 1,
        MAX_BUCKETS,
        what=f"the number of {interval_s:g} s buckets",
        field="interval_s",
        hint="raise the interval",
    )
    index = np.floor((arrival - origin) / interval_ms).astype(np.int64)
    first, last = int(index.min()), int(index.max())
    slot = index - first
    n = last - first + 1
    count = np.bincount(slot, minlength=n)
    isl_sum = np.bincount(slot, weights=np.asarray(isl_tokens, dtype=np.float64), minlength=n)
    osl_sum = np.bincount(slot, weights=np.asarray(osl_tokens, dtype=np.float64), minlength=n)
    safe = np.maximum(count, 1)
    return pd.DataFrame(
        {
            "interval_start": (np.arange(first, last + 1) * interval_s).astype(np.float64),
            "request_count": count.astype(np.int64),
            "avg_isl": np.where(count > 0, isl_sum / safe, 0.0),
            "avg_osl": np.where(count > 0, osl_sum / safe, 0.0),
        }
    )
