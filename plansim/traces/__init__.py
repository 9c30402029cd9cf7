"""Trace formats, the columnar ``Workload``, windows, buckets and synthetic traffic.

``load_workload`` is imported on first use, so that modules needing only ``Workload`` (the
simulator, the planner) do not pay for pandas and pyarrow at import time.
"""

from typing import TYPE_CHECKING, Any

from plansim.traces.workload import Workload

if TYPE_CHECKING:
    from plansim.traces.load import load_workload

__all__ = ["Workload", "load_workload"]


def __getattr__(name: str) -> Any:
    if name == "load_workload":
        from plansim.traces.load import load_workload

        return load_workload
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
