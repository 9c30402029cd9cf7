"""Simulation-based fitting of one family: the parameters whose replay of the whole trace best
reproduces the recorded latencies of the training windows' cells.

The residuals are the training cells' median log ratios (``plansim.calibrate.cells``), weighted;
scipy's trust-region least squares (``least_squares``, ``trf``, within the family's bounds)
minimises their squares from the fast estimate. Each evaluation is a replay of the whole trace
on the deployment with the family's keys set (``plansim.api``), so queueing, batching, chunked
prefill and routing are the simulator's own. The Jacobian is taken by forward differences, one
replay per parameter, with steps of ``STEP`` times each parameter's typical magnitude (large
enough that a cell median moves with the parameter, not with the request that happens to be its
median). The overhead adds to every replayed TTFT and E2E and changes nothing in the engines, so
its column needs no replay.

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

STEP = 0.05
MAX_EVALUATIONS = 15


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
            hit = self.cache[key] = replay_with(self.workload, self.deployment, {
                **self.family.overrides(values, self.deployment), OVERHEAD_KEY: 0.0})
        return hit


def replay_with(workload: Any, deployment: Any, overrides: dict[str, Any]) -> Replayed:
    """Replay ``workload`` on ``deployment`` with dotted-key ``overrides``."""
    from plansim import api
    from plansim.sim.deployment import with_overrides

    result = api.replay(workload, api.setup(with_overrides(deployment, overrides)))
    req = result.tables["requests"]
    return Replayed(req["ttft_ms"], req["tpot_ms"], req["e2e_latency_ms"], req["output_length"])


def with_overhead(replayed: Replayed, overhead_ms: float) -> Replayed:
    return Replayed(replayed.ttft_ms + overhead_ms, replayed.tpot_ms,
                    replayed.e2e_ms + overhead_ms, replayed.output_tokens)


def fit_family(name: str, workload: Any, deployment: Any, problem: Problem,
               estimate: FastEstimate) -> FamilyFit:
    """Fit family ``name`` (module docstring)."""
    from scipy.optimize import least_squares

    started = time.perf_counter()
    family = FAMILIES.get(name)
    params = (*family.parameters(problem.scales), overhead_parameter(problem.scales))
    scale = np.array([p.scale for p in params])
    lower = np.array([p.lower for p in params]) / scale
    upper = np.array([p.upper for p in params]) / scale
    start = np.append(family.start(estimate), 0.0)
    z0 = np.clip(start / scale, lower, upper)
    replays = _Replays(workload, deployment, family)
    rows = problem.train_cells
    weight = problem.cells.weight[rows]

    def residuals(z: np.ndarray) -> np.ndarray:
        x = z * scale
        r = with_overhead(replays(x[:-1]), x[-1])
        return weight * cell_residuals(problem.cells, r.ttft_ms, r.tpot_ms, problem.recorded,
                                       rows)

    def jacobian(z: np.ndarray) -> np.ndarray:
        base = residuals(z)
        columns = []
        for j in range(z.shape[0]):
            step = STEP if z[j] + STEP <= upper[j] else -STEP
            shifted = z.copy()
            shifted[j] += step
            columns.append((residuals(shifted) - base) / step)
        return np.column_stack(columns)

    fit = least_squares(residuals, z0, jac=jacobian, bounds=(lower, upper), method="trf",
                        x_scale=1.0, ftol=1e-3, xtol=1e-3, gtol=1e-6, max_nfev=MAX_EVALUATIONS)
    z = fit.x
    x = z * scale
    jac = jacobian(z) / scale  # per natural unit
    at = with_overhead(replays(x[:-1]), x[-1])
    return FamilyFit(
        family=name, parameters=params, start=start, values=x,
        train_residuals=residuals(z), jacobian=jac,
        cell_residuals=cell_residuals(problem.cells, at.ttft_ms, at.tpot_ms, problem.recorded),
        replayed=at, replays=len(replays.cache), evaluations=int(fit.nfev),
        status=str(fit.message), wall_s=time.perf_counter() - started)


def fitted_overrides(fit: FamilyFit, deployment: Any) -> dict[str, Any]:
    """The deployment keys of a fitted family's values."""
    return family_overrides(FAMILIES.get(fit.family), fit.values, deployment)
