"""`plansim predict` commands: backtest the planner's load predictors on a trace.

``plansim predict compare TRACE... --interval SECONDS [--predictors LIST] [--param K=V ...]
[--grid K=V1,V2 ...] [--warmup-buckets N] [--jobs N] [--out DIR] [--no-report] [--format F]``
buckets the traces (leaving out the last bucket, which the trace end cuts short), backtests
every predictor candidate one step ahead (``plansim.planner_core.predictors.backtest``), prints
the ranked table and writes the output folder, then renders ``predictor_report.html`` via
``plansim.reports.render_dir``.

Output folder:

- ``predictions.parquet``: one row per scored bucket, candidate and series, columns
  ``bucket`` (int64, position in the bucket table), ``time_s`` (float64, bucket start in seconds
  since the first arrival), ``predictor`` (str, candidate label), ``series`` (str:
  ``request_count``, ``avg_isl``, ``avg_osl``), ``forecast`` and ``actual`` (float64; ``actual``
  is the bucket table's value, averages 0 in an empty bucket), ``failed`` (bool: the forecast
  fell back to the last value).
- ``summary.json``::

    {
      "kind": "predictor_comparison",
      "interval_s": 60.0, "warmup_buckets": 5,
      "buckets": 57, "scored_buckets": 52,  # complete buckets used; scored = buckets - warm-up
      "requests": 8819,
      "series": ["request_count", "avg_isl", "avg_osl"],
      "best": "kalman",                 # label of rank 1
      "predictors": [                   # ranked, best first
        {"rank": 1, "predictor": "kalman", "name": "kalman", "params": {},
         "loss": 2.287, "mape_request_count_pct": 178.6, "rmse_request_count": 186.0,
         "under_forecast_share": 0.327, "fit_time_mean_s": 7.8e-07, "fit_time_max_s": 8.9e-06,
         "failed_forecasts": 0, "wall_time_s": 0.01},
        ...
      ],
      "jobs": 2, "total_wall_time_s": 13.6
    }

  Only the timing fields (``fit_time_*``, ``wall_time_s``, ``total_wall_time_s``) vary between
  runs; the ranking never depends on them.

  Metric meanings are in ``plansim.planner_core.predictors.backtest``; a non-finite number
  (e.g. MAPE without any busy bucket) is ``null``.
- ``inputs.json``: the command, options, trace files and format, request count, interval,
  warm-up, the candidates with their parameters.
"""

from __future__ import annotations

import math
import os
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from plansim.commands import console
from plansim.commands.console import QuietOption
from plansim.commands.output import ForceOption, OutputFolder, out_option, start_work, write_reports
from plansim.commands.progress import Progress
from plansim.commands.report import SelfContainedOption
from plansim.errors import ConfigError, InputError
from plansim.limits import MAX_SPAN_S, MAX_WORKER_PROCESSES, check_number
from plansim.planner_core.predictors.factory import (
    PREDICTOR_NAMES,
    all_predictor_params,
    relevant_params,
)
from plansim.schema import HIGH_MAPE_PCT
from plansim.traces.formats import input_help

app = typer.Typer(help="Compare the planner's load predictors on a trace.", no_args_is_help=True)

DEFAULT_PREDICTORS = ",".join(PREDICTOR_NAMES)
PREDICTORS_HELP = f"Comma-separated predictors: {', '.join(PREDICTOR_NAMES)}."
PARAM_HELP = (
    "Predictor parameter NAME=VALUE, repeatable; names as in PlannerConfig (Prophet's "
    "time step defaults to --interval): "
    + "; ".join(
        f"{', '.join(n for n in PREDICTOR_NAMES if p.name in relevant_params(n))}: {p.describe()}"
        for p in all_predictor_params().values()
    )
    + "."
)


@app.callback()
def _group() -> None:
    """Compare the planner's load predictors on a trace."""


def parse_assignments(values: list[str], option: str) -> dict[str, str]:
    """``["k=v", ...]`` -> ``{k: v}``; a malformed or repeated key is an ``InputError``."""
    out: dict[str, str] = {}
    for text in values:
        key, sep, value = text.partition("=")
        key = key.strip()
        if not sep or not key or not value.strip():
            raise InputError(f"expected NAME=VALUE, got {text!r}", field=option)
        if key in out:
            raise InputError(f"{key} given twice", field=option)
        out[key] = value.strip()
    return out


def _candidates(predictors: str, params: list[str], grid: list[str]) -> list[Any]:
    from plansim.planner_core.predictors.factory import expand_candidates

    names = [n.strip() for n in predictors.split(",") if n.strip()]
    if not names:
        raise InputError("no predictor given", field="--predictors")
    fixed = parse_assignments(params, "--param")
    axes = {
        k: [v.strip() for v in vs.split(",")] for k, vs in parse_assignments(grid, "--grid").items()
    }
    for key, values in axes.items():
        if any(not v for v in values):
            raise InputError(f"{key}: empty value in the grid", field="--grid")
    try:
        return expand_candidates(names, fixed, axes)
    except ConfigError as exc:
        if exc.field in ("predictors", "load_predictor"):
            raise InputError(exc.message, field="--predictors") from None
        option = "--grid" if exc.field in axes else "--param"
        raise InputError(exc.message, field=f"{option} {exc.field}") from None


