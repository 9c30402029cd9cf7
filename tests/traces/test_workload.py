"""Workload.rows: a contiguous run of requests with its own hashes."""

from __future__ import annotations

import numpy as np

from plansim.traces.workload import Workload


def _workload() -> Workload:
    # request i has i + 1 blocks: ids 10*i, 10*i + 1, ...
    counts = np.arange(1, 5)
    offsets = np.concatenate([[0], np.cumsum(counts)])
    ids = np.concatenate([10 * i + np.arange(c) for i, c in enumerate(counts)])
    return Workload(
        arrival_ms=np.array([0.0, 5.0, 9.0, 20.0]),
        isl_tokens=counts * 64,
        osl_tokens=np.array([3, 4, 5, 6]),
        request_id=np.array(["a", "b", "c", "d"], dtype=object),
        hash_offsets=offsets,
        hash_ids=ids,
        trace_block_size=64,
        recorded_ttft_ms=np.array([1.0, 2.0, 3.0, 4.0]),
        sources=("x",),
    )


def test_rows_keeps_the_requests_and_their_own_hashes():
    part = _workload().rows(1, 3)
    assert len(part) == 2
    assert part.arrival_ms.tolist() == [5.0, 9.0]
    assert part.request_id.tolist() == ["b", "c"]
    assert part.hashes(0).tolist() == [10, 11]
    assert part.hashes(1).tolist() == [20, 21, 22]
    assert part.hash_offsets.tolist() == [0, 2, 5]
    assert part.recorded_ttft_ms.tolist() == [2.0, 3.0]
    assert part.recorded_total_ms is None and part.sources == ("x",)


def test_rows_refuses_a_closed_loop_workload():
    import dataclasses

    import pytest

    closed = dataclasses.replace(_workload(), graph=object())
    with pytest.raises(ValueError, match="closed-loop"):
        closed.rows(0, 2)
