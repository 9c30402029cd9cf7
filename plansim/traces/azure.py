"""Reader for the Azure LLM inference trace CSV (``TIMESTAMP,ContextTokens,GeneratedTokens``).

``TIMESTAMP`` is a wall-clock time with up to 9 fractional digits (the public files use 7);
arrival is its Unix time in ms. The trace has no prefix hashes, so every request gets
``ceil(ContextTokens / trace_block_size)`` blocks of its own (``raw_hashes`` is ``None``).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from plansim.errors import TraceError
from plansim.traces.columns import TraceColumns
from plansim.traces.sources import open_binary

DEFAULT_BLOCK_SIZE = 512
COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")


def read_azure(path: Path, *, trace_block_size: int | None = None) -> TraceColumns:
    """Read one Azure CSV; block size only shapes the unshared blocks (default 512)."""
    import pandas as pd  # the CSV reader; only this format needs it

    source = str(path)
    bs = DEFAULT_BLOCK_SIZE if trace_block_size is None else int(trace_block_size)
    try:
        with open_binary(path) as fh:
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
    stamps = pd.to_datetime(frame["TIMESTAMP"].str.strip(), format="ISO8601", errors="coerce",
                            utc=True)
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
        lengths[name] = arr.astype(np.int64)
    isl = lengths["ContextTokens"]
    rid = np.empty(len(frame), dtype=object)
    return TraceColumns(
        source=source,
        line=line,
        arrival_ms=arrival_ms,
        isl_tokens=isl,
        osl_tokens=lengths["GeneratedTokens"],
        request_id=rid,
        hash_counts=-(-isl // bs),
        raw_hashes=None,
        trace_block_size=bs,
    )
