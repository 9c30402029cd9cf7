"""Simulation-based fitting of one family: the parameters whose replay of the whole trace best
reproduces the recorded latencies of the training windows' cells.

The residuals are the training cells' trimmed-mean log ratios (``plansim.calibrate.cells``),
weighted; scipy's trust-region least squares (``least_squares``, ``trf``, within the family's
bounds) minimises their squares from the fast estimate. Each evaluation is a replay of the
whole trace on the deployment with the family's keys set (``plansim.api``), so queueing,
batching, chunked prefill and routing are the simulator's own.

The Jacobian is taken by forward differences, one replay per parameter, with steps of ``STEP``
times each parameter's typical magnitude (large enough that a cell moves with the parameter,
not with the few requests routed elsewhere), at the start of a round (and by central
differences of ``STEP_AT_FIT`` at the fit, for the bootstrap); at later points of the round
Broyden's rank-one update of it costs no replay. A round ends when trf stops (a stale Jacobian
makes it shrink its trust region until it does); the next starts with a fresh one, until a
round gains less than ``ROUND_GAIN`` of the cost, ``MAX_ROUNDS`` rounds, or
``EVALUATIONS_PER_PARAMETER`` evaluations per parameter (at least ``MIN_EVALUATIONS``). The
overhead adds to every replayed TTFT and E2E and changes nothing in the engines, so its column
needs no replay.

``fit_family`` is a module-level function of picklable arguments: the command runs one per
family in a spawn pool (``plansim.workers.parallel.parallel_map``), every fit deterministic.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np

from plansim.calibrate.cells import Cells, Windows, cell_residuals
from plansim.calibrate.estimate import FastEstimate
from plansim.calibrate.families import (
    FAMILIES,
    OVERHEAD_KEY,
    Parameter,
    Scales,
    family_overrides,
    overhead_parameter,
)
from plansim.calibrate.recorded import Recorded

STEP = 0.3
# The Jacobian at the fit, which the bootstrap and the standard errors rest on, is taken by
# central differences of this step: the jumps of a replay's routing as a parameter moves (a
# request placed on another rank) inflate a one-sided difference, and so shrink the errors.
STEP_AT_FIT = 0.3
# The evaluation budget grows with the parameters: the linear family (eight) starts its context
# and batch terms at 0 and ran out of a flat budget of 20 in three of four bench cases.
EVALUATIONS_PER_PARAMETER = 4
MIN_EVALUATIONS = 20
MAX_ROUNDS = 3
# A round that lowers the training cost by less than this share of it ends the fit.
ROUND_GAIN = 0.01
# Broyden updates of the Jacobian between two by differences.
REFRESH = 4


@dataclass(frozen=True, slots=True)
class Problem:
    """What every family is fitted to: recorded latencies, windows, cells, scales."""

    recorded: Recorded
    windows: Windows
    cells: Cells
    scales: Scales

    @property
    def train_cells(self) -> np.ndarray:
        return self.cells.of_windows(self.windows.train())


@dataclass(frozen=True, slots=True)
class Replayed:
    """Per request of one replay: TTFT, TPOT and E2E (ms, the overhead included; NaN when the
    request did not complete)."""

    ttft_ms: np.ndarray
    tpot_ms: np.ndarray
    e2e_ms: np.ndarray
    output_tokens: np.ndarray


@dataclass(frozen=True, slots=True)
class FamilyFit:
    """A fitted family: parameter records and values (natural units, the overhead last), the
    start, the training cells' weighted residuals and their Jacobian (per natural unit) at the
    fit, every cell's residual (unweighted), the replay at the fit, the replays it took."""

    family: str
    parameters: tuple[Parameter, ...]
    start: np.ndarray
    values: np.ndarray
    train_residuals: np.ndarray
    jacobian: np.ndarray
    cell_residuals: np.ndarray
    replayed: Replayed
    replays: int
    evaluations: int
    status: str
    wall_s: float


class _Replays:
    """Replays of one family's parameter vectors (the overhead left out), each run once."""

    def __init__(self, workload: Any, deployment: Any, family: Any) -> None:
        self.workload, self.deployment, self.family = workload, deployment, family
        self.cache: dict[bytes, Replayed] = {}

    def __call__(self, values: np.ndarray) -> Replayed:
        key = np.asarray(values, dtype=np.float64).tobytes()
        hit = self.cache.get(key)
        if hit is None:
            hit = self.cache[key] = replay_with(
                self.workload,
                self.deployment,
                {**self.family.overrides(values, self.deployment), OVERHEAD_KEY: 0.0},
            )
        return hit


