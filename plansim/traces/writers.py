"""Writers: a ``Workload`` as a Dynamo request trace, Mooncake JSONL or agentic Mooncake.

All write to a temporary file in the target folder and rename it, so a reader never sees half a
trace. Block hashes are written as the workload's prefix-chain ids: each id names its whole
prefix, so they are valid rolling hashes for the Dynamo format and valid ``hash_ids`` for
Mooncake.

Closed-loop workloads: Mooncake JSONL holds sessions (``session_id``, ``delay``) when every
dependency is a session's turn following its previous turn; agentic Mooncake holds any graph.
The Dynamo form records arrivals only, so a closed-loop workload is refused there.
"""

from __future__ import annotations

import gzip
import math
import os
from pathlib import Path

import numpy as np
import orjson

from plansim.errors import InputError
from plansim.io import atomic_open
from plansim.traces.agentic_header import SCHEMA as AGENTIC_SCHEMA
from plansim.traces.agentic_header import VERSION as AGENTIC_VERSION
from plansim.traces.dynamo_batch import SCHEMA
from plansim.traces.graph import DISPATCH, TERMINAL, RequestGraph
from plansim.traces.workload import Workload

_ROWS_PER_MEMBER = 10_000  # one gzip member per flush, as the Dynamo writer does


def _num(x: float) -> int | float:
    """JSON number: an int when integral (ms timestamps stay integers)."""
    return int(x) if float(x).is_integer() else float(x)


def write_dynamo(
    workload: Workload,
    path: str | os.PathLike[str],
    *,
    ttft_ms: np.ndarray | None = None,
    total_ms: np.ndarray | None = None,
    epoch_ms: float = 0.0,
    model: str | None = None,
) -> Path:
    """Write ``dynamo.request.trace.v1`` ``request_end`` rows (bare records, multi-member gzip).

    ``request_received_ms`` is ``round(epoch_ms + arrival_ms)`` (the format holds integer ms).
    Latencies: ``ttft_ms`` / ``total_ms`` (e.g. from a simulated replay) or else the workload's
    recorded ones; NaN entries are left out. ``event_time_unix_ms`` is received + round(total)
    when the total is known, else the received time.
    """
    if workload.graph is not None:
        raise InputError(
            "a Dynamo request trace records arrivals, not the dependencies of this "
            "closed-loop workload; write mooncake (sessions) or agentic_mooncake",
            field="--to",
        )
    n = len(workload)
    ttft = workload.recorded_ttft_ms if ttft_ms is None else np.asarray(ttft_ms, dtype=float)
    total = workload.recorded_total_ms if total_ms is None else np.asarray(total_ms, dtype=float)
    for name, arr in (("ttft_ms", ttft), ("total_ms", total)):
        if arr is not None and arr.shape != (n,):
            raise ValueError(f"{name} has {arr.shape[0]} entries, workload has {n} requests")
    received = np.round(workload.arrival_ms + epoch_ms).astype(np.int64).tolist()
    isl = workload.isl_tokens.tolist()
    osl = workload.osl_tokens.tolist()
    offsets = workload.hash_offsets.tolist()
    ids = workload.hash_ids
    bs = int(workload.trace_block_size)
    with atomic_open(path) as raw:
        for lo in range(0, n, _ROWS_PER_MEMBER):
            out = []
            for i in range(lo, min(lo + _ROWS_PER_MEMBER, n)):
                req: dict = {
                    "request_id": str(workload.request_id[i]),
                    "input_tokens": isl[i],
                    "output_tokens": osl[i],
                    "request_received_ms": received[i],
                }
                if model is not None:
                    req["model"] = model
                event_time = received[i]
                if ttft is not None and not math.isnan(ttft[i]):
                    req["ttft_ms"] = float(ttft[i])
                if total is not None and not math.isnan(total[i]):
                    req["total_time_ms"] = float(total[i])
                    event_time = received[i] + int(round(float(total[i])))
                req["replay"] = {
                    "trace_block_size": bs,
                    "input_length": isl[i],
                    "input_sequence_hashes": ids[offsets[i] : offsets[i + 1]].tolist(),
                }
                out.append(
                    orjson.dumps(
                        {
                            "schema": SCHEMA,
                            "event_type": "request_end",
                            "event_time_unix_ms": event_time,
                            "request": req,
                        }
                    )
                )
            raw.write(gzip.compress(b"\n".join(out) + b"\n", compresslevel=6, mtime=0))
    return Path(path)


