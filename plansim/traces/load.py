"""``load_workload``: any supported trace files into one columnar ``Workload``."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from pathlib import Path

import numpy as np

from plansim.errors import InputError, TraceError
from plansim.limits import MAX_ARRIVAL_MS, MAX_REQUEST_TOKENS, check_span
from plansim.traces.columns import TraceColumns, check_block_size, merge_skipped
from plansim.traces.csr import csr_take
from plansim.traces.detect import detect_format
from plansim.traces.formats import TRACE_FORMATS
from plansim.traces.graph import RequestGraph, estimated_arrival_ms
from plansim.traces.prefix import prefix_chain_ids, unshared_ids
from plansim.traces.request_ids import STRING, fill_missing, first_repeat
from plansim.traces.sources import resolve_paths
from plansim.traces.workload import Workload

PathsArg = str | os.PathLike[str] | Iterable[str | os.PathLike[str]]
# A format's graph builder: (file-order parts, request ids, row -> (file, line)) -> graph.
Linker = Callable[
    [list[TraceColumns], np.ndarray, Callable[[int], tuple[str, int]]], RequestGraph | None
]


# Rows per gather step when reordering hashes by arrival: bounds the index array's memory.
_REORDER_ROWS = 65536


def check_options(format: str, trace_block_size: int | None) -> None:
    if format.replace("-", "_") != "auto" and format.replace("-", "_") not in TRACE_FORMATS:
        raise InputError(
            f"unknown format {format!r}; choose auto, {', '.join(TRACE_FORMATS)}", field="--format"
        )
    if trace_block_size is not None and (
        isinstance(trace_block_size, bool)
        or not isinstance(trace_block_size, (int, np.integer))
        or not 0 < trace_block_size <= MAX_REQUEST_TOKENS
    ):
        raise InputError(
            f"must be an integer in [1, {MAX_REQUEST_TOKENS:,}] (tokens per hash block), got "
            f"{trace_block_size!r}",
            field="--trace-block-size",
        )


def resolve_formats(files: list[Path], format: str) -> str:
    """The one format of all ``files`` (detected when ``format`` is ``auto``)."""
    if format != "auto":
        return format.replace("-", "_")
    found = [(detect_format(p), p) for p in files]
    first_fmt, first_path = found[0]
    for fmt, p in found[1:]:
        if fmt != first_fmt:
            raise TraceError(
                f"is {fmt} but {first_path} is {first_fmt}; one format per load", source=str(p)
            )
    return first_fmt


def read_columns(
    paths: PathsArg, format: str = "auto", trace_block_size: int | None = None
) -> tuple[str, list[TraceColumns]]:
    """Resolve, detect and read every file; checks one block size across shards."""
    check_options(format, trace_block_size)
    files = resolve_paths(paths)
    fmt = resolve_formats(files, format)
    reader = TRACE_FORMATS.get(fmt)
    parts: list[TraceColumns] = []
    for p in files:
        cols = reader.read(p, trace_block_size=trace_block_size)
        check_block_size(parts, cols)
        parts.append(cols)
    if sum(len(c) for c in parts) == 0:
        raise TraceError(
            f"no request_end rows (skipped: {_fmt_counts(merge_skipped(parts))})",
            source=parts[0].source,
        )
    return fmt, parts


def load_workload(
    paths: PathsArg, format: str = "auto", trace_block_size: int | None = None
) -> Workload:
    """Read trace file(s) into a ``Workload`` sorted by arrival (stable).

    ``paths``: a file, glob or folder, or several. ``format``: ``auto`` (detect by content) or
    a name of ``TRACE_FORMATS``. ``trace_block_size``: tokens per hash block; a format without
    one of its own in the file reads with its ``block_size``, one that has it rejects a
    different value. Closed-loop traces (those of a format with a ``linker``, whose rows say
    so) load with their ``graph``.
    Raises ``TraceError`` / ``InputError`` for any bad input. Rows without an id (Mooncake,
    Azure) get their 0-based ordinal in load order as id.
    """
    fmt, parts = read_columns(paths, format, trace_block_size)
    spec = TRACE_FORMATS.get(fmt)
    return workload_from_columns(
        parts, has_latencies=spec.records_latencies, linker=spec.graph_builder()
    )


def workload_from_columns(
    parts: list[TraceColumns], *, has_latencies: bool, linker: Linker | None = None
) -> Workload:
    """Concatenate per-file columns, check unique ids, build the closed-loop graph (with
    ``linker``, the format's graph builder), sort by arrival, remap hashes.

    Consumes ``parts``: each column is moved out of its part (the part's field set to ``None``)
    as it is used, so that a file's arrays are freed as early as possible.
    """
    n = sum(len(c) for c in parts)
    skipped = merge_skipped(parts)
    sources = tuple(c.source for c in parts)
    block_size = parts[0].trace_block_size
    _check_arrivals(parts)
    rid = _request_ids(parts, n)
    _check_unique(rid, parts)
    graph = linker(parts, rid, lambda row: _locate(row, parts)) if linker is not None else None
    estimate = None
    if graph is not None:
        estimate = estimated_arrival_ms(graph)
        last = int(np.argmax(estimate))
        src, line = _locate(last, parts)
        check_span(
            (float(estimate[last]) - graph.origin_ms) / 1000.0,
            what="the trace (first release to this row's, delays added up)",
            source=src,
            line=line,
            error=TraceError,
        )
    for c in parts:  # line numbers serve error messages only, and every check is done
        c.request_id = c.line = c.links = None

    counts = _take(parts, "hash_counts", np.int64)
    if all(c.raw_hashes is None for c in parts):
        ids = unshared_ids(counts)
    else:
        ids = prefix_chain_ids(_take(parts, "raw_hashes", np.uint64), counts)  # over its buffer

    arrival = _take(parts, "arrival_ms", np.float64)
    isl = _take(parts, "isl_tokens", np.int64)
    osl = _take(parts, "osl_tokens", np.int64)
    ttft = total = None
    if has_latencies:
        ttft = _take(parts, "recorded_ttft_ms", np.float64)
        total = _take(parts, "recorded_total_ms", np.float64)

    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    if estimate is not None:
        arrival = np.where(np.isnan(arrival), estimate, arrival)
    if n > 1 and np.any(arrival[1:] < arrival[:-1]):
        order = np.argsort(arrival, kind="stable")
        arrival, isl, osl, rid = arrival[order], isl[order], osl[order], rid[order]
        if ttft is not None:
            ttft, total = ttft[order], total[order]
        offsets, ids = _reorder_csr(offsets, ids, order)
        if graph is not None:
            graph = graph.reordered(order)

    return Workload(
        arrival_ms=arrival,
        isl_tokens=isl,
        osl_tokens=osl,
        request_id=rid,
        hash_offsets=offsets,
        hash_ids=ids,
        trace_block_size=block_size,
        recorded_ttft_ms=ttft,
        recorded_total_ms=total,
        sources=sources,
        skipped=skipped,
        graph=graph,
    )


def _reorder_csr(
    offsets: np.ndarray, ids: np.ndarray, order: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    counts = np.diff(offsets)[order]
    new_offsets = np.zeros(order.size + 1, dtype=np.int64)
    np.cumsum(counts, out=new_offsets[1:])
    new_ids = np.empty_like(ids)
    for lo in range(0, order.size, _REORDER_ROWS):
        rows = order[lo : lo + _REORDER_ROWS]
        src = csr_take(offsets, rows)[1]
        new_ids[new_offsets[lo] : new_offsets[lo + rows.size]] = ids[src]
    return new_offsets, new_ids


def _request_ids(parts: list[TraceColumns], n: int) -> np.ndarray:
    """All parts' ids in load order; a row without one gets its 0-based ordinal."""
    if len(parts) == 1:
        return fill_missing(parts[0].request_id, 0)
    rid = np.empty(n, dtype=STRING)
    pos = 0
    for c in parts:
        rid[pos : pos + len(c)] = fill_missing(c.request_id, pos)
        pos += len(c)
    return rid


def _take(parts: list[TraceColumns], name: str, dtype) -> np.ndarray:
    """Column ``name`` of all parts as one array, moved out of the parts; each part's array is
    dropped once copied, so that at most one part's copy is held beside the total."""
    arrays = []
    for c in parts:
        arrays.append(getattr(c, name))
        setattr(c, name, None)
    if len(arrays) == 1:  # the common single-file case: no copy
        return arrays[0].astype(dtype, copy=False)
    out = np.empty(sum(a.size for a in arrays), dtype=dtype)
    pos = 0
    for i, a in enumerate(arrays):
        arrays[i] = None
        out[pos : pos + a.size] = a
        pos += a.size
        del a
    return out


def _check_arrivals(parts: list[TraceColumns]) -> None:
    """Refuse an arrival past ``MAX_ARRIVAL_MS`` or a span over ``MAX_SPAN_S`` before anything is
    sized by the span, naming the row that makes it (usually a timestamp in the wrong unit)."""
    # NaN: a closed-loop row released by its dependencies (checked on its estimate later).
    filled = [c for c in parts if np.any(~np.isnan(c.arrival_ms))]
    if not filled:
        return
    for c in filled:
        late = np.flatnonzero(c.arrival_ms >= MAX_ARRIVAL_MS)
        if late.size:
            raise TraceError(
                f"arrival {c.arrival_ms[late[0]]:g} ms is past the year 2286 "
                f"({MAX_ARRIVAL_MS:g} ms as a Unix time); check the timestamps' unit (ms)",
                source=c.source,
                line=int(c.line[late[0]]),
            )
    first = min(float(np.nanmin(c.arrival_ms)) for c in filled)
    last_part = max(filled, key=lambda c: float(np.nanmax(c.arrival_ms)))
    row = int(np.nanargmax(last_part.arrival_ms))
    check_span(
        (float(last_part.arrival_ms[row]) - first) / 1000.0,
        what="the trace (first arrival to this row)",
        source=last_part.source,
        line=int(last_part.line[row]),
        error=TraceError,
    )


def _check_unique(rid: np.ndarray, parts: list[TraceColumns]) -> None:
    second = first_repeat(rid)
    if second is None:
        return
    first = int(np.flatnonzero(rid == rid[second])[0])
    (src2, line2), (src1, line1) = _locate(second, parts), _locate(first, parts)
    raise TraceError(
        f"request_id {str(rid[second])!r} repeats the one at {src1}:{line1}; ids must be unique",
        source=src2,
        line=line2,
        field="request_id",
    )


def _locate(row: int, parts: list[TraceColumns]) -> tuple[str, int]:
    for c in parts:
        if row < len(c):
            return c.source, int(c.line[row])
        row -= len(c)
    raise IndexError(row)


def _fmt_counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items())) or "none"
