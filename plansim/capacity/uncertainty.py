"""A 90% interval on a goodput ratio: bootstrap over router seeds and segments.

Each resample picks one of the point's seed replays and as many segments as the trace has,
with replacement, and takes the good share of their requests. The interval is the 5th and 95th
percentile of 2,000 resamples from a generator seeded by the run's seed, so it is
reproducible. It answers "is 95.4% really above 95%": the seeds carry the simulation's own
randomness (routing ties and sampling), the segments the variation of the traffic itself. With
``--calibration`` the replays at the calibration's timing draws join the seed replays, so the
interval carries the uncertainty of the fitted timing too.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

LEVEL = 0.90
RESAMPLES = 2000


@dataclass(frozen=True, slots=True)
class Interval:
    """``low``..``high`` at ``level``; ``seeds`` replays and ``segments`` segments behind it,
    ``timing_draws`` of the replays at a calibration's timing draws."""

    low: float
    high: float
    seeds: int
    segments: int
    level: float = LEVEL
    timing_draws: int = 0

    def verdict(self, target: float) -> str:
        """``above`` (the whole interval meets the target), ``below`` or ``uncertain``."""
        if self.low >= target:
            return "above"
        if self.high < target:
            return "below"
        return "uncertain"

    def to_json(self) -> dict[str, float | int]:
        out = {
            "low": self.low,
            "high": self.high,
            "level": self.level,
            "seeds": self.seeds,
            "segments": self.segments,
        }
        if self.timing_draws:
            out["timing_draws"] = self.timing_draws
        return out


def bootstrap(
    good: np.ndarray,
    requests: np.ndarray,
    *,
    seed: int,
    resamples: int = RESAMPLES,
    timing_draws: int = 0,
) -> Interval:
    """``good``: good requests per (replay, segment), the last ``timing_draws`` replays at
    timing draws, the others at router seeds; ``requests``: requests per segment."""
    good = np.atleast_2d(np.asarray(good, dtype=np.float64))
    requests = np.asarray(requests, dtype=np.float64)
    n_seeds, n_seg = good.shape
    rng = np.random.default_rng(seed)
    rows = rng.integers(n_seeds, size=(resamples, 1))
    cols = rng.integers(n_seg, size=(resamples, n_seg))
    total = requests[cols].sum(axis=1)
    ratio = np.divide(good[rows, cols].sum(axis=1), total, out=np.zeros(resamples), where=total > 0)
    low, high = np.quantile(ratio, [(1 - LEVEL) / 2, (1 + LEVEL) / 2])
    return Interval(
        float(low), float(high), n_seeds - timing_draws, n_seg, timing_draws=timing_draws
    )
