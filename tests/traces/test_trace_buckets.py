"""Per-interval buckets: counts, averages, kept empty intervals, origin."""

from __future__ import annotations

import numpy as np
import pytest

from plansim.errors import InputError
from plansim.traces.buckets import bucket_arrays


def test_counts_and_averages_with_empty_interval_in_between():
    # Interval 10 s from the first arrival at 1_000 ms: buckets [0,10), [10,20), [20,30) s.
    arrival = np.array([1_000, 5_000, 25_000, 31_000])
    isl = np.array([100, 300, 50, 70])
    osl = np.array([10, 30, 1, 3])
    t = bucket_arrays(arrival, isl, osl, 10)
    assert t["interval_start"].tolist() == [0.0, 10.0, 20.0, 30.0]
    assert t["request_count"].tolist() == [2, 0, 1, 1]
    assert t["avg_isl"].tolist() == [200.0, 0.0, 50.0, 70.0]
    assert t["avg_osl"].tolist() == [20.0, 0.0, 1.0, 3.0]


def test_global_origin_drops_leading_empty_intervals():
    t = bucket_arrays(np.array([25_000.0]), np.array([1]), np.array([1]), 10, origin_ms=0)
    assert t["interval_start"].tolist() == [20.0]


def test_empty_input_and_bad_interval():
    assert len(bucket_arrays(np.array([]), np.array([]), np.array([]), 60)) == 0
    with pytest.raises(InputError):
        bucket_arrays(np.array([1.0]), np.array([1]), np.array([1]), 0)
