"""Growing columns in memory maps: values kept across growth, released pages read as zero."""

from __future__ import annotations

import mmap

import numpy as np

from plansim.traces import buffers
from plansim.traces.buffers import GrowingArray, can_release_tail, release_front, release_tail


def test_growing_array_keeps_every_value_across_remaps(monkeypatch):
    monkeypatch.setattr(buffers, "_FIRST_BYTES", mmap.PAGESIZE)  # several remaps
    col = GrowingArray(np.int64)
    parts = [np.arange(lo, lo + 700, dtype=np.int64) for lo in range(0, 7_000, 700)]
    for p in parts:
        col.extend(p)
    col.extend(np.zeros(0, dtype=np.int64))
    out = col.array()
    assert out.dtype == np.int64 and out.tolist() == list(range(7_000))
    out[0] = -1  # writeable
    assert out[0] == -1


def test_an_empty_growing_array_is_empty():
    assert GrowingArray(np.float64).array().size == 0


def test_release_tail_keeps_the_front_of_a_mapped_array():
    col = GrowingArray(np.uint64)
    col.extend(np.arange(200_000, dtype=np.uint64))
    arr = col.array()
    assert can_release_tail(arr)
    kept = release_tail(arr, 1_000 * 8)
    assert kept[:1_000].tolist() == list(range(1_000))
    assert not kept[-10:].any()  # released pages read as zeros


def test_release_tail_shrinks_an_owned_array():
    arr = np.arange(10, dtype=np.int64)
    assert can_release_tail(arr)
    out = release_tail(arr, 3 * 8)
    assert out is arr and arr.tolist() == [0, 1, 2]


def test_views_of_other_memory_cannot_release():
    assert not can_release_tail(np.arange(10)[2:])
    assert not can_release_tail(np.frombuffer(b"\0" * 64, dtype=np.int64))


def test_release_front_drops_whole_pages_only():
    col = GrowingArray(np.uint8)
    col.extend(np.full(3 * mmap.PAGESIZE, 7, dtype=np.uint8))
    arr = col.array()
    release_front(arr, mmap.PAGESIZE + 10)  # one whole page
    assert not arr[: mmap.PAGESIZE].any()
    assert (arr[mmap.PAGESIZE :] == 7).all()


class _NoRemap(mmap.mmap):
    """A map that cannot be resized, as where there is no mremap."""

    def resize(self, nbytes):
        raise SystemError("mmap: resizing not available--no mremap()")


def test_growth_copies_when_the_map_cannot_be_remapped(monkeypatch):
    monkeypatch.setattr(buffers, "_FIRST_BYTES", mmap.PAGESIZE)
    monkeypatch.setattr(
        buffers, "_new_map", lambda n: _NoRemap(-1, n, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    )
    col = GrowingArray(np.int32)
    for lo in range(0, 5_000, 1_000):
        col.extend(np.arange(lo, lo + 1_000, dtype=np.int32))
    assert col.array().tolist() == list(range(5_000))
