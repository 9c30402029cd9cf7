"""Reader for Mooncake JSONL traces: one object per line with ``timestamp`` (alias
``created_time``, ms), ``input_length`` (alias ``input_tokens``), ``output_length`` (alias
``output_tokens``), ``hash_ids`` and optionally ``request_id``.

As in the reference replay, a missing ``input_length`` defaults to
``len(hash_ids) * trace_block_size`` and a larger one is refused (the prompt would be cut; the
rules of ``plansim.traces.lengths``); hash ids beyond ``ceil(input_length / trace_block_size)``
are dropped, since no token of the prompt falls in them.

Session form (closed loop): rows with a ``session_id`` (a string) are the turns of that session
in file order. The first turn has a ``timestamp`` and no ``delay``; a later turn has a ``delay``
(alias ``delay_ms``; ms after the previous turn of its session completes) and may omit the
timestamp. The reader collects the columns; ``plansim.traces.mooncake_sessions`` turns them into
the dependency graph and checks the session rules.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import orjson

from plansim.errors import TraceError
from plansim.traces.columns import I64_MAX, U64_MAX, TraceColumns
from plansim.traces.lengths import check_lengths, drop_extra_hashes
from plansim.traces.mooncake_sessions import MooncakeLinks
from plansim.traces.sources import line_batches

_TIMESTAMP = ("timestamp", "created_time")
_INPUT = ("input_length", "input_tokens")
_OUTPUT = ("output_length", "output_tokens")
_NAN = float("nan")


def _alias(rec: dict, names: tuple[str, str]):
    v = rec.get(names[0])
    return rec.get(names[1]) if v is None else v


def read_mooncake(path: Path, *, trace_block_size: int) -> TraceColumns:
    """Read one Mooncake JSONL file at ``trace_block_size`` tokens per hash id (the format does
    not store it: its declaration's ``block_size`` is the default)."""
    source = str(path)
    bs = int(trace_block_size)
    lines_out: list[np.ndarray] = []
    ts_all: list[float] = []
    isl_all: list[int] = []
    osl_all: list[int] = []
    rid_all: list = []
    session_all: list = []
    delay_all: list[float] = []
    cnt_all: list[int] = []
    hash_parts: list[np.ndarray] = []
    for first_line, lines in line_batches(path):
        idx: list[int] = []
        hashes: list = []
        for i, ln in enumerate(lines):
            if not ln.strip():
                continue
            line = first_line + i
            try:
                rec = orjson.loads(ln)
            except orjson.JSONDecodeError as exc:
                raise TraceError(
                    f"not JSON: {exc.msg} at column {exc.colno}", source=source, line=line
                ) from None
            ts, isl, osl, hs, rid, session, delay = _row(rec, source, line)
            idx.append(i)
            ts_all.append(ts)
            session_all.append(session)
            delay_all.append(delay)
            isl_all.append(isl)
            osl_all.append(osl)
            rid_all.append(rid)
            cnt_all.append(len(hs))
            hashes.extend(hs)
        lines_out.append(first_line + np.array(idx, dtype=np.int64))
        hash_parts.append(np.array(hashes, dtype=np.uint64))
    if not ts_all:
        raise TraceError("empty file", source=source)
    counts = np.array(cnt_all, dtype=np.int64)
    raw = np.concatenate(hash_parts)
    line = np.concatenate(lines_out)
    osl = np.array(osl_all, dtype=np.int64)
    isl_given = np.array([-1 if v is None else v for v in isl_all], dtype=np.int64)
    isl_arr = np.where(isl_given < 0, counts * bs, isl_given)
    check_lengths(
        source,
        line,
        isl_arr,
        osl,
        isl_field="input_length",
        osl_field="output_length",
        hash_counts=counts,
        block_size=bs,
        isl_from_hashes=isl_given < 0,
    )
    raw, counts = drop_extra_hashes(raw, counts, isl_arr, bs)
    rid = np.empty(len(rid_all), dtype=object)
    rid[:] = rid_all
    links = None
    if any(s is not None for s in session_all):
        sessions = np.empty(len(session_all), dtype=object)
        sessions[:] = session_all
        links = MooncakeLinks(session=sessions, delay_ms=np.array(delay_all, dtype=np.float64))
    return TraceColumns(
        source=source,
        line=line,
        arrival_ms=np.array(ts_all, dtype=np.float64),
        isl_tokens=isl_arr,
        osl_tokens=osl,
        request_id=rid,
        hash_counts=counts,
        raw_hashes=raw,
        trace_block_size=bs,
        links=links,
    )


def _row(rec: object, source: str, line: int):
    def fail(message: str, fld: str | None = None) -> TraceError:
        return TraceError(message, source=source, line=line, field=fld)

    if not isinstance(rec, dict):
        raise fail(f"expected a JSON object, got {type(rec).__name__}")
    session = rec.get("session_id")
    if session is not None and type(session) is not str:
        raise fail(f"session_id must be a string, got {session!r}", "session_id")
    delay = _delay(rec, fail)
    if delay is not None and session is None:
        raise fail(
            "delay needs a session_id: it is the think time after the previous turn "
            "of the same session",
            _delay_name(rec),
        )
    ts = _alias(rec, _TIMESTAMP)
    if ts is None and session is None:
        raise fail("timestamp is missing", "timestamp")
    if ts is not None and (type(ts) not in (int, float) or not math.isfinite(ts) or ts < 0):
        raise fail(f"timestamp must be a non-negative number of ms, got {ts!r}", "timestamp")
    isl = _alias(rec, _INPUT)
    if isl is not None and not (type(isl) is int and 0 <= isl <= I64_MAX):
        raise fail(f"input_length must be a non-negative integer, got {isl!r}", "input_length")
    osl = _alias(rec, _OUTPUT)
    if osl is None:
        raise fail("output_length is missing", "output_length")
    if not (type(osl) is int and 0 <= osl <= I64_MAX):
        raise fail(f"output_length must be a non-negative integer, got {osl!r}", "output_length")
    hs = rec.get("hash_ids")
    if not isinstance(hs, list):
        raise fail("hash_ids is missing or not a list", "hash_ids")
    for h in hs:
        if not (type(h) is int and 0 <= h <= U64_MAX):
            raise fail(f"hash_ids holds {h!r}, not a non-negative integer", "hash_ids")
    rid = rec.get("request_id")
    if rid is not None and type(rid) is not str:
        rid = str(rid) if type(rid) is int else None
        if rid is None:
            raise fail("request_id must be a string", "request_id")
    return (
        (_NAN if ts is None else ts),
        isl,
        osl,
        hs,
        rid,
        session,
        (_NAN if delay is None else delay),
    )


def _delay_name(rec: dict) -> str:
    return "delay" if rec.get("delay") is not None else "delay_ms"


def _delay(rec: dict, fail) -> float | None:
    """The row's ``delay`` (or ``delay_ms``) in ms, ``None`` when absent (most rows: two
    lookups)."""
    delay, delay_ms = rec.get("delay"), rec.get("delay_ms")
    if delay is None:
        if delay_ms is None:
            return None
        name, v = "delay_ms", delay_ms
    elif delay_ms is not None:
        raise fail("give delay or delay_ms, not both", "delay_ms")
    else:
        name, v = "delay", delay
    if type(v) not in (int, float) or not math.isfinite(v) or v < 0:
        raise fail(f"{name} must be a non-negative number of ms, got {v!r}", name)
    return float(v)