def _finite_or_none(value: Any) -> Any:
    return None if isinstance(value, float) and not math.isfinite(value) else value


def _print_table(summary: Any) -> None:
    header = (
        f"{'rank':>4}  {'predictor':<40} {'loss':>8} {'MAPE %':>8} {'RMSE':>9} "
        f"{'under>20%':>9} {'fit ms':>8} {'max ms':>8} {'failed':>6} {'wall s':>8}"
    )
    console.echo(header)
    for row in summary.itertuples(index=False):
        console.echo(
            f"{row.rank:>4}  {row.predictor:<40} {row.loss:>8.4f} "
            f"{row.mape_request_count_pct:>8.1f} {row.rmse_request_count:>9.2f} "
            f"{row.under_forecast_share:>9.1%} {row.fit_time_mean_s * 1e3:>8.2f} "
            f"{row.fit_time_max_s * 1e3:>8.2f} {row.failed_forecasts:>6d} {row.wall_time_s:>8.2f}"
        )


# The naive forecast a predictor's skill is measured against: the next bucket repeats the last
# (the constant predictor, fed the planner's way), and what summary.json keeps of its backtest.
NAIVE_PREDICTOR = "constant"
NAIVE_KEYS = ("loss", "mape_request_count_pct", "rmse_request_count", "under_forecast_share")


def naive_baseline(summary: Any, table: Any, warmup: int, interval: float) -> Any:
    """The naive forecast's summary row: the constant candidate's when it was compared, else a
    backtest of it on the same buckets (cheap: no fitting)."""
    from plansim.planner_core.predictors.backtest import run_backtest

    mine = summary[summary["predictor"] == NAIVE_PREDICTOR]
    if len(mine):
        return mine.iloc[0]
    return run_backtest(table, [NAIVE_PREDICTOR], warmup, interval_s=interval).summary.iloc[0]


def skill(loss: float, naive_loss: float) -> float:
    """Skill against the naive forecast: ``1 - loss / naive_loss`` (0.2: a fifth less loss; below
    0: worse than repeating the last bucket); NaN when either loss is not a positive number."""
    if not (math.isfinite(loss) and math.isfinite(naive_loss) and naive_loss > 0):
        return float("nan")
    return 1.0 - loss / naive_loss


def verdict_line(summary: dict[str, Any]) -> str:
    """The bottom line of a comparison: the one winner (by the pre-sweep loss retune picks
    with), its skill against the naive forecast, and a warning when its request-count error is
    huge."""
    best = summary["predictors"][0]
    text = f"best          {best['predictor']} (loss {format_loss(best['loss'])}"
    gain = best.get("skill_vs_naive")
    if gain is not None:
        side = "less" if gain >= 0 else "more"
        text += f", {abs(gain):.0%} {side} loss than the naive last-value forecast"
    mape = best.get("mape_request_count_pct")
    if mape is not None:
        text += f", request-count MAPE {mape:.0f}%"
    text += ")"
    if mape is not None and mape > HIGH_MAPE_PCT:
        text += (
            f"; warning: forecasts miss by {mape:.0f}% of a bucket's requests: the "
            f"{summary['interval_s']:g} s buckets are too noisy to forecast (try a longer "
            "--interval)"
        )
    return text


def format_loss(value: float | None) -> str:
    return "-" if value is None else f"{value:.4f}"


def ranking_note(summary: Any) -> str:
    """Says what the ranking uses and, when the request-count error alone would favour another
    candidate, which (the winner stays the loss's, the one retune picks)."""
    note = (
        "ranked by the retune pre-sweep loss (token volumes and lengths, log scale), as "
        "retune picks; MAPE and RMSE: request-count error"
    )
    mape = summary[summary["mape_request_count_pct"].notna()]
    if len(mape) and len(summary):
        best = mape.loc[mape["mape_request_count_pct"].idxmin()]
        if best["predictor"] != summary.iloc[0]["predictor"]:
            note += (
                f"; the request-count MAPE alone would favour {best['predictor']} "
                f"({best['mape_request_count_pct']:.1f}%)"
            )
    return note


