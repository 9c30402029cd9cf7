"""``calibrate``: fit the timing families to a trace's recorded latencies, choose one by its
held-out error, and bootstrap its parameters.

1. The trace is cut into windows (every third held out) and cells (``cells``).
2. One replay on the deployment as given yields the fast estimate (``estimate``).
3. Every family is fitted on the training windows (``fit``), one family per worker of a spawn
   pool (``plansim.workers.parallel.parallel_map``) when ``jobs`` > 1: each fit's replays run in its
   worker, so the answer is the same for any ``jobs``.
4. Each fit is scored on the held-out windows and the family chosen by the one-standard-error
   rule (``heldout``); its parameters get bootstrap intervals over the training windows
   (``bootstrap``), and the first ``DRAWS`` resamples become the draws ``plansim capacity
   --calibration`` replays.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from plansim.calibrate.bootstrap import bootstrap
from plansim.calibrate.cells import MIN_WINDOWS, cut_windows, make_cells, window_count
from plansim.calibrate.estimate import fast_estimate, problem_scales
from plansim.calibrate.families import FAMILIES, OVERHEAD_KEY, family_overrides
from plansim.calibrate.fit import FamilyFit, Problem, fit_family
from plansim.calibrate.heldout import choose, score, unexplained, window_errors
from plansim.calibrate.recorded import Recorded
from plansim.calibrate.result import Calibration, FamilyResult
from plansim.errors import InputError

DRAWS = 10


def calibrate(
    workload: Any,
    recorded: Recorded,
    deployment: Any,
    *,
    families: Sequence[str] | None = None,
    windows: int | None = None,
    jobs: int = 1,
    progress: Callable[[str, int, int], None] | None = None,
) -> Calibration:
    """Calibrate ``deployment``'s timing to ``recorded`` (the latencies of ``workload``, from
    ``recorded.load_recorded``); see the module docstring. ``families``: names of
    ``families.FAMILIES`` (default: all); ``windows``: how many (default ``DEFAULT_WINDOWS``,
    fewer on a short trace); ``progress(description, done, total)`` is told of every step done
    (the fast estimate, then each family's fit)."""
    from plansim.sim.deployment import with_overrides

    started = time.perf_counter()
    names = list(families or FAMILIES.names())
    for name in names:
        if name not in FAMILIES:
            raise InputError(FAMILIES.unknown(name), field="--family")
    scored = int(recorded.scored.sum())
    count = window_count(scored, windows)
    if windows is not None and windows < MIN_WINDOWS:
        raise InputError(f"must be at least {MIN_WINDOWS}, got {windows}", field="--windows")
    if count < MIN_WINDOWS:
        raise InputError(
            f"{scored} requests with recorded latencies make {count} windows; "
            f"calibrate needs {MIN_WINDOWS}",
            field="TRACE",
        )
    win = cut_windows(np.asarray(workload.arrival_ms), recorded.scored, count)
    cells = make_cells(workload, recorded, win)
    base = with_overrides(deployment, {OVERHEAD_KEY: 0.0})
    say = progress or (lambda text, done, total: None)
    steps = 1 + len(names)
    say("calibrate: the fast estimate", 0, steps)
    train = recorded.scored & ~win.held_out[win.index]
    estimate = fast_estimate(workload, recorded, base, train)
    workers = sum(deployment.pool_sizes().values())
    problem = Problem(
        recorded, win, cells, problem_scales(workload, recorded, estimate, workers, train)
    )
    fitting = f"calibrate: fitting {', '.join(names)}"
    fitted = [1]

    def one_done() -> None:
        fitted[0] += 1
        say(fitting, fitted[0], steps)

    say(fitting, 1, steps)
    # The families with the most parameters (the longest fits) first, so that a pool of two
    # runs the two longest side by side and the short one after whichever ends first.
    order = sorted(
        range(len(names)), key=lambda i: -len(FAMILIES.get(names[i]).parameters(problem.scales))
    )
    tasks = [(names[i], workload, base, problem, estimate) for i in order]
    if jobs > 1 and len(tasks) > 1:
        from plansim.workers.parallel import parallel_map

        done = parallel_map(fit_family, tasks, min(jobs, len(tasks)), on_done=one_done)
    else:
        done = []
        for task in tasks:
            done.append(fit_family(*task))
            one_done()
    fits = [done[order.index(i)] for i in range(len(names))]
    results = [_family_result(fit, problem, deployment, workload) for fit in fits]
    chosen = choose(
        names,
        [r.held_out for r in results],
        [(FAMILIES.get(r.family).load_degree, len(r.values)) for r in results],
    )
    best = results[chosen]
    errors = window_errors(workload, recorded, win, fits[chosen].replayed, deployment.sla)
    draws = tuple(
        family_overrides(FAMILIES.get(best.family), d, deployment) for d in best.draws[:DRAWS]
    )
    notes = _notes(best, recorded, errors)
    return Calibration(
        family=best.family,
        overrides=best.overrides,
        families=tuple(results),
        windows=errors,
        request_id=workload.request_id,
        arrival_ms=workload.arrival_ms,
        draws=draws,
        estimate=estimate,
        recorded=recorded,
        replayed=fits[chosen].replayed,
        window_of=win.index,
        held_out=win.held_out,
        notes=tuple(notes),
        requests=len(workload),
        wall_s=time.perf_counter() - started,
    )


def _family_result(
    fit: FamilyFit, problem: Problem, deployment: Any, workload: Any
) -> FamilyResult:
    params = fit.parameters
    scale = np.array([p.scale for p in params])
    rows = problem.train_cells
    boot = bootstrap(
        fit.values,
        fit.train_residuals,
        fit.jacobian,
        problem.cells.window[rows],
        np.array([p.lower for p in params]),
        np.array([p.upper for p in params]),
        scale,
        seed=int(deployment.seed),
    )
    w2 = problem.cells.weight[rows] ** 2
    train = float(np.sum(fit.train_residuals**2) / np.sum(w2)) if rows.shape[0] else 0.0
    return FamilyResult(
        family=fit.family,
        summary=FAMILIES.get(fit.family).summary,
        parameters=params,
        start=fit.start,
        values=fit.values,
        low=boot.low,
        high=boot.high,
        standard_error=boot.standard_error,
        identified=boot.identified,
        draws=boot.draws,
        train_error=train,
        held_out=score(problem.cells, fit.cell_residuals, problem.windows),
        overrides=family_overrides(FAMILIES.get(fit.family), fit.values, deployment),
        replays=fit.replays,
        evaluations=fit.evaluations,
        status=fit.status,
        wall_s=fit.wall_s,
    )


def _notes(best: FamilyResult, recorded: Recorded, errors: Sequence[Any]) -> list[str]:
    notes = []
    if recorded.unrecorded:
        notes.append(
            f"{recorded.unrecorded} requests have no recorded latencies (rejected or "
            "failed in production?): they are replayed but not scored"
        )
    loose = [p.name for p, ok in zip(best.parameters, best.identified) if not ok]
    if loose:
        notes.append(
            f"the trace does not determine {', '.join(loose)}: the fit keeps what its "
            "start gave, and predictions that lean on it are guesses"
        )
    notes += unexplained(errors)
    most = max((e.mean_in_flight for e in errors), default=0.0)
    notes.append(
        f"the trace held at most {most:.1f} requests in flight on average over a "
        "window: predictions for loads above that (fewer workers, more traffic) "
        "extrapolate the fitted timing beyond what was recorded"
    )
    return notes
