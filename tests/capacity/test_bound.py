"""The hindsight schedule: the exact cheapest schedule on given segment values (hand-computed
cases), start-up charged only for added workers, and the optimistic values of counts never
replayed."""

from __future__ import annotations

import numpy as np
import pytest

from plansim.capacity.bound import BoundInputs, SegmentValues, solve


def _inputs(
    limits, lengths, requests, *, allowed_bad=0, rates=(1.0,), startup=(0.0,), allowed=None
):
    return BoundInputs(
        limits=limits,
        allowed=np.ones(limits, dtype=bool) if allowed is None else allowed,
        worker_rates=rates,
        startup_s=startup,
        length_s=np.asarray(lengths, dtype=float),
        requests=np.asarray(requests),
        allowed_bad=allowed_bad,
        last_edge_ms=1000.0 * sum(lengths),
    )


def _grids(need, limits, good_when_met=100, otherwise=50):
    """Segment k meets all its 100 requests from ``need[k]`` workers on, half of them below."""
    values = SegmentValues([100] * len(need))
    for k, n_need in enumerate(need):
        for n in range(1, limits[0] + 1):
            values.add_segment(k, (n,), good_when_met if n >= n_need else otherwise, np.nan)
    return [values.good_grid(k, limits) for k in range(len(need))]


def test_each_segment_gets_what_it_needs_and_added_workers_pay_their_startup():
    # needs 2, 4, 2 workers; 600 s each; start-up 60 s at 1 GPU-h per worker-hour
    inputs = _inputs((6,), [600, 600, 600], [100, 100, 100], startup=(60.0,))
    schedule = solve(inputs, _grids([2, 4, 2], (6,)), {})
    assert schedule.counts == ((2,), (4,), (2,))
    # (2 + 4 + 2) workers x 600 s, plus 2 workers started for the middle segment x 60 s
    assert schedule.startup_cost == pytest.approx(2 * 60 / 3600)
    assert schedule.cost == pytest.approx((8 * 600 + 2 * 60) / 3600)


def test_startup_longer_than_a_dip_keeps_the_workers():
    # needs 4, 2, 4: dropping to 2 saves 2 x 600 s but restarting costs 2 x 900 s
    inputs = _inputs((6,), [600, 600, 600], [100, 100, 100], startup=(900.0,))
    schedule = solve(inputs, _grids([4, 2, 4], (6,)), {})
    assert schedule.counts == ((4,), (4,), (4,))
    assert schedule.cost == pytest.approx(12 * 600 / 3600)


def test_the_overall_target_lets_a_cheap_segment_fall_short():
    # 60 requests may miss overall: the middle segment can run on 1 worker (50 miss)
    inputs = _inputs((6,), [600, 600, 600], [100, 100, 100], allowed_bad=60)
    schedule = solve(inputs, _grids([2, 2, 2], (6,)), {})
    assert sorted(c[0] for c in schedule.counts) == [1, 2, 2]
    assert schedule.cost == pytest.approx(5 * 600 / 3600)
    assert sum(schedule.good) == 250


def test_the_last_segment_is_charged_until_its_last_completion():
    inputs = _inputs((4,), [600, 600], [100, 100])
    grids = _grids([2, 2], (4,))
    schedule = solve(inputs, grids, {(2,): 1_200_000.0 + 30_000.0})
    assert schedule.cost == pytest.approx(2 * (600 + 630) / 3600)


def test_disaggregated_pools_are_priced_per_gpu_and_the_budget_masks_splits():
    limits = (4, 4)
    values = SegmentValues([100, 100])
    for p in range(1, 5):
        for d in range(1, 5):
            for k in range(2):
                values.add_segment(k, (p, d), 100 if p >= 2 and d >= 3 else 0, np.nan)
    grids = [values.good_grid(k, limits) for k in range(2)]
    # prefill workers have 1 GPU, decode workers 2: (2, 3) costs 8 GPUs
    inputs = _inputs(limits, [600, 600], [100, 100], rates=(1.0, 2.0), startup=(0.0, 0.0))
    schedule = solve(inputs, grids, {})
    assert schedule.counts == ((2, 3), (2, 3))
    assert schedule.cost == pytest.approx(2 * 8 * 600 / 3600)
    # a budget of 7 GPUs leaves no split that serves the traffic
    allowed = np.fromfunction(lambda p, d: (p + 1) + 2 * (d + 1) <= 7, limits)
    assert (
        solve(
            _inputs(
                limits,
                [600, 600],
                [100, 100],
                rates=(1.0, 2.0),
                startup=(0.0, 0.0),
                allowed=allowed,
            ),
            grids,
            {},
        )
        is None
    )


def test_counts_not_replayed_get_the_best_value_monotonicity_allows():
    values = SegmentValues([100])
    values.add_segment(0, (2,), 40, np.nan)
    values.add_segment(0, (5,), 90, np.nan)
    values.add_static((3,), [70], np.nan)  # a floor: the constant schedule's value
    grid = values.good_grid(0, (6,))
    # 1: at most what 2 did; 3: at most 5's 90 but the floor says at least 70 -> 90;
    # 4: at most 90; 6: nothing larger replayed -> every request
    assert grid.tolist() == [40, 40, 90, 90, 90, 100]
    assert not values.is_final(0, (3,))
    values.add_segment(0, (3,), 60, np.nan)  # a segment replay below the floor keeps the floor
    assert values.good_grid(0, (6,))[2] == 70 and values.is_final(0, (3,))


def test_the_last_segment_end_is_the_earlier_of_segment_and_static_replay():
    values = SegmentValues([10, 10])
    values.add_static((2,), [10, 10], 5_000.0)
    assert values.last_end_ms() == {}  # not final without a segment replay
    values.add_segment(1, (2,), 10, 6_000.0)
    assert values.last_end_ms() == {(2,): 5_000.0}


def test_a_wanted_cell_is_learnt_by_halving_the_counts_that_share_its_value():
    values = SegmentValues([100])
    values.add_segment(0, (8,), 95, np.nan)
    # 1..7 all borrow 8's value: the cell, and the middle of the counts sharing that value
    assert values.probe(0, (1,), (16,)) == [(1,), (4,)]
    assert values.probe(0, (6,), (16,)) == [(6,), (7,)]
    assert values.probe(0, (7,), (16,)) == [(7,)]
    assert values.probe(0, (9,), (16,)) == [(9,)]  # nothing larger replayed: the cell itself


def test_in_two_pools_a_cell_nothing_bounds_is_learnt_from_its_lines():
    values = SegmentValues([100])
    values.add_segment(0, (2, 6), 90, np.nan)
    # bounded by (2, 6): the cell and the middle of the line to it
    assert values.probe(0, (2, 2), (8, 8)) == [(2, 2), (2, 4)]
    # (3, 2) has nothing above it: the cell and each pool's line with the other at its limit
    assert values.probe(0, (3, 2), (8, 8)) == [(3, 2), (3, 8), (8, 2)]
