"""Fixtures shared by the retune tests."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def ray_executor(request):
    """A ``RayExecutor`` on a local 2-CPU Ray instance (loopback) for one test module; the
    module's own functions are pickled by value, so Ray workers can run them."""
    from plansim.retune.ray_executor import RayExecutor, import_ray

    ray = import_ray(local=True)
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    ray.cloudpickle.register_pickle_by_value(request.module)
    with RayExecutor(max_parallel=2) as ex:
        yield ex
    ray.shutdown()
