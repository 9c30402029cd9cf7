"""Single-threaded BLAS for small models.

statsmodels' state-space filter makes many tiny BLAS calls; with OpenBLAS using several threads,
each call waits for its helper threads, and on a busy host (other processes, parallel workers)
that wait dominates: measured on the Azure trace's 58 buckets, an ARIMA backtest took 9.4 s with
the default 2 OpenBLAS threads and 0.6 s with 1, on a 2-core host under load. The matrices are a
few rows wide, so one thread loses nothing.

``single_threaded_blas()`` sets every OpenBLAS library loaded in the process (numpy's and
scipy's wheels each bundle one) to one thread for the duration of the block and restores the
previous counts afterwards. Elsewhere (no OpenBLAS found, not Linux) it does nothing. The setting
is process-wide: a concurrent thread may briefly run its own BLAS calls single-threaded, which
changes no result.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Iterator
from contextlib import contextmanager

# Symbol suffixes used by the OpenBLAS builds bundled with numpy/scipy wheels and by system builds.
_PREFIXES = ("scipy_openblas", "openblas")
_SUFFIXES = ("64_", "")


@functools.cache
def _openblas_controls() -> tuple[tuple[ctypes._CFuncPtr, ctypes._CFuncPtr], ...]:
    """(get_num_threads, set_num_threads) of each OpenBLAS library loaded when first called."""
    try:
        with open("/proc/self/maps", encoding="utf-8", errors="replace") as maps:
            paths = sorted({line.split()[-1] for line in maps if "openblas" in line.lower()})
    except OSError:
        return ()
    controls = []
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix in _PREFIXES:
            found = None
            for suffix in _SUFFIXES:
                get = getattr(lib, f"{prefix}_get_num_threads{suffix}", None)
                set_ = getattr(lib, f"{prefix}_set_num_threads{suffix}", None)
                if get is not None and set_ is not None:
                    found = (get, set_)
                    break
            if found is not None:
                found[0].restype = ctypes.c_int
                found[1].argtypes = [ctypes.c_int]
                controls.append(found)
                break
    return tuple(controls)


@contextmanager
def single_threaded_blas() -> Iterator[None]:
    """Run the block with every loaded OpenBLAS limited to one thread."""
    controls = _openblas_controls()
    previous = [get() for get, _ in controls]
    for _, set_ in controls:
        set_(1)
    try:
        yield
    finally:
        for (_, set_), count in zip(controls, previous, strict=True):
            set_(count)
