"""The Mooncake session form as a ``RequestGraph`` (rules of the reference replay).

Rows that share a ``session_id`` are the turns of one session, in file order (over all files,
in the order given). A turn is released when the previous turn of its session has finished
(completed or been rejected), plus its think time:

- the first turn needs a ``timestamp`` (its arrival) and must not carry a ``delay``;
- a later turn's think time is its ``delay``; without one, the gap between its ``timestamp``
  and the latest earlier timestamp of its session (negative is an error); without either, 0;
- a later turn's own timestamp does not move its release (it only serves as the open-loop
  arrival estimate);
- rows without a ``session_id`` arrive open-loop at their timestamp.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from plansim.errors import TraceError
from plansim.traces.graph import TERMINAL, Edges, RequestGraph, build_graph


@dataclass(slots=True)
class MooncakeLinks:
    """Session columns of one file, row by row: ``session`` (object: str or None) and
    ``delay_ms`` (float64, NaN where absent)."""

    session: np.ndarray
    delay_ms: np.ndarray


def mooncake_graph(
    parts: list, request_id: np.ndarray, locate: Callable[[int], tuple[str, int]]
) -> RequestGraph | None:
    """The graph of concatenated Mooncake ``TraceColumns`` parts; ``None`` without sessions."""
    if all(p.links is None for p in parts):
        return None
    session = np.concatenate([_sessions(p) for p in parts])
    delay = np.concatenate(
        [p.links.delay_ms if p.links is not None else np.full(len(p), np.nan) for p in parts]
    )
    ts = np.concatenate([p.arrival_ms for p in parts])
    codes, uniques = _factorize(session)
    inside = np.flatnonzero(codes >= 0)
    rows = inside[np.argsort(codes[inside], kind="stable")]  # by session, then file order
    first = np.r_[True, codes[rows[1:]] != codes[rows[:-1]]] if rows.size else np.zeros(0, bool)

    def fail(row: int, message: str, fld: str) -> TraceError:
        src, line = locate(int(row))
        return TraceError(message, source=src, line=line, field=fld)

    starts = rows[first]
    bad = starts[~np.isnan(delay[starts])]
    if bad.size:
        row = int(bad.min())
        raise fail(
            row,
            f"delay on the first turn of session {session[row]!r}: a session's "
            "first turn has a timestamp; later turns have a delay",
            "delay",
        )
    bad = starts[np.isnan(ts[starts])]
    if bad.size:
        row = int(bad.min())
        raise fail(
            row,
            f"session {session[row]!r} starts without a first turn: this row has no "
            "timestamp (a later turn without the turn it follows)",
            "timestamp",
        )

    has_ts = ~np.isnan(ts[rows])
    last_ts_at = np.maximum.accumulate(np.where(has_ts, np.arange(rows.size), -1))
    later = np.flatnonzero(~first)
    target, source = rows[later], rows[later - 1]
    prev_ts = ts[rows[last_ts_at[later - 1]]]
    gap = ts[target] - prev_ts
    bad = target[np.isnan(delay[target]) & (gap < 0)]
    if bad.size:
        row = int(bad.min())
        raise fail(
            row,
            f"timestamp {ts[row]:g} is before the previous turn's of session "
            f"{session[row]!r}; give a delay, or timestamps in order",
            "timestamp",
        )
    delay_ms = np.where(np.isnan(delay[target]), np.nan_to_num(gap, nan=0.0), delay[target])

    not_before = ts.copy()
    not_before[target] = np.nan  # a later turn waits for its predecessor only
    edges = Edges(target, source, delay_ms, np.full(target.size, TERMINAL, dtype=np.int8))
    return build_graph(
        len(ts),
        not_before,
        edges,
        codes,
        np.asarray(uniques, dtype=object),
        request_id=request_id,
        locate=locate,
    )


def _factorize(session: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Codes (int64, by first appearance; -1 for ``None``) and the distinct session ids in that
    order. A dict, not ``pandas.factorize``: loading a trace does not import pandas."""
    index: dict[str, int] = {}
    codes = np.fromiter(
        (-1 if s is None else index.setdefault(s, len(index)) for s in session.tolist()),
        dtype=np.int64,
        count=len(session),
    )
    uniques = np.empty(len(index), dtype=object)
    uniques[:] = list(index)
    return codes, uniques


def _sessions(part) -> np.ndarray:
    if part.links is not None:
        return part.links.session
    out = np.empty(len(part), dtype=object)
    out[:] = None
    return out
