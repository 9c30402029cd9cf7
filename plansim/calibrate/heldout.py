"""How far a fitted family's replay is from the recorded latencies, window by window, and which
family the held-out windows choose.

Per window (``window_errors``): the recorded and replayed median and p90 TTFT, median and p90
TPOT, median E2E, each replayed figure's relative error, and with an SLA the goodput ratio of
both (requests meeting every bound set, over the window's requests with recorded latencies).

A family's held-out score (``score``) is the fit's own objective on the cells of the held-out
windows: the weighted mean square of their trimmed-mean log ratios, a mean over windows with its
standard error. ``choose`` takes the least complex family whose held-out score is within one
standard error of the best (the one-standard-error rule: a family with more freedom has to earn
it on windows it never saw). Complexity is first the power of the load the family's fitted
decode terms reach (a square term in KV fill, which the recorded loads hardly determine, bends
either way beyond them, where the predictions at fewer workers live), then its parameters.

``unexplained`` names, for a held-out window whose median TTFT or TPOT is off by more than
``LARGE_ERROR`` and by more than ``NOISE_FACTOR`` times the worst training window (a window's
median moves by several percent with the router's placements alone), what the fit could not
have learnt: a load the training windows never reached, requests production did not complete
(no recorded latency).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from plansim.calibrate.cells import Cells, Windows, recorded_in_flight
from plansim.calibrate.recorded import Recorded

LARGE_ERROR = 0.10
NOISE_FACTOR = 1.5
METRICS = ("median_ttft_ms", "p90_ttft_ms", "median_tpot_ms", "p90_tpot_ms", "median_e2e_ms")


@dataclass(frozen=True, slots=True)
class WindowError:
    """One window: its span (s from the trace's first arrival), whether it was held out, its
    scored requests, recorded and replayed figures and relative errors (``METRICS``; goodput
    ratios as ``goodput_ratio`` when an SLA is set, the error then in points of ratio)."""

    window: int
    start_s: float
    end_s: float
    held_out: bool
    requests: int
    unrecorded: int
    mean_in_flight: float
    recorded: dict[str, float]
    replayed: dict[str, float]
    error: dict[str, float]

    def to_json(self) -> dict[str, Any]:
        return {
            "window": self.window,
            "start_s": self.start_s,
            "end_s": self.end_s,
            "held_out": self.held_out,
            "requests": self.requests,
            "unrecorded": self.unrecorded,
            "mean_in_flight": self.mean_in_flight,
            "recorded": self.recorded,
            "replayed": self.replayed,
            "error": self.error,
        }


def _figures(ttft: np.ndarray, tpot: np.ndarray, e2e: np.ndarray) -> dict[str, float]:
    def q(values: np.ndarray, p: float) -> float:
        values = values[np.isfinite(values)]
        return float(np.quantile(values, p)) if values.shape[0] else float("nan")

    return {
        "median_ttft_ms": q(ttft, 0.5),
        "p90_ttft_ms": q(ttft, 0.9),
        "median_tpot_ms": q(tpot, 0.5),
        "p90_tpot_ms": q(tpot, 0.9),
        "median_e2e_ms": q(e2e, 0.5),
    }


def good_share(ttft: np.ndarray, tpot: np.ndarray, e2e: np.ndarray, sla: Any) -> float:
    """The share of requests meeting every bound of ``sla`` set (a missing latency misses)."""
    good = np.isfinite(ttft)
    with np.errstate(invalid="ignore"):
        if sla.ttft_ms is not None:
            good &= ttft <= sla.ttft_ms
        if sla.tpot_ms is not None:
            good &= ~(tpot > sla.tpot_ms)
        if sla.e2e_ms is not None:
            good &= e2e <= sla.e2e_ms
    return float(good.mean()) if good.shape[0] else float("nan")


def window_errors(
    workload: Any, recorded: Recorded, windows: Windows, replayed: Any, sla: Any = None
) -> list[WindowError]:
    """The figures of every window (module docstring); ``replayed``: a ``fit.Replayed``."""
    in_flight = recorded_in_flight(workload, recorded)
    out = []
    for k in range(windows.count):
        rows = windows.index == k
        scored = rows & recorded.scored
        rec = _figures(recorded.ttft_ms[scored], recorded.tpot_ms[scored], recorded.e2e_ms[scored])
        rep = _figures(replayed.ttft_ms[scored], replayed.tpot_ms[scored], replayed.e2e_ms[scored])
        err = {m: (rep[m] - rec[m]) / rec[m] if rec[m] else float("nan") for m in METRICS}
        if sla is not None and sla.is_set:
            rec["goodput_ratio"] = good_share(
                recorded.ttft_ms[scored], recorded.tpot_ms[scored], recorded.e2e_ms[scored], sla
            )
            rep["goodput_ratio"] = good_share(
                replayed.ttft_ms[scored], replayed.tpot_ms[scored], replayed.e2e_ms[scored], sla
            )
            err["goodput_ratio"] = rep["goodput_ratio"] - rec["goodput_ratio"]
        out.append(
            WindowError(
                window=k,
                start_s=float(windows.start_ms[k] / 1000.0),
                end_s=float(windows.end_ms[k] / 1000.0),
                held_out=bool(windows.held_out[k]),
                requests=int(scored.sum()),
                unrecorded=int((rows & ~recorded.scored).sum()),
                mean_in_flight=float(np.mean(in_flight[scored])) if scored.any() else 0.0,
                recorded=rec,
                replayed=rep,
                error=err,
            )
        )
    return out


@dataclass(frozen=True, slots=True)
class Score:
    """A family's held-out score: the mean over held-out windows of their weighted mean square
    cell residual, its standard error, and each window's."""

    mean: float
    se: float
    per_window: dict[int, float]


def score(cells: Cells, residuals: np.ndarray, windows: Windows) -> Score:
    """The held-out score of a fit's cell residuals (unweighted, every cell)."""
    per = {}
    for k in np.flatnonzero(windows.held_out):
        rows = np.flatnonzero(cells.window == k)
        if rows.shape[0]:
            w2 = cells.weight[rows] ** 2
            per[int(k)] = float(np.sum(w2 * residuals[rows] ** 2) / np.sum(w2))
    values = np.array(list(per.values()))
    se = float(values.std(ddof=1) / np.sqrt(values.shape[0])) if values.shape[0] > 1 else 0.0
    return Score(float(values.mean()) if values.shape[0] else float("nan"), se, per)


def choose(
    names: Sequence[str], scores: Sequence[Score], complexity: Sequence[tuple[int, int]]
) -> int:
    """The index of the least complex family within one standard error of the best held-out
    score; ``complexity`` per family is (load degree, parameters), compared in that order
    (ties: the first)."""
    best = min(range(len(names)), key=lambda i: scores[i].mean)
    limit = scores[best].mean + scores[best].se
    eligible = [i for i in range(len(names)) if scores[i].mean <= limit]
    return min(eligible, key=lambda i: (tuple(complexity[i]), i))


def unexplained(errors: Sequence[WindowError]) -> list[str]:
    """For each held-out window off by more than ``LARGE_ERROR`` in median TTFT or TPOT: what it
    holds that the training windows did not."""
    metrics = ("median_ttft_ms", "median_tpot_ms")
    trained = [e for e in errors if not e.held_out]
    most = max((e.mean_in_flight for e in trained), default=0.0)
    noise = {
        m: max((abs(e.error[m]) for e in trained if np.isfinite(e.error[m])), default=0.0)
        for m in metrics
    }
    out = []
    for e in errors:
        off = [
            abs(e.error[m])
            for m in metrics
            if np.isfinite(e.error[m])
            and abs(e.error[m]) > max(LARGE_ERROR, NOISE_FACTOR * noise[m])
        ]
        if not e.held_out or not off:
            continue
        worst = max(off)
        why = []
        if e.mean_in_flight > most * 1.1:
            why.append(
                f"a load never seen in training ({e.mean_in_flight:.1f} requests in "
                f"flight on average, training windows at most {most:.1f})"
            )
        if e.unrecorded:
            why.append(
                f"{e.unrecorded} requests without recorded latencies (rejected or failed "
                "in production)"
            )
        if not why:
            why.append("a behaviour the fitted family cannot reproduce")
        out.append(
            f"window {e.window} ({e.start_s:.0f}-{e.end_s:.0f} s) is off by "
            f"{worst:.0%}: {'; '.join(why)}"
        )
    return out
