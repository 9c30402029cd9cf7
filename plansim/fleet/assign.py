"""The joint choice: one candidate per model, the cheapest fleet per hour that fits the
inventory and the budget, found exactly.

It is a 0-1 integer program: ``x[m, c] = 1`` when model ``m`` runs candidate ``c``; each model
runs exactly one; the GPUs of each system the chosen candidates hold are at most the
inventory's count of it; their cost per hour is at most ``budget_per_hour``; minimise the cost
per hour, then, among fleets of that cost, the cost over the traces. scipy's ``milp`` (HiGHS
branch and bound, relative gap 0) solves it and proves the optimum: ``Choice.solver`` says so.
A tight inventory can make the optimum run a model on a dearer GPU type, to free the cheaper
one for a model that saves more on it.

When no fleet fits, the best infeasible fleet is the one that misses by the least: GPUs beyond
the inventory priced at the system's on-demand price plus cost per hour beyond the budget, then
the lowest cost per hour. ``bindings`` names each constraint it breaks and the model that binds
it: a model without which the other models fit (the largest user of the constraint among them),
else its largest user.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from scipy.optimize import Bounds, LinearConstraint, milp

SOLVER = "scipy.optimize.milp (HiGHS branch and bound, mip_rel_gap 0)"
BUDGET = "budget_per_hour"
TARGET = "target"
# Optimal HiGHS solutions may break a constraint by its feasibility tolerance (1e-7 scaled);
# stage bounds and exact checks allow this much.
_TOL = 1e-6


class Option(Protocol):
    """What the choice needs of a candidate."""

    usage: tuple[tuple[str, int], ...]
    cost_per_hour: float
    cost: float


@dataclass(frozen=True, slots=True)
class SolverReport:
    """How the choice was found: the solver, its status, whether it proved the optimum (gap 0),
    the branch-and-bound nodes of both stages and the problem's size."""

    name: str
    status: str
    proved_optimal: bool
    mip_gap: float
    nodes: int
    variables: int
    constraints: int

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status,
            "proved_optimal": self.proved_optimal,
            "mip_gap": self.mip_gap,
            "nodes": self.nodes,
            "variables": self.variables,
            "constraints": self.constraints,
        }


@dataclass(frozen=True, slots=True)
class Choice:
    """One option per model (``picks``: indices), whether the fleet fits, its cost per hour,
    how far it is over each constraint it breaks (GPUs, or cost per hour), and the solver."""

    picks: tuple[int, ...]
    feasible: bool
    cost_per_hour: float
    excess: dict[str, float]
    solver: SolverReport


@dataclass(frozen=True, slots=True)
class Binding:
    """A constraint the best infeasible fleet breaks, the model that binds it, what the fleet
    needs of it and what there is (GPUs, cost per hour, or the goodput ratio)."""

    constraint: str
    model: str
    needs: float
    has: float

    def sentence(self) -> str:
        if self.constraint == TARGET:
            return (
                f"{self.model}: no deployment its search replayed meets its "
                f"{self.needs:.1%} target (best {self.has:.2%})"
            )
        if self.constraint == BUDGET:
            return (
                f"{BUDGET}: the closest fleet costs {self.needs:.3f} per hour, over the "
                f"{self.has:g} budget; {self.model} binds it"
            )
        system = self.constraint.removeprefix("inventory.")
        return (
            f"{self.constraint}: the closest fleet needs {self.needs:g} {system} GPUs, the "
            f"inventory holds {self.has:g}; {self.model} binds it"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "constraint": self.constraint,
            "model": self.model,
            "needs": self.needs,
            "has": self.has,
            "sentence": self.sentence(),
        }


class _Program:
    """The choice as matrices: rows of the one-per-model equalities and of the GPU and budget
    limits, over the options of every model laid end to end."""

    def __init__(
        self, options: Sequence[Sequence[Option]], counts: Mapping[str, int], budget: float | None
    ) -> None:
        self.options = options
        self.offsets = np.cumsum([0, *map(len, options)])
        n = int(self.offsets[-1])
        self.n = n
        self.rates = np.array([o.cost_per_hour for opts in options for o in opts])
        self.costs = np.array([o.cost for opts in options for o in opts])
        self.systems = sorted(
            {s for opts in options for o in opts for s, _ in o.usage} & set(counts)
        )
        self.one = np.zeros((len(options), n))
        for m in range(len(options)):
            self.one[m, self.offsets[m] : self.offsets[m + 1]] = 1.0
        rows, limits, names = [], [], []
        for system in self.systems:
            rows.append([dict(o.usage).get(system, 0) for opts in options for o in opts])
            limits.append(float(counts[system]))
            names.append(f"inventory.{system}")
        if budget is not None:
            rows.append(self.rates.tolist())
            limits.append(float(budget))
            names.append(BUDGET)
        self.limit_rows = np.array(rows, dtype=float).reshape(len(rows), n)
        self.limits = np.array(limits, dtype=float)
        self.limit_names = names

    def picks(self, x: np.ndarray) -> tuple[int, ...]:
        """Each model's option, from a solution vector (options first)."""
        return tuple(
            int(np.argmax(x[self.offsets[m] : self.offsets[m + 1]]))
            for m in range(len(self.options))
        )

    def used(self, picks: Sequence[int]) -> np.ndarray:
        x = np.zeros(self.n)
        for m, k in enumerate(picks):
            x[self.offsets[m] + k] = 1.0
        return self.limit_rows @ x

    def excess(self, picks: Sequence[int]) -> dict[str, float]:
        over = self.used(picks) - self.limits
        return {
            name: float(v)
            for name, v, limit in zip(self.limit_names, over, self.limits)
            if v > _TOL * max(1.0, abs(float(limit)))
        }