def write_mooncake(workload: Workload, path: str | os.PathLike[str]) -> Path:
    """Write Mooncake JSONL: ``timestamp`` (ms after the first arrival), ``input_length``,
    ``output_length``, ``hash_ids``, ``request_id``; with sessions, ``session_id`` on their
    turns and ``delay`` instead of ``timestamp`` on later turns (rows of a session together,
    in turn order). The block size is not stored in the format: read the file back with
    ``--trace-block-size`` equal to ``workload.trace_block_size``."""
    n = len(workload)
    graph = workload.graph
    if graph is not None and not is_session_form(graph):
        raise InputError(
            "this workload's dependencies are not sessions of turns that each "
            "follow the previous one; write agentic_mooncake",
            field="--to",
        )
    t0 = float(workload.arrival_ms.min()) if n else 0.0
    stamps = (workload.arrival_ms - t0).tolist()
    isl = workload.isl_tokens.tolist()
    osl = workload.osl_tokens.tolist()
    offsets = workload.hash_offsets.tolist()
    order = range(n) if graph is None else _session_order(workload.arrival_ms, graph).tolist()
    with atomic_open(path) as fh:
        batch: list[bytes] = []
        for i in order:
            row: dict = {
                "timestamp": _num(stamps[i]),
                "input_length": isl[i],
                "output_length": osl[i],
                "hash_ids": workload.hash_ids[offsets[i] : offsets[i + 1]].tolist(),
                "request_id": str(workload.request_id[i]),
            }
            if graph is not None and graph.session[i] >= 0:
                row["session_id"] = str(graph.session_ids[graph.session[i]])
                lo = graph.dep_offsets[i]
                if graph.dep_offsets[i + 1] > lo:
                    del row["timestamp"]
                    row["delay"] = _num(float(graph.dep_delay_ms[lo]))
            batch.append(orjson.dumps(row))
            if len(batch) == _ROWS_PER_MEMBER:
                fh.write(b"\n".join(batch) + b"\n")
                batch = []
        if batch:
            fh.write(b"\n".join(batch) + b"\n")
    return Path(path)


def is_session_form(graph: RequestGraph) -> bool:
    """Every dependency is a session's turn following its previous turn whatever became of it
    (and every later turn has one): what Mooncake's session form can say."""
    counts = np.diff(graph.dep_offsets)
    if np.any(counts > 1) or np.any(graph.dep_trigger != TERMINAL):
        return False
    rows = np.flatnonzero(counts)
    src = graph.dep_source
    if not (
        np.array_equal(graph.session[src], graph.session[rows])
        and np.all(graph.session[rows] >= 0)
        and np.array_equal(graph.turn_index[src] + 1, graph.turn_index[rows])
    ):
        return False
    return bool(np.array_equal(rows, np.flatnonzero(graph.turn_index > 0)))


def _session_order(arrival_ms: np.ndarray, graph: RequestGraph) -> np.ndarray:
    """Rows by the arrival of their session's first turn (their own outside a session), then
    by turn: the turns of a session stay together and in order."""
    n = arrival_ms.size
    inside = graph.session >= 0
    first = np.full(graph.num_sessions, np.inf)
    np.minimum.at(first, graph.session[inside], arrival_ms[inside])
    key = np.where(inside, first[np.maximum(graph.session, 0)], arrival_ms)
    return np.lexsort((graph.turn_index, np.where(inside, graph.session, -1 - np.arange(n)), key))


def write_agentic_mooncake(workload: Workload, path: str | os.PathLike[str]) -> Path:
    """Write agentic Mooncake (header, then one row per request with its dependencies; one
    play). ``not_before_ms`` is relative to the graph's origin (the first arrival for an
    open-loop workload); a session turn that follows its previous turn whatever became of it
    is written as a completion dependency (the format has no other)."""
    n = len(workload)
    graph = workload.graph
    t0 = graph.origin_ms if graph is not None else (float(workload.arrival_ms.min()) if n else 0.0)
    offsets = workload.hash_offsets.tolist()
    ids = [str(r) for r in workload.request_id.tolist()]
    header = {
        "schema": AGENTIC_SCHEMA,
        "version": AGENTIC_VERSION,
        "block_size": int(workload.trace_block_size),
        "hash_id_scope": "local",
        "source": {"format": "plansim", "digest": f"requests:{n}"},
    }
    with atomic_open(path) as fh:
        fh.write(orjson.dumps(header) + b"\n")
        for lo in range(0, n, _ROWS_PER_MEMBER):
            rows = []
            for i in range(lo, min(lo + _ROWS_PER_MEMBER, n)):
                nb = workload.arrival_ms[i] if graph is None else graph.not_before_ms[i]
                row: dict = {
                    "request_id": ids[i],
                    "play_id": "plansim",
                    "session_id": ids[i],
                    "model": "unknown",
                    "input_length": int(workload.isl_tokens[i]),
                    "output_length": int(workload.osl_tokens[i]),
                    "hash_ids": workload.hash_ids[offsets[i] : offsets[i + 1]].tolist(),
                    "not_before_ms": _num(0.0 if math.isnan(nb) else float(nb) - t0),
                }
                if graph is not None:
                    if graph.session[i] >= 0:
                        row["session_id"] = str(graph.session_ids[graph.session[i]])
                    edges = range(graph.dep_offsets[i], graph.dep_offsets[i + 1])
                    if len(edges):
                        row["dependencies"] = [
                            {
                                "request_id": ids[graph.dep_source[e]],
                                "trigger": "dispatch"
                                if graph.dep_trigger[e] == DISPATCH
                                else "completion",
                                "delay_ms": _num(float(graph.dep_delay_ms[e])),
                                "relation": "sequence",
                            }
                            for e in edges
                        ]
                rows.append(orjson.dumps(row))
            fh.write(b"\n".join(rows) + b"\n")
    return Path(path)
