"""GPU budget arithmetic (reference section 5), with hand-computed cases."""

from plansim.planner_core.budget import (
    Budget,
    fit_ceiling_pair,
    fit_directional_budget_pair,
    guard_disagg_scaling_budget,
    guard_single_scaling_budget,
    proportional_clamp_pair,
    proportional_clamp_single,
)
from plansim.planner_core.reasons import BudgetReason


def test_ceiling_clamp_splits_proportionally():
    # 12 GPUs into 8: scale 2/3 -> p = min(7, floor(4)) = 4, d = 8 - 4 = 4
    assert proportional_clamp_pair((6, 6), Budget(max_gpus=8, min_prefill=1, min_decode=1)) == (
        4,
        4,
    )


def test_ceiling_clamp_with_two_gpu_prefill():
    # p = max(1, min((8-1)//2, floor(4*8/12))) = 2; d = (8 - 2*2)//1 = 4
    b = Budget(max_gpus=8, gpu_prefill=2, gpu_decode=1, min_prefill=1, min_decode=1)
    assert proportional_clamp_pair((4, 4), b) == (2, 4)


def test_ceiling_below_minimums_is_infeasible():
    b = Budget(max_gpus=2, gpu_prefill=2, gpu_decode=1, min_prefill=1, min_decode=1)
    assert proportional_clamp_pair((3, 3), b) == (0, 0)


def test_floor_clamp_grows_proportionally():
    # p = ceil(1 * 10 / 2) = 5, d = ceil(10 - 5) = 5
    assert proportional_clamp_pair((1, 1), Budget(min_gpus=10, min_prefill=1, min_decode=1)) == (
        5,
        5,
    )


def test_floor_clamp_that_breaks_ceiling_returns_input():
    assert proportional_clamp_pair(
        (1, 1), Budget(min_gpus=10, max_gpus=9, min_prefill=1, min_decode=1)
    ) == (1, 1)


def test_floor_tolerance_only_with_both_bounds():
    # 7 GPUs vs floor 8: inside the band with tolerance 1 (both bounds set), outside without.
    assert Budget(min_gpus=8, max_gpus=16).in_band(7, 1)
    assert not Budget(min_gpus=8).in_band(7, 1)
    assert not Budget(min_gpus=8, max_gpus=16).in_band(17, 1)


def test_single_clamp():
    assert proportional_clamp_single(10, 2, 1, Budget(max_gpus=8)) == 4
    assert proportional_clamp_single(10, 2, 5, Budget(max_gpus=8)) == 0
    assert proportional_clamp_single(1, 2, 1, Budget(min_gpus=7)) == 4


def test_single_guard_partial_scale_up_to_ceiling():
    assert guard_single_scaling_budget(4, 8, 1, 1, Budget(max_gpus=6)) == (6, None)


def test_single_guard_holds_scale_up_at_ceiling():
    assert guard_single_scaling_budget(6, 7, 1, 1, Budget(max_gpus=6)) == (
        6,
        BudgetReason.GUARD_HOLD,
    )


def test_single_guard_holds_scale_down_at_floor():
    assert guard_single_scaling_budget(4, 3, 1, 1, Budget(min_gpus=4)) == (
        4,
        BudgetReason.GUARD_HOLD,
    )


def test_single_guard_reconciles_out_of_band_current():
    assert guard_single_scaling_budget(8, 9, 1, 1, Budget(max_gpus=6)) == (
        6,
        BudgetReason.RECONCILE,
    )


def test_single_guard_never_reverses():
    # Scale-down request of a pool under the floor: reconcile grows it, never a decrease.
    value, reason = guard_single_scaling_budget(2, 1, 1, 1, Budget(min_gpus=4, max_gpus=8))
    assert reason == BudgetReason.RECONCILE and value == 4


def test_disagg_guard_opposing_rebalance_at_ceiling_is_fitted():
    b = Budget(max_gpus=8, min_prefill=1, min_decode=1)
    assert guard_disagg_scaling_budget((3, 5), (4, 4), b) == ((4, 4), None)


def test_disagg_guard_holds_plain_scale_up_at_ceiling():
    b = Budget(max_gpus=8, min_prefill=1, min_decode=1)
    assert guard_disagg_scaling_budget((3, 5), (4, 5), b) == ((3, 5), BudgetReason.GUARD_HOLD)


def test_disagg_guard_clamps_inside_direction():
    b = Budget(max_gpus=8, min_prefill=1, min_decode=1)
    assert guard_disagg_scaling_budget((2, 2), (5, 5), b) == ((4, 4), None)


def test_disagg_guard_holds_scale_down_at_floor():
    b = Budget(min_gpus=4, min_prefill=1, min_decode=1)
    assert guard_disagg_scaling_budget((2, 2), (1, 1), b) == ((2, 2), BudgetReason.GUARD_HOLD)


def test_directional_fit_prefers_balanced_progress():
    # Every in-band (p, d) with p + d = 8 is 4 away from (6, 6); (4, 4) has zero skew.
    b = Budget(max_gpus=8)
    assert fit_directional_budget_pair((2, 2), (6, 6), b) == (4, 4)
    assert fit_ceiling_pair((2, 2), (6, 6), b) == (4, 4)


def test_ceiling_fit_ignores_floor():
    # min_gpu_budget must not inflate a throughput lower bound.
    b = Budget(min_gpus=20, max_gpus=30, min_prefill=1, min_decode=1)
    assert fit_ceiling_pair((2, 2), (3, 3), b) == (3, 3)