def solve(
    options: Sequence[Sequence[Option]],
    counts: Mapping[str, int],
    budget: float | None,
    prices: Mapping[str, float],
) -> Choice:
    """The cheapest fleet that fits (see the module docstring); every model needs one option
    at least. ``prices``: each system's on-demand price, to weigh GPUs beyond the inventory."""
    program = _Program(options, counts, budget)
    one = LinearConstraint(program.one, 1.0, 1.0)
    binary = Bounds(np.zeros(program.n), np.ones(program.n))
    integer = np.ones(program.n)
    constraints = [one]
    if len(program.limits):
        constraints.append(LinearConstraint(program.limit_rows, -np.inf, program.limits))
    first = _milp(program.rates, integer, binary, constraints)
    if first.status == 0:
        second = _milp(
            program.costs,
            integer,
            binary,
            constraints
            + [LinearConstraint(program.rates[None, :], -np.inf, first.fun + _bound(first.fun))],
        )
        best = second if second.status == 0 else first
        picks = program.picks(best.x)
        return Choice(
            picks,
            True,
            _rate(options, picks),
            {},
            _report("optimal", first, second, program.n, len(constraints)),
        )
    if first.status != 2:
        raise RuntimeError(f"the fleet's integer program failed: {first.message}")
    return _closest(program, options, prices, first)


def _closest(
    program: _Program, options: Sequence[Sequence[Option]], prices: Mapping[str, float], first: Any
) -> Choice:
    """The best infeasible fleet: slack variables take what the limits cannot hold."""
    n, k = program.n, len(program.limits)
    weights = np.array(
        [
            prices[name.removeprefix("inventory.")] if name != BUDGET else 1.0
            for name in program.limit_names
        ]
    )
    # Variables: the options, then one slack per limit row (continuous, >= 0).
    a_one = np.hstack([program.one, np.zeros((program.one.shape[0], k))])
    a_lim = np.hstack([program.limit_rows, -np.eye(k)])
    integer = np.concatenate([np.ones(n), np.zeros(k)])
    bounds = Bounds(np.zeros(n + k), np.concatenate([np.ones(n), np.full(k, np.inf)]))
    constraints = [
        LinearConstraint(a_one, 1.0, 1.0),
        LinearConstraint(a_lim, -np.inf, program.limits),
    ]
    slack_cost = np.concatenate([np.zeros(n), weights])
    miss = _milp(slack_cost, integer, bounds, constraints)
    rates = np.concatenate([program.rates, np.zeros(k)])
    second = _milp(
        rates,
        integer,
        bounds,
        constraints + [LinearConstraint(slack_cost[None, :], -np.inf, miss.fun + _bound(miss.fun))],
    )
    best = second if second.status == 0 else miss
    picks = program.picks(best.x)
    report = _report("infeasible", miss, second, n + k, 2)
    return Choice(picks, False, _rate(options, picks), program.excess(picks), report)


def bindings(
    choice: Choice,
    options: Sequence[Sequence[Option]],
    names: Sequence[str],
    counts: Mapping[str, int],
    budget: float | None,
) -> list[Binding]:
    """For each constraint the (infeasible) ``choice`` breaks, the model that binds it."""
    program = _Program(options, counts, budget)
    used = dict(zip(program.limit_names, program.used(choice.picks)))
    out = []
    for constraint in choice.excess:
        uses = []
        for m, k in enumerate(choice.picks):
            option = options[m][k]
            use = (
                option.cost_per_hour
                if constraint == BUDGET
                else dict(option.usage).get(constraint.removeprefix("inventory."), 0)
            )
            if use > 0:
                uses.append((use, m))
        uses.sort(key=lambda u: (-u[0], u[1]))
        binder = next(
            (m for _, m in uses if _fits_without(m, options, counts, budget)),
            uses[0][1] if uses else 0,
        )
        has = budget if constraint == BUDGET else counts[constraint.removeprefix("inventory.")]
        out.append(Binding(constraint, names[binder], float(used[constraint]), float(has)))
    return out


def _fits_without(
    model: int, options: Sequence[Sequence[Option]], counts: Mapping[str, int], budget: float | None
) -> bool:
    rest = [o for m, o in enumerate(options) if m != model]
    if not rest:
        return True
    program = _Program(rest, counts, budget)
    constraints = [LinearConstraint(program.one, 1.0, 1.0)]
    if len(program.limits):
        constraints.append(LinearConstraint(program.limit_rows, -np.inf, program.limits))
    result = _milp(
        np.zeros(program.n),
        np.ones(program.n),
        Bounds(np.zeros(program.n), np.ones(program.n)),
        constraints,
    )
    return result.status == 0


def _milp(
    c: np.ndarray, integrality: np.ndarray, bounds: Bounds, constraints: list[LinearConstraint]
) -> Any:
    return milp(
        c,
        integrality=integrality,
        bounds=bounds,
        constraints=constraints,
        options={"mip_rel_gap": 0.0},
    )


def _bound(value: float) -> float:
    return _TOL * max(1.0, abs(value))


def _rate(options: Sequence[Sequence[Option]], picks: Sequence[int]) -> float:
    return float(sum(options[m][k].cost_per_hour for m, k in enumerate(picks)))


def _report(status: str, first: Any, second: Any, variables: int, constraints: int) -> SolverReport:
    gap = float(first.mip_gap) if first.mip_gap is not None else 0.0
    nodes = int(first.mip_node_count or 0) + int(getattr(second, "mip_node_count", 0) or 0)
    return SolverReport(
        SOLVER, status, first.status == 0 and gap == 0.0, gap, nodes, variables, constraints
    )
