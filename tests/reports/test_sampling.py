"""Downsampling: every on-screen series is bounded, and the reductions are the stated ones."""

from __future__ import annotations

import numpy as np

from plansim.reports.sampling import (
    CDF_LEVELS,
    bin_series,
    bin_width_s,
    binned_percentiles,
    fraction_at_most,
    quantile_cdf,
    thin_events,
    time_unit,
)


def test_short_series_are_unchanged():
    t, ys = bin_series(np.arange(4.0), {"v": np.array([5.0, 6.0, 7.0, 8.0])}, max_points=4)
    assert t.tolist() == [0, 1, 2, 3] and ys["v"].tolist() == [5, 6, 7, 8]


def test_long_series_are_binned_to_the_mean_or_max_of_equal_time_bins():
    # t = 0..9 cut into 5 bins of width 1.8: {0,1} {2,3} {4,5} {6,7} {8,9}
    t = np.arange(10.0)
    times, means = bin_series(t, {"v": t}, max_points=5)
    assert times.tolist() == [0.5, 2.5, 4.5, 6.5, 8.5]
    assert means["v"].tolist() == [0.5, 2.5, 4.5, 6.5, 8.5]
    _, maxima = bin_series(t, {"v": t}, max_points=5, how="max")
    assert maxima["v"].tolist() == [1, 3, 5, 7, 9]


def test_thinning_keeps_every_change_of_label():
    labels = np.array(["a"] * 7 + ["rare"] + ["a"] * 92, dtype=object)
    kept = thin_events(labels, max_points=10)
    assert len(kept) <= 10
    assert {0, 7, 8} <= set(kept.tolist())


def test_cdf_size_does_not_depend_on_sample_count():
    small, p_small = quantile_cdf(np.arange(1.0, 101.0))
    large, _ = quantile_cdf(np.arange(1.0, 100_001.0))
    assert len(small) == len(large) == len(CDF_LEVELS)
    assert small[0] == 1.0 and small[-1] == 100.0
    assert p_small[0] == 0.0 and p_small[-1] == 1.0 and np.all(np.diff(p_small) > 0)


def test_cdf_ignores_nan_and_is_empty_without_samples():
    x, _ = quantile_cdf(np.array([np.nan, 2.0, np.nan]))
    assert set(x.tolist()) == {2.0}
    assert quantile_cdf(np.array([np.nan]))[0].size == 0


def test_fraction_at_most_counts_finite_values():
    assert fraction_at_most(np.array([1.0, 2.0, 3.0, 4.0, np.nan]), 2.5) == 0.5


def test_percentiles_per_time_bin():
    starts, q = binned_percentiles(
        np.array([0.0, 10.0, 70.0, 80.0, 90.0]),
        np.array([1.0, 3.0, 10.0, 20.0, 30.0]),
        60.0,
        (50.0, 100.0),
    )
    assert starts.tolist() == [0.0, 60.0]
    assert q[50.0].tolist() == [2.0, 20.0]
    assert q[100.0].tolist() == [3.0, 30.0]


def test_bin_width_is_the_smallest_nice_width_that_fits():
    assert bin_width_s(3600.0, max_bins=1000) == 5.0  # needs 3.6 s
    assert bin_width_s(86400.0, max_bins=1000) == 120.0  # needs 86.4 s
    assert bin_width_s(3600.0, max_bins=1000, minimum_s=60.0) == 60.0


def test_time_unit_follows_the_span():
    assert time_unit(600.0).label == "s"
    assert time_unit(3600.0).label == "min"
    assert time_unit(86400.0).label == "h"


def test_empty_bins_become_gaps():
    from plansim.reports.sampling import with_gaps

    starts, values = with_gaps(
        np.array([0.0, 60.0, 240.0]), {50.0: np.array([1.0, 2.0, 3.0])}, 60.0
    )
    assert list(starts) == [0.0, 60.0, 120.0, 180.0, 240.0]
    assert values[50.0][[0, 1, 4]].tolist() == [1.0, 2.0, 3.0]
    assert np.isnan(values[50.0][[2, 3]]).all()
