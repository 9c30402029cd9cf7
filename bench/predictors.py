"""Load-predictor comparison on the shared traces (issue 7 quality bar).

For the Azure code trace and the Mooncake synthetic trace at 60 s and 180 s buckets, backtest the
planner's predictors one step ahead (reference defaults) and print, per case: the bucket series'
statistics (mean, variance / mean, lag-1 autocorrelation, idle buckets), the ranked loss table and
the total wall time per predictor. Also a small Kalman/log1p grid on Azure at 60 s. As in
``plansim predict compare``, the last bucket (cut short by the trace end) is left out.

Run: ``python bench/predictors.py [--jobs N] [--traces DIR]``.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import pandas as pd

from plansim.planner_core.predictors.backtest import SERIES, run_backtest, without_last_bucket
from plansim.planner_core.predictors.factory import PredictorSpec, expand_candidates
from plansim.traces import load_workload
from plansim.traces.buckets import buckets as bucket_workload

TRACES = {
    "azure-code": "AzureLLMInferenceTrace_code.csv",
    "mooncake": "mooncake_synthetic_trace.jsonl",
}
INTERVALS_S = (60, 180)
DEFAULT_WARMUP = 5
MODEL_PREDICTORS = ("arima", "kalman", "prophet")


def lag1_autocorrelation(x: np.ndarray) -> float:
    d = x - x.mean()
    denom = float(np.dot(d, d))
    return float(np.dot(d[:-1], d[1:]) / denom) if denom > 0 else float("nan")


def describe(table: pd.DataFrame) -> str:
    lines = []
    for series in SERIES:
        x = table[series].to_numpy(float)
        mean = x.mean()
        dispersion = x.var() / mean if mean > 0 else float("nan")
        lines.append(
            f"  {series:<14} mean {mean:10.1f}  var/mean {dispersion:10.1f}  "
            f"lag-1 autocorr {lag1_autocorrelation(x):+.2f}"
        )
    idle = int((table["request_count"] == 0).sum())
    lines.append(f"  idle buckets   {idle} of {len(table)}")
    return "\n".join(lines)


def print_table(summary: pd.DataFrame) -> None:
    print(
        f"  {'rank':>4} {'predictor':<52} {'loss':>7} {'MAPE%':>7} {'RMSE':>8} "
        f"{'under':>6} {'fit ms':>7} {'max ms':>7} {'fail':>4} {'wall s':>7}"
    )
    for r in summary.itertuples(index=False):
        print(
            f"  {r.rank:>4} {r.predictor:<52} {r.loss:>7.3f} {r.mape_request_count_pct:>7.1f} "
            f"{r.rmse_request_count:>8.1f} {r.under_forecast_share:>6.1%} "
            f"{r.fit_time_mean_s * 1e3:>7.2f} {r.fit_time_max_s * 1e3:>7.1f} "
            f"{r.failed_forecasts:>4d} {r.wall_time_s:>7.2f}"
        )


def run_case(
    name: str, table: pd.DataFrame, interval_s: int, specs: list[PredictorSpec], jobs: int
) -> pd.DataFrame:
    warmup = min(DEFAULT_WARMUP, len(table) - 2)
    print(
        f"\n== {name} @ {interval_s} s: {len(table)} buckets, warm-up {warmup}, "
        f"{len(table) - warmup} scored"
    )
    print(describe(table))
    started = time.perf_counter()
    result = run_backtest(table, specs, warmup, interval_s=interval_s, jobs=jobs)
    print_table(result.summary)
    print(f"  total wall time {time.perf_counter() - started:.2f} s ({jobs} process(es))")
    return result.summary


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--traces", type=Path, default=Path(__file__).resolve().parents[2] / "shared" / "traces"
    )
    parser.add_argument("--jobs", type=int, default=1)
    args = parser.parse_args()

    defaults = expand_candidates(["constant", *MODEL_PREDICTORS])
    verdicts = []
    for trace, filename in TRACES.items():
        workload = load_workload(args.traces / filename)
        for interval_s in INTERVALS_S:
            table = without_last_bucket(bucket_workload(workload, interval_s))
            summary = run_case(trace, table, interval_s, defaults, args.jobs)
            losses = dict(zip(summary["predictor"], summary["loss"], strict=True))
            best = min(MODEL_PREDICTORS, key=lambda p: losses[p])
            verdicts.append((trace, interval_s, best, losses[best], losses["constant"]))

    workload = load_workload(args.traces / TRACES["azure-code"])
    table = without_last_bucket(bucket_workload(workload, 60))
    grid = expand_candidates(
        ["kalman", "arima", "prophet"],
        {},
        {
            "kalman_q_level": [0.1, 1, 10],
            "kalman_r": [10, 1000],
            "load_predictor_log1p": [False, True],
        },
    )
    run_case("azure-code (grid)", table, 60, [PredictorSpec.of("constant"), *grid], args.jobs)

    print("\n== best model predictor vs constant (pre-sweep loss)")
    for trace, interval_s, best, best_loss, constant_loss in verdicts:
        gain = (constant_loss - best_loss) / constant_loss if constant_loss else float("nan")
        print(
            f"  {trace:<11} @ {interval_s:>3} s  best {best:<8} {best_loss:.3f}  constant "
            f"{constant_loss:.3f}  ({gain:+.1%} lower loss)"
        )


if __name__ == "__main__":
    main()
