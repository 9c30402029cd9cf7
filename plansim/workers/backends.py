"""``make_executor``: the executor a ``--backend spawn|ray`` option names (``plansim retune
window(s)``, ``plansim capacity``)."""

from __future__ import annotations

from plansim.errors import InputError
from plansim.workers.executor import Executor


def make_executor(backend: str, max_parallel: int, ray_address: str | None = None) -> Executor:
    """The executor of ``--backend spawn|ray``; ``InputError`` for a bad combination or a
    missing Ray (one line saying how to install it)."""
    if backend == "ray":
        from plansim.workers.ray_executor import RayExecutor

        return RayExecutor(max_parallel, address=ray_address)
    if backend != "spawn":
        raise InputError(f"unknown backend {backend!r} (spawn or ray)", field="--backend")
    if ray_address is not None:
        raise InputError("only with --backend ray", field="--ray-address")
    from plansim.workers.pool import SpawnPool

    return SpawnPool(max_parallel)
