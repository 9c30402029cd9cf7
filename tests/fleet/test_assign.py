"""The joint choice (``plansim.fleet.assign``): hand-built candidate fronts whose optimum, and
whose binding constraint when nothing fits, are worked out by hand; and the solver against
enumerating every fleet."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from plansim.fleet.assign import BUDGET, bindings, solve

PRICES = {"A": 1.0, "B": 2.0}  # A is the cheap GPU type, B the dear one


@dataclass(frozen=True)
class Option:
    usage: tuple[tuple[str, int], ...]
    cost_per_hour: float
    cost: float


def on(system: str, gpus: int, cost: float | None = None) -> Option:
    rate = gpus * PRICES[system]
    return Option(((system, gpus),), rate, rate if cost is None else cost)


# Each model's front: its cheapest deployment on each GPU type.
CHAT = [on("A", 4), on("B", 3)]  # $4 per hour on A, $6 on B: moving chat to B costs $2
CODE = [on("A", 6), on("B", 5)]  # $6 per hour on A, $10 on B: moving code costs $4


def test_a_loose_inventory_gives_every_model_its_cheapest_option():
    choice = solve([CHAT, CODE], {"A": 10, "B": 10}, None, PRICES)
    assert choice.feasible and choice.picks == (0, 0)
    assert choice.cost_per_hour == 10.0
    assert choice.solver.proved_optimal and choice.solver.status == "optimal"


def test_a_tight_inventory_moves_the_model_whose_move_costs_least_to_the_dearer_type():
    # 8 A GPUs cannot hold chat (4) and code (6) together. Moving chat to B costs 6 - 4 = $2,
    # moving code costs 10 - 6 = $4: the optimum runs chat on B and code on A, $12.
    choice = solve([CHAT, CODE], {"A": 8, "B": 10}, None, PRICES)
    assert choice.feasible
    assert choice.picks == (1, 0)
    assert choice.cost_per_hour == 12.0
    assert choice.solver.proved_optimal


def test_between_fleets_of_equal_cost_per_hour_the_cheaper_over_the_traces_wins():
    # With 8 A GPUs one model moves, and moving either costs $2 per hour (chat B $6, code B
    # $8). Over the traces chat B + code A costs 6.5 + 6 = 12.5, chat A + code B 4 + 7 = 11:
    # the optimum moves code.
    code = [on("A", 6), on("B", 4, cost=7.0)]
    chat = [on("A", 4), on("B", 3, cost=6.5)]
    choice = solve([chat, code], {"A": 8, "B": 10}, None, PRICES)
    assert choice.picks == (0, 1)
    assert choice.cost_per_hour == 12.0


def test_when_no_fleet_fits_the_inventory_the_closest_one_and_its_binding_model_are_named():
    # 4 A and 4 B GPUs. chat A + code A: 6 A GPUs over (6 at $1); chat A + code B: 1 B over
    # ($2); chat B + code A: 2 A over ($2); chat B + code B: 4 B over ($8). Of the two fleets
    # $2 short, chat B + code A costs $12 per hour, chat A + code B $14: the first is closest.
    counts = {"A": 4, "B": 4}
    choice = solve([CHAT, CODE], counts, None, PRICES)
    assert not choice.feasible
    assert choice.picks == (1, 0)
    assert choice.excess == {"inventory.A": 2.0}
    (binding,) = bindings(choice, [CHAT, CODE], ["chat", "code"], counts, None)
    # Without code, chat fits on its own; code is the larger user of A.
    assert (binding.constraint, binding.model, binding.needs, binding.has) == (
        "inventory.A",
        "code",
        6.0,
        4.0,
    )


def test_a_budget_below_the_cheapest_fleet_binds_and_names_the_model():
    # The cheapest fleet costs $10 per hour (chat A + code A); the budget is $9.
    counts = {"A": 10, "B": 10}
    choice = solve([CHAT, CODE], counts, 9.0, PRICES)
    assert not choice.feasible
    assert choice.picks == (0, 0)
    assert choice.excess == {BUDGET: pytest.approx(1.0)}
    (binding,) = bindings(choice, [CHAT, CODE], ["chat", "code"], counts, 9.0)
    # Either model alone fits the budget; code costs the more of it.
    assert (binding.constraint, binding.model) == (BUDGET, "code")
    assert (binding.needs, binding.has) == (10.0, 9.0)


def test_a_budget_can_bind_a_fleet_the_inventory_holds():
    # 8 A GPUs force a move ($12 at least), and the budget is $11: no fleet fits.
    choice = solve([CHAT, CODE], {"A": 8, "B": 10}, 11.0, PRICES)
    assert not choice.feasible


@st.composite
def fleets(draw):
    models = draw(st.integers(1, 4))
    options = []
    for _ in range(models):
        n = draw(st.integers(1, 4))
        opts = []
        for _ in range(n):
            usage = tuple(
                sorted(
                    {
                        s: draw(st.integers(1, 6))
                        for s in draw(st.sets(st.sampled_from("AB"), min_size=1))
                    }.items()
                )
            )
            rate = float(sum(g * PRICES[s] for s, g in usage)) + draw(st.integers(0, 3)) * 0.25
            opts.append(Option(usage, rate, rate + draw(st.integers(0, 4)) * 0.1))
        options.append(opts)
    counts = {"A": draw(st.integers(0, 12)), "B": draw(st.integers(0, 12))}
    budget = draw(st.none() | st.integers(5, 40).map(float))
    return options, counts, budget


@settings(max_examples=150, deadline=None)
@given(fleets())
def test_the_choice_is_the_cheapest_fleet_of_all_that_fit(case):
    options, counts, budget = case
    fitting = []
    for picks in itertools.product(*(range(len(o)) for o in options)):
        chosen = [options[m][k] for m, k in enumerate(picks)]
        use = {s: sum(dict(o.usage).get(s, 0) for o in chosen) for s in counts}
        rate = sum(o.cost_per_hour for o in chosen)
        if all(use[s] <= counts[s] for s in counts) and (budget is None or rate <= budget):
            fitting.append((rate, sum(o.cost for o in chosen)))
    choice = solve(options, counts, budget, PRICES)
    assert choice.feasible == bool(fitting)
    if fitting:
        best = min(fitting)
        chosen = [options[m][k] for m, k in enumerate(choice.picks)]
        assert choice.cost_per_hour == pytest.approx(best[0])
        assert sum(o.cost for o in chosen) == pytest.approx(best[1])
