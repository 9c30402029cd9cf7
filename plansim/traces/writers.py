"""Writers: a ``Workload`` as a Dynamo request trace or as Mooncake JSONL.

Both write to a temporary file in the target folder and rename it, so a reader never sees half a
trace. Block hashes are written as the workload's prefix-chain ids: each id names its whole
prefix, so they are valid rolling hashes for the Dynamo format and valid ``hash_ids`` for
Mooncake.
"""

from __future__ import annotations

import gzip
import math
import os
from pathlib import Path

import numpy as np
import orjson

from plansim.io import atomic_open
from plansim.traces.dynamo import SCHEMA
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
    ``output_length``, ``hash_ids``, ``request_id``. The block size is not stored in the format:
    read the file back with ``--trace-block-size`` equal to ``workload.trace_block_size``."""
    n = len(workload)
    t0 = float(workload.arrival_ms[0]) if n else 0.0
    stamps = (workload.arrival_ms - t0).tolist()
    isl = workload.isl_tokens.tolist()
    osl = workload.osl_tokens.tolist()
    offsets = workload.hash_offsets.tolist()
    with atomic_open(path) as fh:
        for lo in range(0, n, _ROWS_PER_MEMBER):
            rows = [
                orjson.dumps(
                    {
                        "timestamp": _num(stamps[i]),
                        "input_length": isl[i],
                        "output_length": osl[i],
                        "hash_ids": workload.hash_ids[offsets[i] : offsets[i + 1]].tolist(),
                        "request_id": str(workload.request_id[i]),
                    }
                )
                for i in range(lo, min(lo + _ROWS_PER_MEMBER, n))
            ]
            fh.write(b"\n".join(rows) + b"\n")
    return Path(path)
