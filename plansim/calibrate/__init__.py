"""``plansim.calibrate``: fit a deployment's engine timing to the latencies its own requests
recorded, with held-out error and bootstrap intervals.

    from plansim.calibrate import calibrate, load_recorded
    from plansim.sim.deployment import load_deployment

    workload, recorded = load_recorded(["trace.jsonl.gz"])
    result = calibrate(workload, recorded, load_deployment("deploy.yaml"), jobs=2)
    result.family, result.overrides, result.chosen.low, result.held_out_summary()

Modules: ``recorded`` (the trace's latencies and their checks), ``cells`` (windows, held-out
split, the cells a fit compares), ``estimate`` (the fast start), ``families`` (what can be
fitted), ``fit`` (simulation-based least squares), ``heldout`` (per-window errors, the choice of
family), ``bootstrap`` (intervals), ``result`` (the answer and ``calibration.json``), ``run``.
"""

from plansim.calibrate.recorded import MIN_REQUESTS, Recorded, load_recorded
from plansim.calibrate.result import Calibration, TimingDraws, load_timing_draws
from plansim.calibrate.run import calibrate

__all__ = [
    "MIN_REQUESTS",
    "Calibration",
    "Recorded",
    "TimingDraws",
    "calibrate",
    "load_recorded",
    "load_timing_draws",
]
