"""The latencies a deployment recorded: each request's TTFT and E2E from a Dynamo request trace
(``ttft_ms``, ``total_time_ms``), and its TPOT, the mean inter-token gap
``(total - ttft) / (output_tokens - 1)``.

``load_recorded(paths)`` reads the traces and checks what calibration needs, before anything is
replayed or written; each mistake is one ``InputError`` naming the file (and line and field
where one row is at fault): a format that records no latencies, a row with one latency and not
the other, a first token after the last (``ttft_ms > total_time_ms``; negative values are the
reader's), no recorded latencies at all, or fewer than ``MIN_REQUESTS`` requests with them.
Requests without recorded latencies (rejected or failed in production) are replayed with the
others but not scored.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from plansim.errors import TraceError

# Fewer requests than this cannot be cut into windows to fit on and windows to check against.
MIN_REQUESTS = 200


@dataclass(frozen=True, slots=True)
class Recorded:
    """Recorded latencies per request of the workload (its order), in ms; NaN where the trace
    has none (``tpot_ms`` also for a request of one output token)."""

    ttft_ms: np.ndarray
    e2e_ms: np.ndarray
    tpot_ms: np.ndarray

    @property
    def scored(self) -> np.ndarray:
        """Requests with recorded latencies."""
        return np.isfinite(self.ttft_ms)

    @property
    def unrecorded(self) -> int:
        return int((~self.scored).sum())

    def only(self, rows: np.ndarray) -> Recorded:
        """These latencies with those of the requests outside ``rows`` (a mask) left out."""
        return Recorded(
            *(np.where(rows, v, np.nan) for v in (self.ttft_ms, self.e2e_ms, self.tpot_ms))
        )


def recorded_of(workload: Any) -> Recorded:
    """The recorded latencies of a loaded workload (``load_recorded`` has checked them)."""
    ttft = np.asarray(workload.recorded_ttft_ms, dtype=np.float64)
    e2e = np.asarray(workload.recorded_total_ms, dtype=np.float64)
    osl = np.asarray(workload.osl_tokens)
    with np.errstate(invalid="ignore", divide="ignore"):
        tpot = np.where(osl > 1, (e2e - ttft) / np.maximum(osl - 1, 1), np.nan)
    return Recorded(ttft, e2e, tpot)


def load_recorded(
    paths: Sequence[str | Path], *, format: str = "auto", trace_block_size: int | None = None
) -> tuple[Any, Recorded]:
    """The workload of ``paths`` and its recorded latencies; ``InputError`` for what calibration
    cannot use (module docstring)."""
    from plansim.traces.formats import TRACE_FORMATS
    from plansim.traces.load import read_columns, workload_from_columns

    fmt, parts = read_columns(paths, format, trace_block_size)
    spec = TRACE_FORMATS.get(fmt)
    if not spec.records_latencies:
        raise TraceError(
            f"a {fmt} trace records no latencies; calibrate reads traces with "
            "ttft_ms and total_time_ms per request (a Dynamo request trace, "
            "dynamo.request.trace.v1)",
            source=parts[0].source,
        )
    for part in parts:
        _check_rows(part)
    names = ", ".join(p.source for p in parts)
    have = sum(int(np.isfinite(p.recorded_ttft_ms).sum()) for p in parts)
    if have == 0:
        raise TraceError(
            "no request has recorded latencies (ttft_ms and total_time_ms): "
            "calibrate needs a trace recorded by the deployment it fits",
            source=names,
        )
    if have < MIN_REQUESTS:
        raise TraceError(
            f"only {have} requests have recorded latencies; calibrate needs at "
            f"least {MIN_REQUESTS}",
            source=names,
        )
    workload = workload_from_columns(parts, has_latencies=True, linker=spec.graph_builder())
    return workload, recorded_of(workload)


def _check_rows(part: Any) -> None:
    """One file's rows: both latencies or neither, and the first token not after the last."""
    ttft, total = part.recorded_ttft_ms, part.recorded_total_ms
    one = np.isfinite(ttft) != np.isfinite(total)
    if one.any():
        i = int(np.argmax(one))
        missing = "total_time_ms" if np.isfinite(ttft[i]) else "ttft_ms"
        other = "ttft_ms" if missing == "total_time_ms" else "total_time_ms"
        raise TraceError(
            f"missing while {other} is recorded",
            source=part.source,
            line=int(part.line[i]),
            field=missing,
        )
    with np.errstate(invalid="ignore"):
        late = ttft > total
    if late.any():
        i = int(np.argmax(late))
        raise TraceError(
            f"{ttft[i]:g} ms is after total_time_ms {total[i]:g} ms (a first token after the last)",
            source=part.source,
            line=int(part.line[i]),
            field="ttft_ms",
        )


__all__ = ["MIN_REQUESTS", "Recorded", "load_recorded", "recorded_of"]
