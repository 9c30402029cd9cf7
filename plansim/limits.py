"""Bounds on every size plansim derives from user input, each named with its unit, so that a
typo (a timestamp in the wrong unit, ``--interval 0.000001``, ``num_workers: 100000000``) is one
line naming the limit instead of minutes of work or an allocation that exhausts memory.

``check_number(value, flag, ...)`` applies the same finite-and-bounded rule to a command-line
number that no config model validates (``--interval``, ``--epoch-ms``).

Each bound is far above what a real deployment or trace needs; the messages say which input
made the size and what the limit is. Pure: no I/O.
"""

from __future__ import annotations

import math

from plansim.errors import InputError, describe_value

# A trace's arrivals (after ``arrival_speedup_ratio``) span at most this: replays, time series
# and buckets are sized by the span. 31 days covers the longest public traces (one week).
MAX_SPAN_S = 31 * 86_400.0
# An arrival timestamp (ms) must be below this (the year 2286 as Unix ms): past it a float64
# cannot resolve a millisecond, so the virtual clock would stall.
MAX_ARRIVAL_MS = 1e13
# Workers in one pool (agg, prefill or decode), at start or after planner scaling.
MAX_POOL_WORKERS = 4096
# Engine ranks (workers x dp_size) a pool starts with: each is simulated (about 10 kB each).
MAX_POOL_RANKS = 16_384
# Worker processes of one executor (--jobs, retune.max_parallel): each is an interpreter.
MAX_WORKER_PROCESSES = 1024
# Intervals a bucket table, a predictor backtest or a planner's tick schedule may have.
MAX_BUCKETS = 1_000_000
# Requests a synthetic trace may have (rate x duration, and the sessions' turns).
MAX_SYNTH_REQUESTS = 20_000_000
# Tokens in one request's prompt or output, read from a trace or synthesized, and in one hash
# block (the longest public traces stay under 200,000).
MAX_REQUEST_TOKENS = 10_000_000
# Values of one retune search domain, and candidates of one retune grid.
MAX_RETUNE_CANDIDATES = 10_000
# Seeds are stored as int64 and fed to numpy's generators.
MAX_SEED = 2**63 - 1


def describe_span(span_s: float) -> str:
    """A span in the largest unit that keeps it readable: 42.0 s, 3.5 h, 31.7 years, 9.16e+296
    years."""
    for unit, size in (
        ("years", 365.25 * 86_400),
        ("days", 86_400.0),
        ("h", 3600.0),
        ("min", 60.0),
    ):
        if span_s >= 2 * size:
            value = span_s / size
            return f"{value:,.1f} {unit}" if value < 1e6 else f"{value:.3g} {unit}"
    return f"{span_s:,.1f} s"


def check_span(
    span_s: float,
    *,
    what: str,
    hint: str = "check the timestamps' unit: ms",
    source: str | None = None,
    line: int | None = None,
    field: str | None = None,
    error: type[InputError] = InputError,
) -> None:
    """Refuse a time span over ``MAX_SPAN_S`` with ``error``; ``what`` says whose span it is."""
    if span_s > MAX_SPAN_S:
        raise error(
            f"{what} spans {describe_span(span_s)}; plansim handles at most "
            f"{describe_span(MAX_SPAN_S)} ({hint})",
            source=source,
            line=line,
            field=field,
        )


def check_count(
    count: float,
    limit: int,
    *,
    what: str,
    field: str | None = None,
    hint: str = "",
    error: type[InputError] = InputError,
) -> None:
    """Refuse ``count`` (a number of intervals, requests, ...) over ``limit`` with ``error``."""
    if not count <= limit:
        shown = f"{count:,.0f}" if math.isfinite(count) and count < 1e15 else f"{count:.3g}"
        hint = f" ({hint})" if hint else ""
        raise error(f"{what} would be {shown}; at most {limit:,}{hint}", field=field)


def check_number(
    value: float,
    flag: str,
    *,
    gt: float | None = None,
    ge: float | None = None,
    le: float | None = None,
    unit: str = "",
) -> float:
    """``value`` of command-line option ``flag`` if it is finite and within the bounds, else an
    ``InputError`` naming the flag and what was given."""
    unit = f" {unit}" if unit else ""
    shown = describe_value(float(value))
    if not math.isfinite(value):
        raise InputError(f"must be a finite number, got {shown}", field=flag)
    if gt is not None and not value > gt:
        raise InputError(f"must be greater than {gt:g}{unit}, got {shown}", field=flag)
    if ge is not None and not value >= ge:
        raise InputError(f"must be at least {ge:g}{unit}, got {shown}", field=flag)
    if le is not None and not value <= le:
        raise InputError(f"must be at most {le:g}{unit}, got {shown}", field=flag)
    return value
