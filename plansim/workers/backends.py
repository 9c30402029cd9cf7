"""``EXECUTORS``: the executors a ``--backend`` option names (``plansim retune windows``,
``plansim capacity``), each an ``ExecutorBackend`` its own module declares; the first is the
default. ``make_executor`` builds one, ``backend_help`` is the option's help.
"""

from __future__ import annotations

from plansim.errors import InputError
from plansim.registry import Registry
from plansim.workers.executor import Executor, ExecutorBackend

EXECUTORS: Registry[ExecutorBackend] = Registry(
    "executor backend",
    {
        "spawn": "plansim.workers.pool:BACKEND",
        "ray": "plansim.workers.ray_executor:BACKEND",
    },
)


def backend_help(work: str) -> str:
    """``--backend``'s help: where ``work`` runs, by backend."""
    choices = [f"{name}: {backend.about}" for name, backend in EXECUTORS.items()]
    return f"Where {work} run ({'; '.join(choices)})."


def check_address(backend: str, address: str | None) -> None:
    """``InputError`` for a cluster address the backend does not take (checked before any
    input is read)."""
    if address is not None and not EXECUTORS.get(backend).takes_address:
        takers = [name for name, other in EXECUTORS.items() if other.takes_address]
        raise InputError(f"only with --backend {' or '.join(takers)}", field="--ray-address")


def make_executor(backend: str, max_parallel: int, address: str | None = None) -> Executor:
    """The executor of ``--backend``; ``InputError`` for an unknown backend, an address it does
    not take, or a missing Ray (one line saying how to install it)."""
    if backend not in EXECUTORS:
        raise InputError(EXECUTORS.unknown(backend), field="--backend")
    check_address(backend, address)
    return EXECUTORS.get(backend).build(max_parallel, address)
