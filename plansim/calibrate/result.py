"""A calibration's answer, its JSON form (``calibration.json``) and what ``plansim capacity
--calibration`` reads back from it.

``calibration.json``: ``family`` (the chosen one) and ``deployment_keys`` (the dotted keys it
sets in the deployment), ``parameters`` (name, unit, value, start, 90% bootstrap interval,
whether the trace determines it), ``held_out`` (the chosen fit's figures over the held-out
windows: median and worst relative error of each metric), ``windows`` (per window: span,
held out or not, recorded and replayed figures, errors), ``families`` (every family fitted:
parameters, training and held-out error per window, replays, optimiser status, chosen),
``draws`` (deployment keys of ``DRAWS`` bootstrap resamples, for ``capacity
--calibration``), ``fast_estimate``, ``requests``, ``notes`` and ``host`` (wall time: the only
field that depends on the machine).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from plansim.calibrate.bootstrap import LEVEL
from plansim.calibrate.estimate import FastEstimate
from plansim.calibrate.families import Parameter
from plansim.calibrate.heldout import METRICS, Score, WindowError
from plansim.calibrate.recorded import Recorded
from plansim.errors import InputError

SCHEMA = "plansim.calibration.v1"


@dataclass(frozen=True, slots=True)
class FamilyResult:
    """One fitted family: parameters (the overhead last) with start, value, interval and whether
    the trace determines each; the bootstrap draws; training error (weighted mean square cell
    residual); held-out score; the deployment keys of the fit; the work it took."""

    family: str
    summary: str
    parameters: tuple[Parameter, ...]
    start: np.ndarray
    values: np.ndarray
    low: np.ndarray
    high: np.ndarray
    standard_error: np.ndarray
    identified: np.ndarray
    draws: np.ndarray
    train_error: float
    held_out: Score
    overrides: dict[str, Any]
    replays: int
    evaluations: int
    status: str
    wall_s: float

    def parameters_json(self) -> list[dict[str, Any]]:
        return [
            {
                "name": p.name,
                "unit": p.unit,
                "value": float(v),
                "start": float(s),
                "low": float(lo),
                "high": float(hi),
                "level": LEVEL,
                "standard_error": float(se) if np.isfinite(se) else None,
                "identified": bool(ok),
            }
            for p, v, s, lo, hi, se, ok in zip(
                self.parameters,
                self.values,
                self.start,
                self.low,
                self.high,
                self.standard_error,
                self.identified,
            )
        ]


@dataclass(frozen=True, slots=True)
class Calibration:
    """The answer of ``calibrate``: the chosen family and its deployment keys, every family's
    fit, the chosen fit's per-window errors and bootstrap draws (deployment keys), the fast
    estimate, the requests' ids and arrivals, their recorded and replayed latencies (for the
    report), each request's window, which windows were held out, notes."""

    family: str
    overrides: dict[str, Any]
    families: tuple[FamilyResult, ...]
    windows: list[WindowError]
    request_id: np.ndarray
    arrival_ms: np.ndarray
    draws: tuple[dict[str, Any], ...]
    estimate: FastEstimate
    recorded: Recorded
    replayed: Any
    window_of: np.ndarray
    held_out: np.ndarray
    notes: tuple[str, ...]
    requests: int
    wall_s: float

    @property
    def chosen(self) -> FamilyResult:
        return next(f for f in self.families if f.family == self.family)

    def held_out_summary(self) -> dict[str, Any]:
        """Per metric over the held-out windows: the median relative error and the worst."""
        held = [w for w in self.windows if w.held_out]
        out: dict[str, Any] = {"windows": len(held)}
        for m in (*METRICS, "goodput_ratio"):
            values = [w.error[m] for w in held if np.isfinite(w.error.get(m, np.nan))]
            if values:
                out[m] = {"median": float(np.median(values)), "worst": float(max(values, key=abs))}
        return out

    def to_json(self) -> dict[str, Any]:
        e = self.estimate
        return {
            "schema": SCHEMA,
            "family": self.family,
            "deployment_keys": self.overrides,
            "parameters": self.chosen.parameters_json(),
            "held_out": self.held_out_summary(),
            "windows": [w.to_json() for w in self.windows],
            "families": [
                {
                    "name": f.family,
                    "summary": f.summary,
                    "chosen": f.family == self.family,
                    "parameters": f.parameters_json(),
                    "train_error": f.train_error,
                    "held_out_error": {
                        "mean": f.held_out.mean,
                        "se": f.held_out.se,
                        "per_window": {str(k): v for k, v in f.held_out.per_window.items()},
                    },
                    "replays": f.replays,
                    "evaluations": f.evaluations,
                    "status": f.status,
                }
                for f in self.families
            ],
            "draws": list(self.draws),
            "fast_estimate": {
                "prefill": list(e.prefill),
                "decode": list(e.decode),
                "prefill_scale": e.prefill_scale,
                "decode_scale": e.decode_scale,
                "overhead_ms": e.overhead_ms,
                "unqueued_prefill_requests": e.unqueued_prefill,
                "multi_chunk_requests": e.multi_chunk,
                "decode_requests": e.decode_requests,
            },
            "requests": {
                "total": self.requests,
                "scored": int(self.recorded.scored.sum()),
                "unrecorded": self.recorded.unrecorded,
            },
            "notes": list(self.notes),
            "host": {
                "wall_s": self.wall_s,
                "family_wall_s": {f.family: f.wall_s for f in self.families},
            },
        }


@dataclass(frozen=True, slots=True)
class TimingDraws:
    """What ``plansim capacity --calibration`` takes from a ``calibration.json``: the fitted
    deployment keys and the bootstrap draws of them."""

    source: str
    family: str
    keys: dict[str, Any]
    draws: tuple[dict[str, Any], ...]


def load_timing_draws(path: str | Path) -> TimingDraws:
    """Read a ``calibration.json``; ``InputError`` naming the file and field for anything else."""
    import orjson

    source = str(path)
    try:
        data = orjson.loads(Path(path).read_bytes())
    except OSError as exc:
        raise InputError(f"cannot read file: {exc.strerror}", source=source) from None
    except orjson.JSONDecodeError as exc:
        raise InputError(f"not valid JSON: {exc}", source=source) from None
    if not isinstance(data, Mapping) or data.get("schema") != SCHEMA:
        raise InputError(
            f"not a calibration.json of plansim calibrate (schema {SCHEMA})",
            source=source,
            field="schema",
        )
    keys, draws = data.get("deployment_keys"), data.get("draws")
    if not isinstance(keys, Mapping) or not keys:
        raise InputError("missing or empty", source=source, field="deployment_keys")
    if (
        not isinstance(draws, Sequence)
        or not draws
        or not all(isinstance(d, Mapping) and set(d) == set(keys) for d in draws)
    ):
        raise InputError(
            "must be a non-empty list of mappings with the keys of deployment_keys",
            source=source,
            field="draws",
        )
    return TimingDraws(
        source, str(data.get("family", "")), dict(keys), tuple(dict(d) for d in draws)
    )
