"""Every pass of every engine rank, for a timeline of a replay: ``PassLog``.

A replay asked for one (``sim.host.replay(..., pass_log=PassLog())``) gives each rank the log;
the rank calls ``add`` as a pass or a run of passes ends, before applying it, and the log keeps
one row per pass: the rank, its start and end (virtual ms), the prompt requests and tokens it
scheduled, the decoding requests and their KV tokens. A run of passes timed in one step adds
each of its passes (a decode run's pass ``j`` holds every request's KV plus ``j`` tokens).

``trace_events(pool_of)`` is the log as a Chrome trace (the Trace Event Format that
chrome://tracing and ui.perfetto.dev open, as Vidur writes its replica timelines): one process
per worker, one thread per data-parallel rank, one complete event per pass named after what it
did (``prefill``, ``mixed``, ``decode``), microseconds of virtual time.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from plansim.sim.pass_runs import DecodeRun, PromptRun

# Columns of a row: worker, dp rank, start ms, end ms, prompt requests, prompt tokens, decoding
# requests, their KV tokens.
COLUMNS = (
    "worker_id",
    "dp_rank",
    "start_ms",
    "end_ms",
    "prefill_requests",
    "prefill_tokens",
    "decode_requests",
    "decode_kv_tokens",
)


class PassLog:
    """The passes of a replay's ranks, in the order they end (see the module docstring)."""

    def __init__(self) -> None:
        self.rows: list[tuple[int, int, float, float, int, int, int, int]] = []

    def add(self, rank: Any, end_ms: float, run: DecodeRun | PromptRun | None) -> None:
        """The pass (``run`` None: the rank's last scheduled pass) or run ending at ``end_ms``
        on ``rank``, as its ``finish`` is about to apply it."""
        wid, dp, rows = rank.worker_id, rank.dp_rank, self.rows
        if run is None:
            f = rank._last_pass
            rows.append(
                (
                    wid,
                    dp,
                    end_ms - f.wall_s * 1000.0,
                    end_ms,
                    f.prefill_requests,
                    f.prefill_tokens,
                    f.decode_requests,
                    f.decode_kv_tokens,
                )
            )
            return
        ends, dts = run.ends_ms, run.dts_ms
        if isinstance(run, PromptRun):
            for end, dt, f in zip(ends, dts, run.fpms, strict=False):
                rows.append(
                    (
                        wid,
                        dp,
                        end - dt,
                        end,
                        f.prefill_requests,
                        f.prefill_tokens,
                        f.decode_requests,
                        f.decode_kv_tokens,
                    )
                )
            return
        if run.head is not None:  # the composed pass the run follows on from
            f = run.head
            rows.append(
                (
                    wid,
                    dp,
                    run.start_ms - f.wall_s * 1000.0,
                    run.start_ms,
                    f.prefill_requests,
                    f.prefill_tokens,
                    f.decode_requests,
                    f.decode_kv_tokens,
                )
            )
        n, kv0 = run.n, run.kv0_tokens
        for j, (end, dt) in enumerate(zip(ends, dts, strict=True)):
            rows.append((wid, dp, float(end) - float(dt), float(end), 0, 0, n, kv0 + n * j))

    def trace_events(self, pool_of: Callable[[int], str]) -> dict[str, Any]:
        """The Chrome trace of the log; ``pool_of(worker_id)`` names a worker's pool."""
        events: list[dict[str, Any]] = []
        seen: set[tuple[int, int]] = set()
        for wid, dp, start, end, n_pre, pre_tok, n_dec, kv in sorted(
            self.rows, key=lambda r: (r[0], r[1], r[2])
        ):
            if (wid, dp) not in seen:
                if not any(w == wid for w, _ in seen):
                    events.append(
                        {
                            "ph": "M",
                            "name": "process_name",
                            "pid": wid,
                            "tid": 0,
                            "args": {"name": f"{pool_of(wid)} worker {wid}"},
                        }
                    )
                events.append(
                    {
                        "ph": "M",
                        "name": "thread_name",
                        "pid": wid,
                        "tid": dp,
                        "args": {"name": f"dp rank {dp}"},
                    }
                )
                seen.add((wid, dp))
            kind = "mixed" if n_pre and n_dec else "prefill" if n_pre else "decode"
            events.append(
                {
                    "ph": "X",
                    "name": kind,
                    "cat": "pass",
                    "pid": wid,
                    "tid": dp,
                    "ts": round(start * 1000.0, 3),
                    "dur": round((end - start) * 1000.0, 3),
                    "args": {
                        "prefill_requests": n_pre,
                        "prefill_tokens": pre_tok,
                        "decode_requests": n_dec,
                        "decode_kv_tokens": kv,
                    },
                }
            )
        return {
            "traceEvents": events,
            "displayTimeUnit": "ms",
            "otherData": {"source": "plansim replay", "time": "virtual"},
        }