class _Broyden:
    """The Jacobian ``least_squares`` asks for at each accepted point: by forward differences
    (``differences``, one replay per parameter) at the start and after every ``REFRESH``
    updates, else the last one updated by Broyden's rank-one secant from the step just taken
    (no replay: the residuals at both points are known)."""

    def __init__(self, residuals: Any, differences: Any) -> None:
        self.residuals, self.differences = residuals, differences
        self.z: np.ndarray | None = None
        self.r: np.ndarray | None = None
        self.j: np.ndarray | None = None
        self.updates = 0

    def __call__(self, z: np.ndarray) -> np.ndarray:
        r = self.residuals(z)
        if self.j is None or self.updates >= REFRESH:
            self.j, self.updates = self.differences(z), 0
        else:
            s = z - self.z
            ss = float(s @ s)
            if ss > 0:
                self.j = self.j + np.outer(r - self.r - self.j @ s, s) / ss
                self.updates += 1
        self.z, self.r = z.copy(), r
        return self.j


def replay_with(workload: Any, deployment: Any, overrides: dict[str, Any]) -> Replayed:
    """Replay ``workload`` on ``deployment`` with dotted-key ``overrides``."""
    from plansim import api
    from plansim.sim.deployment import with_overrides

    result = api.replay(workload, api.setup(with_overrides(deployment, overrides)))
    req = result.tables["requests"]
    return Replayed(req["ttft_ms"], req["tpot_ms"], req["e2e_latency_ms"], req["output_length"])


def with_overhead(replayed: Replayed, overhead_ms: float) -> Replayed:
    return Replayed(
        replayed.ttft_ms + overhead_ms,
        replayed.tpot_ms,
        replayed.e2e_ms + overhead_ms,
        replayed.output_tokens,
    )


def fit_family(
    name: str, workload: Any, deployment: Any, problem: Problem, estimate: FastEstimate
) -> FamilyFit:
    """Fit family ``name`` (module docstring)."""
    from scipy.optimize import least_squares

    started = time.perf_counter()
    family = FAMILIES.get(name)
    params = (*family.parameters(problem.scales), overhead_parameter(problem.scales))
    scale = np.array([p.scale for p in params])
    lower = np.array([p.lower for p in params]) / scale
    upper = np.array([p.upper for p in params]) / scale
    start = np.append(family.start(estimate), estimate.overhead_ms)
    z0 = np.clip(start / scale, lower, upper)
    replays = _Replays(workload, deployment, family)
    rows = problem.train_cells
    weight = problem.cells.weight[rows]

    def residuals(z: np.ndarray) -> np.ndarray:
        x = z * scale
        r = with_overhead(replays(x[:-1]), x[-1])
        return weight * cell_residuals(problem.cells, r.ttft_ms, r.tpot_ms, problem.recorded, rows)

    def differences(z: np.ndarray, size: float = STEP, central: bool = False) -> np.ndarray:
        base = residuals(z)
        columns = []
        for j in range(z.shape[0]):
            step = size if z[j] + size <= upper[j] else -size
            shifted = z.copy()
            shifted[j] += step
            ahead = residuals(shifted)
            if central and z[j] - size >= lower[j]:
                shifted[j] = z[j] - step
                columns.append((ahead - residuals(shifted)) / (2 * step))
            else:
                columns.append((ahead - base) / step)
        return np.column_stack(columns)

    # Rounds of least squares, each from a Jacobian by differences: a Broyden Jacobian gone
    # stale makes trf shrink its trust region until it stops, and a fresh one moves it on.
    budget = max(MIN_EVALUATIONS, EVALUATIONS_PER_PARAMETER * len(params))
    z, evaluations, messages = z0, 0, []
    cost = float(residuals(z0) @ residuals(z0))
    for _ in range(MAX_ROUNDS):
        fit = least_squares(
            residuals,
            z,
            jac=_Broyden(residuals, differences),
            bounds=(lower, upper),
            method="trf",
            x_scale=1.0,
            ftol=1e-3,
            xtol=1e-3,
            gtol=1e-6,
            max_nfev=budget - evaluations,
        )
        evaluations += int(fit.nfev)
        messages.append(str(fit.message))
        gain = cost - 2.0 * float(fit.cost)
        z, cost = fit.x, 2.0 * float(fit.cost)
        if gain <= ROUND_GAIN * cost or evaluations >= budget:
            break
    z = fit.x
    x = z * scale
    # Per natural unit, and fresh for the bootstrap.
    jac = differences(z, STEP_AT_FIT, central=True) / scale
    at = with_overhead(replays(x[:-1]), x[-1])
    return FamilyFit(
        family=name,
        parameters=params,
        start=start,
        values=x,
        train_residuals=residuals(z),
        jacobian=jac,
        cell_residuals=cell_residuals(problem.cells, at.ttft_ms, at.tpot_ms, problem.recorded),
        replayed=at,
        replays=len(replays.cache),
        evaluations=evaluations,
        status=f"{len(messages)} round(s): {messages[-1]}",
        wall_s=time.perf_counter() - started,
    )


def fitted_overrides(fit: FamilyFit, deployment: Any) -> dict[str, Any]:
    """The deployment keys of a fitted family's values."""
    return family_overrides(FAMILIES.get(fit.family), fit.values, deployment)
