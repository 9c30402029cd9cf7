"""Trace formats, the columnar ``Workload``, windows, buckets and synthetic traffic."""

from plansim.traces.load import load_workload
from plansim.traces.workload import Workload

__all__ = ["Workload", "load_workload"]
