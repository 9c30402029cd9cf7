"""The GPU ledger (``plansim.fleet.ledger``): workers granted while their system has GPUs free
and the fleet's cost per hour stays within the budget; spot leases preempted at seeded,
reproducible times."""

from __future__ import annotations

import numpy as np
import pytest

from plansim.fleet.ledger import Ledger, PoolSupply
from plansim.fleet.plan import Tier
from plansim.roles import Role
from plansim.sim.supply import NEVER

H100 = Tier("h100_sxm", "on_demand", 2.0)
H100_SPOT = Tier("h100_sxm", "spot", 1.0, preemptions_per_gpu_hour=3.0)


def test_workers_are_granted_until_their_system_runs_out_of_gpus():
    ledger = Ledger({"h100_sxm": 5}, None, seed=0)
    tp2 = ledger.member(0, {Role.AGG: PoolSupply("h100_sxm", 2, H100)})
    leases = [tp2.acquire(Role.AGG, 0.0) for _ in range(3)]
    # 2 + 2 GPUs fit in 5; a third worker would need 6.
    assert [lease is not None for lease in leases] == [True, True, False]
    tp2.refused(Role.AGG, 3, 2, 1500.0)
    assert [(r.wanted, r.granted, r.reason, r.at_s) for r in ledger.refusals] == [
        (3, 2, "inventory.h100_sxm", 1.5)
    ]
    tp2.release(Role.AGG, leases[0], 2000.0)
    assert tp2.acquire(Role.AGG, 2000.0) is not None


def test_the_budget_refuses_a_worker_that_would_raise_the_cost_per_hour_above_it():
    # On-demand GPUs at $2: two 1-GPU workers cost $4 per hour, a third would cost $6 > $5.
    ledger = Ledger({"h100_sxm": 8}, 5.0, seed=0)
    member = ledger.member(0, {Role.AGG: PoolSupply("h100_sxm", 1, H100)})
    assert [member.acquire(Role.AGG, 0.0) is not None for _ in range(3)] == [True, True, False]
    member.refused(Role.AGG, 3, 2, 0.0)
    assert ledger.refusals[0].reason == "budget_per_hour"
    assert ledger.cost_per_hour() == 4.0


def test_models_share_one_inventory():
    ledger = Ledger({"h100_sxm": 3}, None, seed=0)
    a = ledger.member(0, {Role.AGG: PoolSupply("h100_sxm", 2, H100)})
    b = ledger.member(1, {Role.AGG: PoolSupply("h100_sxm", 2, H100)})
    assert a.acquire(Role.AGG, 0.0) is not None
    assert b.acquire(Role.AGG, 0.0) is None


def test_on_demand_workers_are_never_preempted():
    member = Ledger(None, None, 0).member(0, {Role.AGG: PoolSupply("h100_sxm", 1, H100)})
    assert member.acquire(Role.AGG, 0.0).preempt_after_ms == NEVER


def _spot_times(seed: int, index: int, n: int = 200) -> list[float]:
    member = Ledger(None, None, seed).member(
        index, {Role.AGG: PoolSupply("h100_sxm", 2, H100_SPOT)}
    )
    return [member.acquire(Role.AGG, 0.0).preempt_after_ms for _ in range(n)]


def test_spot_preemption_times_are_seeded_and_reproducible():
    assert _spot_times(7, 0) == _spot_times(7, 0)
    assert _spot_times(7, 0) != _spot_times(8, 0)
    assert _spot_times(7, 0) != _spot_times(7, 1)  # another model's stream


def test_a_spot_worker_is_preempted_at_its_gpus_times_the_rate():
    # Two GPUs at 3 preemptions per GPU-hour: a worker lives 1 / 6 h = 600 s on average.
    times = np.array(_spot_times(3, 0, n=4000))
    assert times.mean() / 1000.0 == pytest.approx(600.0, rel=0.05)
