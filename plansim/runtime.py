"""How the ``plansim`` command's own process runs: settings that only pay off, and are only
safe, for a process that plansim owns from start to end (the library never applies them).

- ``one_blas_thread()``: numpy's OpenBLAS with one thread unless ``OPENBLAS_NUM_THREADS`` is
  set. plansim's numeric work is on small arrays and its parallelism is processes (retune and
  capacity workers, which inherit the setting), so BLAS threads only spin: their busy-wait after
  starting and after each call cost 0.1-0.2 s of CPU a process, and a threaded dot product sums
  in an order that depends on the machine's core count (the summary's last digits did). Must
  run before numpy is imported.
- ``no_pydantic_plugins()``: pydantic does not scan every installed package's entry points
  for plugins (5-10 ms) unless ``PYDANTIC_DISABLE_PLUGINS`` is set (an empty value enables
  them): plansim's models are its own input checks, which no plugin is meant to observe.
- ``long_lived()``: a block that builds what lives until the process ends (the command's
  modules, a validated deployment, a loaded trace) runs without cyclic garbage collection, and
  what it built is then left out of every later collection (``gc.freeze``). Start-up allocates
  hundreds of thousands of such objects: collecting among them cost 25-30 ms of a replay run,
  and found almost nothing.
- ``rare_collections()``: the young generation is collected after 10,000 net allocations of
  container objects instead of CPython's 700. A replay keeps growing what it records (per-request
  and per-run lists, the KV pools' runs), so each young collection moved survivors on and the
  older one re-walked them, while a whole replay's collections found fewer than 50 objects of
  cyclic garbage: they cost 7-23 ms of a shared case's replay run, and 1-2 ms after the change.
  The threshold still bounds cyclic garbage, at a few MB. The sweep pool's workers take it too.
- ``exit_now(status)``: ends the process without the interpreter's teardown (freeing every
  module and object one by one: 40-50 ms after a replay run) once nothing is left for it to do:
  the exit handlers are run and the standard streams flushed first, and the ordinary exit is
  taken instead while another thread, a pool or a child-process manager may still need it.
"""

from __future__ import annotations

import atexit
import gc
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import NoReturn

# Modules whose presence means the teardown may still have work to do (joining pool workers and
# their feeder threads, which ``threading``'s exit hooks run before the exit handlers).
_NEEDS_TEARDOWN = ("multiprocessing", "concurrent.futures", "ray")


def one_blas_thread() -> None:
    """See the module docstring."""
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")


def no_pydantic_plugins() -> None:
    """See the module docstring."""
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


@contextmanager
def long_lived() -> Iterator[None]:
    """See the module docstring. Nests; restores whether collection was enabled."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        gc.freeze()
        if enabled:
            gc.enable()


# Young-generation threshold of ``rare_collections`` (CPython's default is 700).
_YOUNG_THRESHOLD = 10_000


def rare_collections() -> None:
    """See the module docstring. The older generations keep their multipliers."""
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(_YOUNG_THRESHOLD, older, oldest)


def exit_now(status: int) -> NoReturn:
    """End the process with ``status``, skipping the interpreter's teardown when that is safe
    (see the module docstring); otherwise ``SystemExit(status)``."""
    if _teardown_needed():
        raise SystemExit(status)
    run_exit_handlers = getattr(atexit, "_run_exitfuncs", None)
    if run_exit_handlers is None:  # not CPython's atexit: let the interpreter run them
        raise SystemExit(status)
    run_exit_handlers()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed or broken stream: the ordinary exit reports it
        raise SystemExit(status) from None
    os._exit(status)


def _teardown_needed() -> bool:
    if any(name in sys.modules for name in _NEEDS_TEARDOWN):
        return True
    if "threading" in sys.modules:
        import threading

        main = threading.main_thread()
        return any(t is not main and not t.daemon and t.is_alive() for t in threading.enumerate())
    return False
