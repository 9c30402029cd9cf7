"""Tolerant access to result tables: optional columns, alternative spellings, the SLA.

Reports read tables written by other modules (and by older versions of them). A missing optional
column means a chart is skipped with a note, never an exception; these helpers make that check
one line.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from plansim.schema import GOODPUT_SLA_KEYS, PLANNER_TARGET_KEYS


def has(frame: pd.DataFrame | None, *columns: str) -> bool:
    """True when ``frame`` exists, has rows and has every one of ``columns``."""
    return frame is not None and len(frame) > 0 and all(c in frame.columns for c in columns)


def first_column(frame: pd.DataFrame | None, names: Sequence[str]) -> str | None:
    """The first of ``names`` that ``frame`` has with at least one non-null value."""
    if frame is None:
        return None
    for name in names:
        if name in frame.columns and frame[name].notna().any():
            return name
    return None


def floats(frame: pd.DataFrame, column: str) -> np.ndarray:
    """A column as float64 (non-numeric values become NaN)."""
    return pd.to_numeric(frame[column], errors="coerce").to_numpy(dtype=np.float64, na_value=np.nan)


def missing(frame: pd.DataFrame | None, table: str, *columns: str) -> str:
    """The note shown in place of a chart whose inputs are absent."""
    if frame is None or len(frame) == 0:
        return f"Not shown: {table} is absent or empty."
    absent = [c for c in columns if c not in frame.columns]
    return f"Not shown: {table} has no column {', '.join(absent)}."


def finite_number(value: Any) -> float | None:
    """``value`` as a finite float; None for booleans, non-numbers, NaN and infinities."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if np.isfinite(out) else None


def find_sla(
    inputs: Mapping[str, Any] | None, summary: Mapping[str, Any] | None = None
) -> dict[str, float]:
    """Latency bounds in ms from a run's ``inputs.json`` (only those set): the goodput SLA's
    (``ttft_ms``, ``tpot_ms``, ``e2e_ms``) from a top-level ``sla`` block first, then the
    deployment's; the planner's TTFT target where the SLA has none, and its ITL target
    (``itl_ms``)."""
    inputs = inputs or {}
    places: list[tuple[Any, Sequence[str]]] = [(inputs.get("sla"), GOODPUT_SLA_KEYS)]
    for key in ("deployment", "config"):
        block = inputs.get(key)
        if isinstance(block, Mapping):
            places.append((block.get("sla"), GOODPUT_SLA_KEYS))
            places.append((block.get("planner"), PLANNER_TARGET_KEYS))
    places.append((inputs.get("planner"), PLANNER_TARGET_KEYS))
    if summary:
        places.append((summary.get("sla"), GOODPUT_SLA_KEYS))
    found: dict[str, float] = {}
    for place, keys in places:
        found = {**bounds(place, keys), **found}
    return found


def bounds(block: Any, keys: Sequence[str] = GOODPUT_SLA_KEYS) -> dict[str, float]:
    """The positive finite latency bounds among ``keys`` of a config block (ms); {} for a
    block that is not a mapping. For the goodput SLA's keys, a block written before TPOT had
    its name (``itl_ms``) is read as ``tpot_ms``."""
    if not isinstance(block, Mapping):
        return {}
    if "tpot_ms" in keys and "tpot_ms" not in block and "itl_ms" in block:
        block = {**block, "tpot_ms": block["itl_ms"]}
    found = {}
    for key in keys:
        value = finite_number(block.get(key))
        if value is not None and value > 0:
            found[key] = value
    return found


def first_bounds(blocks: Sequence[Any], keys: Sequence[str] = GOODPUT_SLA_KEYS) -> dict[str, float]:
    """The bounds of the first of ``blocks`` that sets any."""
    return next((found for block in blocks if (found := bounds(block, keys))), {})


def planner_targets(inputs: Mapping[str, Any] | None) -> dict[str, float]:
    """The planner's TTFT/ITL targets in ms (``ttft_ms``, ``itl_ms``; only those set) from a
    run's ``inputs.json``: its ``planner`` block, or the deployment's."""
    inputs = inputs or {}
    blocks = [inputs.get("planner")] + [
        block.get("planner")
        for block in (inputs.get("deployment"), inputs.get("config"))
        if isinstance(block, Mapping)
    ]
    return first_bounds(blocks, PLANNER_TARGET_KEYS)


def find_value(inputs: Mapping[str, Any] | None, key: str) -> Any:
    """``key`` at the top of ``inputs`` or inside its deployment/config/planner blocks."""
    inputs = inputs or {}
    if key in inputs:
        return inputs[key]
    for block_key in ("planner", "deployment", "config"):
        block = inputs.get(block_key)
        if isinstance(block, Mapping):
            if key in block:
                return block[key]
            inner = block.get("planner")
            if isinstance(inner, Mapping) and key in inner:
                return inner[key]
    return None


def pareto_front(costs: Sequence[float], goodputs: Sequence[float]) -> list[int]:
    """Indices of the points no other point beats (at most their cost for at least their
    goodput, one strictly), by cost: order by cost (higher goodput first on a tie) and keep each
    point that raises the best goodput so far."""
    order = sorted(range(len(costs)), key=lambda i: (costs[i], -goodputs[i]))
    keep, best = [], float("-inf")
    for i in order:
        if goodputs[i] > best:
            keep.append(i)
            best = goodputs[i]
    return keep
