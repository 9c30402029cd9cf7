"""Growable numpy columns whose memory is only what they hold.

A reader that appends block after block to a numpy array pays for growth: ``ndarray.resize``
zero-fills the capacity it adds (so spare capacity is resident memory) and realloc may copy a
buffer that malloc placed on its heap, leaving the old copy's pages behind. A ``GrowingArray``
lives in its own private anonymous memory map instead: growing remaps it (``mremap``, nothing is
copied or touched), pages become resident only when written, and ``release_tail`` /
``release_front`` hand pages that are no longer needed back to the system.
"""

from __future__ import annotations

import mmap

import numpy as np

_PAGE = mmap.PAGESIZE
_FIRST_BYTES = 1 << 20  # virtual: pages are resident only once written


class GrowingArray:
    """A 1-D array of ``dtype`` built by ``extend``; ``array()`` returns the filled part."""

    def __init__(self, dtype) -> None:
        self._dtype = np.dtype(dtype)
        self._map = _new_map(_FIRST_BYTES)
        self._n = 0

    def extend(self, values: np.ndarray) -> None:
        need = self._n + values.size
        if need * self._dtype.itemsize > len(self._map):
            self._grow(max(need * self._dtype.itemsize, 2 * len(self._map)))
        view = np.frombuffer(self._map, dtype=self._dtype, count=need)
        view[self._n :] = values
        del view
        self._n = need

    def _grow(self, nbytes: int) -> None:
        # No view of the map may be alive while it is remapped: views are made per call.
        try:
            self._map.resize(nbytes)
        except (OSError, SystemError):  # no mremap on this platform: copy into a larger map
            bigger = _new_map(nbytes)
            bigger[: len(self._map)] = self._map
            self._map.close()
            self._map = bigger

    def array(self) -> np.ndarray:
        """The values appended so far, as a writeable array backed by the map (which lives as
        long as the array). Call once: the builder is spent."""
        out = np.frombuffer(self._map, dtype=self._dtype, count=self._n)
        self._map = None
        return out


def can_release_tail(buf: np.ndarray) -> bool:
    """True when ``release_tail`` can free part of ``buf``'s memory: ``buf`` owns its memory, or
    is a ``GrowingArray`` result (a view from the start of a memory map)."""
    return buf.flags.writeable and (buf.flags.owndata or _map_of(buf) is not None)


def release_tail(buf: np.ndarray, keep_bytes: int) -> np.ndarray:
    """Give the memory of ``buf`` past its first ``keep_bytes`` back to the system and return
    the array to use from now on (``buf`` itself when it owns its memory: it is shrunk in place,
    so no other view of it may be used afterwards). Needs ``can_release_tail(buf)``."""
    mm = _map_of(buf)
    if mm is not None:
        start = -(-keep_bytes // _PAGE) * _PAGE
        if start < len(mm):
            mm.madvise(mmap.MADV_DONTNEED, start, len(mm) - start)
        return buf
    buf.resize(-(-keep_bytes // buf.itemsize), refcheck=False)  # realloc returns the tail
    return buf


def release_front(buf: np.ndarray, nbytes: int) -> None:
    """Give the whole pages among the first ``nbytes`` of ``buf`` back to the system when
    ``buf`` is a ``GrowingArray`` result; they read as zeros afterwards, so the caller must be
    done with them. Does nothing for other arrays."""
    mm = _map_of(buf)
    end = nbytes // _PAGE * _PAGE
    if mm is not None and end > 0:
        mm.madvise(mmap.MADV_DONTNEED, 0, end)


def _new_map(nbytes: int) -> mmap.mmap:
    return mmap.mmap(-1, nbytes, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)


def _map_of(buf: np.ndarray) -> mmap.mmap | None:
    """The memory map ``buf`` starts at, if it is a view from the start of one."""
    base = buf.base
    while isinstance(base, np.ndarray):
        base = base.base
    if not (isinstance(base, memoryview) and isinstance(base.obj, mmap.mmap)):
        return None
    start = np.frombuffer(base.obj, dtype=np.uint8, count=1).ctypes.data
    return base.obj if buf.ctypes.data == start else None
