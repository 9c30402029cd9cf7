"""Reader for the Azure LLM inference trace CSV (``TIMESTAMP,ContextTokens,GeneratedTokens``).

``TIMESTAMP`` is a wall-clock time with up to 9 fractional digits (the public files use 7);
arrival is its Unix time in ms. The trace has no prefix hashes, so every request gets
``ceil(ContextTokens / trace_block_size)`` blocks of its own (``raw_hashes`` is ``None``).

A plain file (no quotes, no blank or ragged lines, LF or CRLF line ends, naive timestamps
``YYYY-MM-DD HH:MM:SS[.f]`` and unsigned integers, like the public files) is parsed with numpy;
anything else goes to the pandas CSV reader, which also reports bad input. Both give the same
columns for a plain file.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import BinaryIO

import numpy as np

from plansim.errors import TraceError
from plansim.traces.columns import TraceColumns
from plansim.traces.lengths import check_lengths
from plansim.traces.sources import open_binary

COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


# One field of a plain file (the whole column is matched at once, one field per line).
_PLAIN_STAMP = r"(?:19|20)\d\d-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:\.\d{1,9})?"
_PLAIN_COUNT = r"\d{1,15}"  # exact through float64, as the pandas path converts
# Larger files go to the pandas reader: it streams, and its import is small beside the parse.
_PLAIN_MAX_BYTES = 16 << 20


def read_azure(path: Path, *, trace_block_size: int) -> TraceColumns:
    """Read one Azure CSV; the block size only shapes the unshared blocks (its declaration's
    ``block_size`` is the default)."""
    source = str(path)
    bs = int(trace_block_size)
    try:
        with open_binary(path) as fh:
            head = fh.read(_PLAIN_MAX_BYTES + 1)
            plain = _read_plain(head) if len(head) <= _PLAIN_MAX_BYTES else None
            if plain is None:
                fh.seek(0)
                plain = _read_pandas(fh, source)
    except (EOFError, OSError) as exc:
        raise TraceError(f"not a readable CSV: {exc}".splitlines()[0], source=source) from None
    arrival_ms, isl, osl = plain
    line = np.arange(len(isl), dtype=np.int64) + 2
    check_lengths(source, line, isl, osl, isl_field="ContextTokens", osl_field="GeneratedTokens")
    isl, osl = isl.astype(np.int64, copy=False), osl.astype(np.int64, copy=False)
    return TraceColumns(
        source=source,
        line=line,
        arrival_ms=arrival_ms,
        isl_tokens=isl,
        osl_tokens=osl,
        request_id=np.empty(len(isl), dtype=object),
        hash_counts=-(-isl // bs),
        raw_hashes=None,
        trace_block_size=bs,
    )


def _read_plain(data: bytes) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
    """(arrival ms, ContextTokens, GeneratedTokens) of a plain file, or None when it is not
    one (the pandas reader then reads it); token counts as ``_read_pandas`` gives them."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    text = text.replace("\r\n", "\n")
    if '"' in text or "\r" in text or text.startswith("\ufeff"):
        return None
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) < 2:
        return None
    header = lines[0].split(",")
    if len(set(header)) != len(header) or any(c not in header for c in COLUMNS):
        return None
    rows = [line.split(",") for line in lines[1:]]
    if any(len(row) != len(header) for row in rows):
        return None  # ragged or blank lines
    fields = list(zip(*rows))
    stamps, context, generated = (fields[header.index(c)] for c in COLUMNS)
    for column, pattern in (
        (stamps, _PLAIN_STAMP),
        (context, _PLAIN_COUNT),
        (generated, _PLAIN_COUNT),
    ):
        if re.fullmatch(f"(?:{pattern}\n)*{pattern}", "\n".join(column)) is None:
            return None
    try:
        ns = np.array(stamps).astype("datetime64[ns]")
    except ValueError:
        return None  # not a date (Feb 30, hour 24): the pandas reader names it
    # Token counts as float64, as the pandas path returns them (exact: at most 15 digits).
    return (
        ns.astype(np.int64) / 1e6,
        np.array(context).astype(np.float64),
        np.array(generated).astype(np.float64),
    )


def _read_pandas(fh: BinaryIO, source: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(arrival ms, ContextTokens, GeneratedTokens) of any CSV pandas reads; the token counts
    are float64 integers, converted by the caller once they are known to be in bounds."""
    import pandas as pd  # the general CSV reader, for files that are not plain

    try:
        frame = pd.read_csv(fh, dtype=str, keep_default_na=False, skip_blank_lines=True)
    except pd.errors.EmptyDataError:
        raise TraceError("empty file", source=source) from None
    except (pd.errors.ParserError, UnicodeDecodeError, EOFError, OSError) as exc:
        raise TraceError(f"not a readable CSV: {exc}".splitlines()[0], source=source) from None
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise TraceError(
            f"missing column(s) {', '.join(missing)}; expected header {','.join(COLUMNS)}",
            source=source,
            line=1,
            field=missing[0],
        )
    if frame.empty:
        raise TraceError("empty file (header only)", source=source)
    # Physical line of each row: header is line 1; blank lines are skipped by the parser and
    # the public files have none, so row i is on line i + 2.
    line = np.arange(len(frame), dtype=np.int64) + 2
    # utc=True: rows with different UTC offsets (a daylight-saving change) are one clock, and a
    # row without an offset is UTC, as in the public files.
    stamps = pd.to_datetime(
        frame["TIMESTAMP"].str.strip(), format="ISO8601", errors="coerce", utc=True
    )
    bad = np.flatnonzero(stamps.isna().to_numpy())
    if bad.size:
        row = int(bad[0])
        raise TraceError(
            f"TIMESTAMP {frame['TIMESTAMP'].iloc[row]!r} is not a date-time",
            source=source,
            line=int(line[row]),
            field="TIMESTAMP",
        )
    if getattr(stamps.dt, "tz", None) is not None:
        stamps = stamps.dt.tz_convert("UTC").dt.tz_localize(None)
    arrival_ms = stamps.to_numpy(dtype="datetime64[ns]").astype(np.int64) / 1e6
    lengths = {}
    for name in COLUMNS[1:]:
        text = frame[name].str.strip()
        values = pd.to_numeric(text, errors="coerce")
        arr = values.to_numpy(dtype=np.float64, na_value=np.nan)
        bad = np.flatnonzero(~np.isfinite(arr) | (arr < 0) | (arr != np.floor(arr)))
        if bad.size:
            row = int(bad[0])
            raise TraceError(
                f"{name} must be a non-negative integer, got {frame[name].iloc[row]!r}",
                source=source,
                line=int(line[row]),
                field=name,
            )
        lengths[name] = arr  # integers as float64: bounded (read_azure) before conversion
    return arrival_ms, lengths["ContextTokens"], lengths["GeneratedTokens"]
