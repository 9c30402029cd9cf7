"""The retune window reader (Planner Design, "Windows").

Window k covers trace time ``[start_ms, end_ms)`` and is censored at ``cutoff_ms`` (L_k). Rules:

- only ``request_end`` rows of ``dynamo.request.trace.v1`` files are read; tool,
  ``router_selection`` and ``request_payload`` rows are dropped and ``agent_context`` is stripped,
  so the window replays open-loop;
- arrival = ``request_received_ms``, else ``event_time_unix_ms - total_time_ms``; completion =
  ``request_received_ms + total_time_ms`` when both exist, else ``event_time_unix_ms``;
- a request belongs to the window when it arrived in ``[start_ms, end_ms)`` and completed at or
  before ``cutoff_ms`` (completion from the latency recorded in the trace);
- a repeated ``request_id`` keeps its first row (files in sorted order, rows in file order);
- a malformed line or gzip stream raises ``TraceError``.

Counts (``Window.counts``, rows of this window unless said otherwise): ``requests`` kept,
``dropped_no_output_tokens``, ``censored`` (completed after the cutoff), ``duplicate`` (repeats
of an earlier request_id), ``censor_unavailable`` (no ``total_time_ms``, so completion is the
row's emission time ``event_time_unix_ms``), ``agent_context_stripped`` (kept rows that had an
``agent_context``) and ``history_requests`` (requests that arrived before the window, from the
trace and the extra history files). Non-zero counts are logged at INFO; an empty window logs
all of them, so the log shows why it was empty.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from plansim.errors import TraceError
from plansim.registry import load_target
from plansim.traces.columns import TraceColumns, check_block_size, concat_columns, take_rows
from plansim.traces.detect import detect_format
from plansim.traces.formats import TRACE_FORMATS, windowed
from plansim.traces.load import workload_from_columns
from plansim.traces.request_ids import repeated
from plansim.traces.sources import resolve_paths
from plansim.traces.workload import Workload

log = logging.getLogger(__name__)

COUNT_KEYS = (
    "requests",
    "dropped_no_output_tokens",
    "censored",
    "duplicate",
    "censor_unavailable",
    "agent_context_stripped",
    "history_requests",
)

PathsArg = str | os.PathLike[str] | Iterable[str | os.PathLike[str]]


@dataclass(frozen=True, slots=True)
class Window:
    """One window: its requests (sorted by arrival, trace-time ms), the reader's counts, and the
    requests before it (``history``; empty unless asked for)."""

    workload: Workload
    counts: dict[str, int]
    history: Workload
    start_ms: float
    end_ms: float
    cutoff_ms: float


@dataclass(frozen=True, slots=True)
class _Rows:
    cols: TraceColumns
    arrival_ms: np.ndarray
    completion_ms: np.ndarray
    usable: np.ndarray  # first row of its id and has output_tokens
    duplicate: np.ndarray


def read_window(
    paths: PathsArg,
    *,
    start_ms: float,
    end_ms: float,
    cutoff_ms: float,
    history_paths: PathsArg = (),
    with_history: bool = False,
    trace_block_size: int | None = None,
) -> Window:
    """Read window ``[start_ms, end_ms)`` censored at ``cutoff_ms`` from Dynamo trace ``paths``.

    With ``with_history`` the result's ``history`` holds every usable request that arrived before
    ``start_ms`` in ``paths`` and in ``history_paths`` (earlier traffic, e.g. a warm-up trace).
    """
    rows = _read_rows(paths, trace_block_size)
    arrival, usable, dup = rows.arrival_ms, rows.usable, rows.duplicate
    in_window = (arrival >= start_ms) & (arrival < end_ms)
    base = usable & in_window
    censored = base & (rows.completion_ms > cutoff_ms)
    kept = base & ~censored
    before = usable & (arrival < start_ms)
    history_parts = [rows] if with_history else []
    n_history = int(before.sum())
    if with_history and _has_paths(history_paths):
        extra = _read_rows(history_paths, trace_block_size or rows.cols.trace_block_size)
        history_parts.append(extra)
        n_history += int((extra.usable & (extra.arrival_ms < start_ms)).sum())
    counts = {
        "requests": int(kept.sum()),
        "dropped_no_output_tokens": int((in_window & ~dup & (rows.cols.osl_tokens < 0)).sum()),
        "censored": int(censored.sum()),
        "duplicate": int((in_window & dup).sum()),
        "censor_unavailable": int((base & np.isnan(rows.cols.recorded_total_ms)).sum()),
        "agent_context_stripped": int((kept & rows.cols.has_agent_context).sum()),
        "history_requests": n_history,
    }
    _log_counts(start_ms, end_ms, cutoff_ms, counts)
    workload = _workload(rows, np.flatnonzero(kept))
    if with_history:
        history = _workload_of(
            [(r, np.flatnonzero(r.usable & (r.arrival_ms < start_ms))) for r in history_parts]
        )
    else:
        history = _workload(rows, np.zeros(0, dtype=np.int64))
    return Window(workload, counts, history, float(start_ms), float(end_ms), float(cutoff_ms))


def _has_paths(paths: PathsArg) -> bool:
    if isinstance(paths, (str, os.PathLike)):
        return True
    return len(list(paths)) > 0


def _read_rows(paths: PathsArg, trace_block_size: int | None) -> _Rows:
    files = resolve_paths(paths)
    parts = []
    for p in files:
        fmt = detect_format(p)
        reader = TRACE_FORMATS.get(fmt).windows
        if reader is None:
            raise TraceError(
                f"is a {fmt} trace; the window reader reads {windowed()}", source=str(p)
            )
        cols = load_target(reader)(p, trace_block_size=trace_block_size, strict=False)
        check_block_size(parts, cols)
        parts.append(cols)
    sizes = [c.trace_block_size for c in parts if c.trace_block_size]
    cols = concat_columns(parts)
    cols.trace_block_size = sizes[0] if sizes else (trace_block_size or 0)
    received, total, event = cols.arrival_ms, cols.recorded_total_ms, cols.event_time_ms
    arrival = np.where(np.isnan(received), event - total, received)
    missing = np.flatnonzero(np.isnan(arrival))
    if missing.size:
        i = int(missing[0])
        src, line = _locate(parts, i)
        raise TraceError(
            "request_end row has no request_received_ms, and no event_time_unix_ms and "
            "total_time_ms to derive the arrival from",
            source=src,
            line=line,
            field="request_received_ms",
        )
    completion = np.where(np.isnan(received) | np.isnan(total), event, received + total)
    dup = repeated(cols.request_id)
    usable = ~dup & (cols.osl_tokens >= 0)
    return _Rows(cols, arrival, completion, usable, dup)


def _locate(parts: list[TraceColumns], row: int) -> tuple[str, int]:
    for c in parts:
        if row < len(c):
            return c.source, int(c.line[row])
        row -= len(c)
    raise IndexError(row)


def _workload(rows: _Rows, picked: np.ndarray) -> Workload:
    return _workload_of([(rows, picked)])


def _workload_of(picks: list[tuple[_Rows, np.ndarray]]) -> Workload:
    parts = []
    for rows, picked in picks:
        sub = take_rows(rows.cols, picked)
        sub.arrival_ms = rows.arrival_ms[picked]
        parts.append(sub)
    return workload_from_columns(parts, has_latencies=True)


def _log_counts(start_ms: float, end_ms: float, cutoff_ms: float, counts: dict[str, int]) -> None:
    shown = counts if counts["requests"] == 0 else {k: v for k, v in counts.items() if v}
    log.info(
        "window [%.0f, %.0f) ms, cutoff %.0f ms: %s",
        start_ms,
        end_ms,
        cutoff_ms,
        ", ".join(f"{k}={v}" for k, v in shown.items()),
    )