@app.command("compare")
def compare(
    traces: Annotated[
        list[Path],
        typer.Argument(help="Trace files, folders or globs.", metavar="TRACE", show_default=False),
    ],
    interval: Annotated[
        float,
        typer.Option(
            "--interval",
            help="Bucket width in seconds (the planner's throughput interval).",
            show_default=False,
        ),
    ],
    predictors: Annotated[str, typer.Option(help=PREDICTORS_HELP)] = DEFAULT_PREDICTORS,
    param: Annotated[list[str] | None, typer.Option("--param", help=PARAM_HELP)] = None,
    grid: Annotated[
        list[str] | None,
        typer.Option("--grid", help="NAME=V1,V2,...: one candidate per combination; repeatable."),
    ] = None,
    warmup_buckets: Annotated[
        int | None,
        typer.Option(
            help="Buckets observed before scoring (default: the largest minimum points of the "
            "candidates)."
        ),
    ] = None,
    jobs: Annotated[
        int | None,
        typer.Option(
            help="Parallel processes; each candidate runs one task per series (default: the CPU "
            "count, at most 3 x candidates). Results do not depend on it."
        ),
    ] = None,
    out: out_option("predict") = None,
    no_report: Annotated[
        bool, typer.Option("--no-report", help="Skip predictor_report.html.")
    ] = False,
    self_contained: SelfContainedOption = False,
    trace_format: Annotated[str, typer.Option("--format", help=input_help())] = "auto",
    quiet: QuietOption = False,
    force: ForceOption = False,
) -> int:
    """Backtest the planner's load predictors one step ahead on TRACE... and rank them."""
    from plansim.io import atomic_write_json, write_parquet_atomic
    from plansim.planner_core.predictors.backtest import (
        SERIES,
        run_backtest,
        without_last_bucket,
    )

    # Validate every option before reading possibly large traces.
    check_number(interval, "--interval", gt=0, le=MAX_SPAN_S, unit="s")
    folder = OutputFolder.claim(out, "predict", "plansim predict compare", force=force)
    specs = _candidates(predictors, param or [], grid or [])
    if warmup_buckets is None:
        warmup_buckets = max(spec.build().minimum_data_points for spec in specs)
    elif warmup_buckets < 1:
        raise InputError(f"must be >= 1, got {warmup_buckets}", field="--warmup-buckets")
    if jobs is None:
        jobs = max(1, min(3 * len(specs), os.cpu_count() or 1))
    elif not 1 <= jobs <= MAX_WORKER_PROCESSES:
        raise InputError(f"must be in [1, {MAX_WORKER_PROCESSES:,}], got {jobs}", field="--jobs")

    from plansim.traces import load_workload
    from plansim.traces.buckets import buckets as bucket_workload

    workload = load_workload(traces, format=trace_format)
    try:
        table = without_last_bucket(bucket_workload(workload, interval))
    except InputError as exc:
        raise InputError(exc.message, field="--interval") from None
    if len(table) < warmup_buckets + 2:
        raise InputError(
            f"the traces span {len(table)} complete buckets of {interval:g} s; need at least "
            f"warm-up + 2 = {warmup_buckets + 2} (lower --warmup-buckets or --interval)",
            field="--interval",
        )

    start_work()
    started = time.perf_counter()
    # One task a candidate and series (request count, ISL, OSL), as run_backtest splits them.
    with Progress("predict", total=3 * len(specs), unit="backtests", quiet=quiet) as bar:
        result = run_backtest(
            table,
            specs,
            warmup_buckets,
            interval_s=interval,
            jobs=jobs,
            on_task=lambda done, total: bar.update(done, total=total),
        )
    total_wall_s = time.perf_counter() - started
    naive = naive_baseline(result.summary, table, warmup_buckets, interval)

    with folder.writing() as out_dir:
        predictions = result.predictions.drop(columns="fit_time_s")
        starts = table["interval_start"].to_numpy(dtype=float)
        predictions.insert(1, "time_s", starts[predictions["bucket"].to_numpy()])
        write_parquet_atomic(out_dir / "predictions.parquet", predictions)
        ranked = [
            {
                **{k: _finite_or_none(v) for k, v in row.items()},
                "skill_vs_naive": _finite_or_none(skill(row["loss"], naive["loss"])),
            }
            for row in result.summary.to_dict(orient="records")
        ]
        summary = {
            "kind": "predictor_comparison",
            "interval_s": float(interval),
            "warmup_buckets": warmup_buckets,
            "buckets": len(table),
            "scored_buckets": len(table) - warmup_buckets,
            "requests": len(workload),
            "series": list(SERIES),
            "best": ranked[0]["predictor"],
            "predictors": ranked,
            "naive": {k: _finite_or_none(naive[k]) for k in NAIVE_KEYS},
            "jobs": jobs,
            "total_wall_time_s": total_wall_s,
        }
        atomic_write_json(out_dir / "summary.json", summary)
        atomic_write_json(
            out_dir / "inputs.json",
            {
                "command": "plansim predict compare",
                "traces": [str(p) for p in traces],
                "trace_format": trace_format,
                "requests": len(workload),
                "skipped": dict(workload.skipped),
                "interval_s": float(interval),
                "warmup_buckets": warmup_buckets,
                "jobs": jobs,
                "candidates": [
                    {"predictor": s.label, "name": s.name, "params": dict(s.params)} for s in specs
                ],
            },
        )

        console.echo(
            f"traces        {len(workload)} requests, {len(table)} complete buckets "
            f"of {interval:g} s (the last, cut by the trace end, is left out), "
            f"{warmup_buckets} warm-up, {len(table) - warmup_buckets} scored"
        )
        _print_table(result.summary)
        console.echo(
            ranking_note(result.summary),
            f"wall time     {total_wall_s:.2f} s on {jobs} process(es)",
            f"output        {out_dir}",
        )
        if not no_report:
            write_reports(out_dir, self_contained=self_contained)
    console.result(verdict_line(summary))
    return console.finish(summary)
