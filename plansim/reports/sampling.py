"""Shrinking long series to what a screen can show: every on-screen trace has at most
``MAX_POINTS`` points, whatever the length of the run or the number of requests.

All functions are pure and deterministic (no random sampling), so a report re-rendered from
the same tables is byte-identical.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

MAX_POINTS = 2000

# Bin widths (seconds) that read naturally on an axis: 1 s, 5 s, ..., 1 h, 6 h, 1 day.
_NICE_WIDTHS_S = (1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 21600, 86400)


@dataclass(frozen=True, slots=True)
class TimeUnit:
    """How to show a time axis: divide seconds by ``seconds`` and label with ``label``."""

    seconds: float
    label: str

    def axis_title(self, what: str = "Time since first arrival") -> str:
        return f"{what} ({self.label})"


def time_unit(span_s: float) -> TimeUnit:
    """Seconds for spans up to 15 minutes, minutes up to 10 hours, hours beyond."""
    if not np.isfinite(span_s) or span_s <= 900:
        return TimeUnit(1.0, "s")
    if span_s <= 36000:
        return TimeUnit(60.0, "min")
    return TimeUnit(3600.0, "h")


def bin_width_s(span_s: float, max_bins: int = MAX_POINTS // 2, minimum_s: float = 1.0) -> float:
    """The smallest nice bin width (>= ``minimum_s``) that cuts ``span_s`` into at most
    ``max_bins`` bins."""
    needed = max(span_s / max_bins, minimum_s)
    for width in _NICE_WIDTHS_S:
        if width >= needed:
            return float(width)
    return float(math.ceil(needed / 86400) * 86400)


def bin_series(
    t: np.ndarray, values: dict[str, np.ndarray], max_points: int = MAX_POINTS, how: str = "mean"
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """Downsample series sharing the time axis ``t`` to at most ``max_points`` points.

    Short series come back unchanged. Longer ones are cut into equal-width time bins; each bin
    becomes one point at the bin's mean time with the bin's ``how`` (``mean`` or ``max``) of each
    series. ``max`` keeps spikes visible (queue lengths, worker counts); ``mean`` keeps rates
    honest. Empty bins are dropped.
    """
    t = np.asarray(t, dtype=np.float64)
    if len(t) <= max_points:
        return t, {k: np.asarray(v, dtype=np.float64) for k, v in values.items()}
    lo, hi = float(np.nanmin(t)), float(np.nanmax(t))
    edges = np.linspace(lo, hi, max_points + 1)
    idx = np.clip(np.searchsorted(edges, t, side="right") - 1, 0, max_points - 1)
    frame = pd.DataFrame(
        {"_bin": idx, "_t": t, **{k: np.asarray(v, float) for k, v in values.items()}}
    )
    grouped = frame.groupby("_bin", sort=True)
    times = grouped["_t"].mean().to_numpy()
    out = {k: getattr(grouped[k], how)().to_numpy() for k in values}
    return times, out


def thin_events(labels: np.ndarray, max_points: int = MAX_POINTS) -> np.ndarray:
    """Indices of categorical events to draw: every change of label is kept (so a rare reason
    is never hidden), then the rest are taken at an even stride up to ``max_points``."""
    n = len(labels)
    if n <= max_points:
        return np.arange(n)
    labels = np.asarray(labels, dtype=object)
    changes = np.flatnonzero(np.concatenate(([True], labels[1:] != labels[:-1])))
    if len(changes) >= max_points:
        return changes[np.linspace(0, len(changes) - 1, max_points).round().astype(int)]
    stride = np.linspace(0, n - 1, max_points - len(changes)).round().astype(int)
    return np.union1d(changes, stride)


# Probability levels of a CDF: even steps in the body, finer steps in the tail where SLAs live.
CDF_LEVELS = np.unique(
    np.concatenate(
        [np.linspace(0.0, 0.9, 451), np.linspace(0.9, 0.99, 181), np.linspace(0.99, 1.0, 201)]
    )
)


def quantile_cdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """An empirical CDF as (value, probability) pairs read off ``len(CDF_LEVELS)`` quantiles,
    not one point per sample: its size does not grow with the number of requests. NaNs are
    ignored; an empty input gives empty arrays."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    if v.size == 0:
        return np.empty(0), np.empty(0)
    return np.quantile(v, CDF_LEVELS), CDF_LEVELS.copy()


def fraction_at_most(values: np.ndarray, limit: float) -> float:
    """Share of finite ``values`` that are <= ``limit`` (NaN when there are none)."""
    v = np.asarray(values, dtype=np.float64)
    v = v[np.isfinite(v)]
    return float(np.mean(v <= limit)) if v.size else float("nan")


def with_gaps(
    starts: np.ndarray, values: dict[float, np.ndarray], width_s: float
) -> tuple[np.ndarray, dict[float, np.ndarray]]:
    """Per-bin series (``starts`` of the non-empty bins, as ``binned_percentiles`` returns) on
    every bin from the first to the last, NaN in the empty ones, so that a chart draws an empty
    bin as a gap rather than a line across it."""
    if len(starts) == 0:
        return starts, values
    index = np.rint((starts - starts[0]) / width_s).astype(np.int64)
    full = starts[0] + np.arange(int(index[-1]) + 1) * width_s
    out = {}
    for key, series in values.items():
        filled = np.full(len(full), np.nan)
        filled[index] = series
        out[key] = filled
    return full, out


def binned_percentiles(
    t_s: np.ndarray, values: np.ndarray, width_s: float, percentiles: tuple[float, ...]
) -> tuple[np.ndarray, dict[float, np.ndarray]]:
    """Percentiles of ``values`` per time bin of ``width_s`` seconds (bins keyed by start).

    Returns the bin start times (s) of non-empty bins and, per percentile (0..100), one value
    per bin. NaN values are ignored."""
    t_s = np.asarray(t_s, dtype=np.float64)
    v = np.asarray(values, dtype=np.float64)
    keep = np.isfinite(t_s) & np.isfinite(v)
    if not keep.any():
        return np.empty(0), {p: np.empty(0) for p in percentiles}
    frame = pd.DataFrame({"bin": np.floor(t_s[keep] / width_s), "v": v[keep]})
    q = frame.groupby("bin", sort=True)["v"].quantile([p / 100.0 for p in percentiles]).unstack()
    starts = q.index.to_numpy(dtype=np.float64) * width_s
    return starts, {p: q[p / 100.0].to_numpy() for p in percentiles}
