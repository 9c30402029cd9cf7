"""A small in-memory window for retune tests: requests in prefix groups, no trace file."""

from __future__ import annotations

import numpy as np

from plansim.traces.workload import Workload


def grouped_workload(n: int = 48, block: int = 64) -> Workload:
    """n requests, 4 per second, in 6 prefix groups (shared first two blocks)."""
    rng = np.random.default_rng(7)
    isl = rng.integers(200, 600, n)
    ids, offsets = [], [0]
    for i, length in enumerate(isl):
        blocks = -(-int(length) // block)
        group = i % 6
        chain = [1000 * group + 1, 1000 * group + 2] + [
            10_000 + 100 * i + b for b in range(blocks - 2)
        ]
        ids.extend(chain[:blocks])
        offsets.append(len(ids))
    return Workload(
        arrival_ms=1_700_000_000_000.0 + np.arange(n) * 250.0,
        isl_tokens=isl.astype(np.int64),
        osl_tokens=rng.integers(10, 60, n).astype(np.int64),
        request_id=np.array([f"req-{i}" for i in range(n)], dtype=object),
        hash_offsets=np.array(offsets, dtype=np.int64),
        hash_ids=np.array(ids, dtype=np.int64),
        trace_block_size=block,
    )
