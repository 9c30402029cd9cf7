"""parallel_map: task order kept, no worker left behind, a failing task named, on_done called
once per task."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from proctable import alive, live_children

from plansim.workers.parallel import parallel_map


def _square_plus(x: int, y: int) -> int:
    return x * x + y


def test_parallel_map_keeps_task_order_and_leaves_no_worker():
    before = live_children(os.getpid())
    assert parallel_map(_square_plus, [(i, 1) for i in range(6)], 2) == [1, 2, 5, 10, 17, 26]
    left = [pid for pid in live_children(os.getpid()) - before if alive(pid)]
    # Python's resource tracker may stay (it ends with this process); no worker does.
    assert [
        pid for pid in left if b"resource_tracker" not in Path(f"/proc/{pid}/cmdline").read_bytes()
    ] == []


def test_parallel_map_raises_when_a_task_fails():
    with pytest.raises(RuntimeError, match=r"parallel task 1 failed: ZeroDivisionError"):
        parallel_map(divmod, [(1, 1), (1, 0)], 2)


def test_on_done_is_called_once_as_each_task_ends():
    ended = []
    assert parallel_map(
        _square_plus, [(i, 0) for i in range(5)], 2, on_done=lambda: ended.append(1)
    ) == [0, 1, 4, 9, 16]
    assert len(ended) == 5
