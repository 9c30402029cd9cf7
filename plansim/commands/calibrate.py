"""`plansim calibrate`: fit the engine timing to the latencies a deployment recorded.

``plansim calibrate TRACE... --config deploy.yaml [--family NAME ...] [--windows N] [--jobs N]
[--out DIR]`` reads Dynamo request traces with recorded ``ttft_ms`` / ``total_time_ms`` and
the deployment that served them, checks both before anything is replayed (a trace without
latencies, a first token after the last, too few requests: one line, exit status 2, nothing
written), fits every family (``plansim.calibrate``), prints the chosen fit with its intervals
and the error of every window, and writes ``calibrated_deployment.yaml`` (the deployment with
the fitted keys, loadable by every command), ``calibration.json``,
``calibration_requests.parquet`` (recorded against replayed, per request), ``inputs.json`` and
``calibration_report.html``. A fit whose held-out error is large says so in one warning line.
"""

from __future__ import annotations

import logging
import math
import os
from pathlib import Path
from typing import Annotated, Any

import typer

from plansim.commands import console
from plansim.commands.console import QuietOption
from plansim.commands.output import (
    ForceOption,
    OutputFolder,
    out_option,
    records_option,
    write_reports,
)
from plansim.commands.progress import Progress
from plansim.commands.report import SelfContainedOption

log = logging.getLogger("plansim.calibrate")


def calibrate(
    ctx: typer.Context,
    traces: Annotated[
        list[Path],
        typer.Argument(
            help="Dynamo request traces with recorded ttft_ms and total_time_ms (files, folders "
            "or globs).",
            metavar="TRACE",
            show_default=False,
        ),
    ],
    config: Annotated[
        Path,
        typer.Option(
            "--config",
            "-c",
            help="The deployment that served the traces (YAML or JSON): worker "
            "counts, router, engine limits.",
            show_default=False,
        ),
    ],
    family: Annotated[
        list[str] | None,
        typer.Option(
            "--family",
            help="Fit only this calibration family (repeatable; docs/calibrate.md "
            "names them). Without it every family is fitted and the held-out "
            "error chooses.",
            show_default=False,
        ),
    ] = None,
    windows: Annotated[
        int | None,
        typer.Option(
            help="Time windows to cut the trace into (every third held out; default 12, fewer "
            "on a short trace).",
            show_default=False,
        ),
    ] = None,
    trace_format: Annotated[
        str,
        typer.Option("--format", help="Trace format: auto or dynamo (others record no latencies)."),
    ] = "auto",
    jobs: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Families fitted at once, one process each (default: the CPU count).",
            show_default=False,
        ),
    ] = None,
    out: out_option("calibrate") = None,
    no_report: Annotated[
        bool, typer.Option("--no-report", help="Skip calibration_report.html.")
    ] = False,
    self_contained: SelfContainedOption = False,
    quiet: QuietOption = False,
    force: ForceOption = False,
) -> int:
    """Fit the deployment's engine timing to the latencies TRACE... recorded, with held-out
    error per window and bootstrap intervals; write the calibrated deployment."""
    from plansim import calibrate as cal
    from plansim.calibrate.cells import MIN_WINDOWS
    from plansim.calibrate.families import FAMILIES
    from plansim.errors import InputError
    from plansim.sim.deployment import load_deployment

    folder = OutputFolder.claim(out, "calibrate", "plansim calibrate", force=force)
    for name in family or ():
        if name not in FAMILIES:
            raise InputError(FAMILIES.unknown(name), field="--family")
    if windows is not None and windows < MIN_WINDOWS:
        raise InputError(f"must be at least {MIN_WINDOWS}, got {windows}", field="--windows")
    deployment = load_deployment(config)
    workload, recorded = cal.load_recorded(traces, format=trace_format)

    with Progress("calibrate", total=None, unit="steps", quiet=quiet) as bar:
        result = cal.calibrate(
            workload,
            recorded,
            deployment,
            families=family,
            windows=windows,
            jobs=jobs or os.cpu_count() or 1,
            progress=lambda text, done, total: bar.update(done, total, text),
        )
    report = result.to_json()
    report["host"]["jobs"] = jobs or os.cpu_count() or 1
    with folder.writing() as out_dir:
        _write(
            out_dir,
            result,
            report,
            _inputs(ctx.params, traces, workload, deployment),
            deployment,
            config,
        )
        headline, *lines = table_lines(report)
        console.result(headline)
        console.echo(*lines)
        if not no_report:
            write_reports(out_dir, self_contained=self_contained)
    large = [n for n in report["notes"] if n.startswith("window ")]
    if large:
        log.warning("held-out error is large: %s (calibration.json, notes)", large[0])
    console.echo(f"output        {out_dir}")
    return console.finish(report)


def _inputs(
    options: dict[str, Any], traces: list[Path], workload: Any, deployment: Any
) -> dict[str, Any]:
    given = {
        name: [str(v) for v in value]
        if isinstance(value, list)
        else str(value)
        if isinstance(value, Path)
        else value
        for name, value in options.items()
        if name != "traces" and records_option(name, value)
    }
    return {
        "command": "plansim calibrate",
        "options": given,
        "traces": [str(p) for p in traces],
        "requests": len(workload),
        "deployment": deployment.model_dump(mode="json"),
        "seed": deployment.seed,
    }


def calibrated_mapping(deployment: Any, keys: dict[str, Any]) -> dict[str, Any]:
    """``deployment`` with the fitted ``keys``, as the mapping of a deployment file (unset
    optional keys left out)."""
    from plansim.sim.deployment import deployment_mapping, with_overrides

    return _without_none(deployment_mapping(with_overrides(deployment, keys), json=True))


def _without_none(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_none(v) for k, v in value.items() if v is not None}
    return value


def _write(
    out_dir: Path,
    result: Any,
    report: dict[str, Any],
    inputs: dict[str, Any],
    deployment: Any,
    config: Path,
) -> None:
    import yaml

    from plansim import schema
    from plansim.io import atomic_write_json, atomic_write_text, write_parquet_atomic

    atomic_write_json(out_dir / schema.INPUTS_JSON, inputs)
    write_parquet_atomic(out_dir / schema.CALIBRATION_TABLE, requests_table(result))
    atomic_write_text(
        out_dir / schema.CALIBRATED_DEPLOYMENT,
        f"# plansim calibrate: {config} with the timing fitted ({result.family}) "
        "to the recorded latencies\n"
        + yaml.safe_dump(calibrated_mapping(deployment, result.overrides), sort_keys=False),
    )
    atomic_write_json(out_dir / schema.CALIBRATION_JSON, report)


def requests_table(result: Any) -> Any:
    """Per request: arrival (s from the first), window, held out, recorded and replayed TTFT,
    TPOT and E2E (ms)."""
    import numpy as np
    import pandas as pd

    rec, rep = result.recorded, result.replayed
    arrival = np.asarray(result.arrival_ms, dtype=np.float64)
    return pd.DataFrame(
        {
            "request_id": [str(r) for r in result.request_id],
            "arrival_s": (arrival - arrival[0]) / 1000.0,
            "window": result.window_of.astype(np.int64),
            "held_out": result.held_out[result.window_of],
            "output_length": np.asarray(rep.output_tokens, dtype=np.int64),
            "recorded_ttft_ms": rec.ttft_ms,
            "replayed_ttft_ms": rep.ttft_ms,
            "recorded_tpot_ms": rec.tpot_ms,
            "replayed_tpot_ms": rep.tpot_ms,
            "recorded_e2e_ms": rec.e2e_ms,
            "replayed_e2e_ms": rep.e2e_ms,
        }
    )


def _pct(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:+.1%}"


def table_lines(report: dict[str, Any]) -> list[str]:
    """The terminal table: the chosen family and its parameters with intervals, the families
    by held-out error, every window's errors, the notes."""
    lines = [f"family        {report['family']} (chosen by held-out error)"]
    for p in report["parameters"]:
        loose = "" if p["identified"] else "  (not determined by the trace)"
        lines.append(
            f"  {p['name']:<28} {p['value']:<12.6g} {p['unit']:<11} "
            f"90% [{p['low']:.6g}, {p['high']:.6g}]{loose}"
        )
    lines.append("families      held-out error (mean square log ratio, +-1 SE), train error")
    for f in report["families"]:
        mark = "*" if f["chosen"] else " "
        h = f["held_out_error"]
        lines.append(
            f" {mark} {f['name']:<18} {h['mean']:.5f} +- {h['se']:.5f}   "
            f"{f['train_error']:.5f}   {f['replays']} replays"
        )
    goodput = any("goodput_ratio" in w["error"] for w in report["windows"])
    lines.append(
        "window  span (s)          held  TTFT p50  TTFT p90  TPOT p50  TPOT p90  "
        "E2E p50" + ("  goodput" if goodput else "")
    )
    for w in report["windows"]:
        e = w["error"]
        row = (
            f"{w['window']:>6}  {w['start_s']:>7.0f}-{w['end_s']:<8.0f}  "
            f"{'out' if w['held_out'] else 'fit':<4}  "
            + "  ".join(
                f"{_pct(e[m]):>8}"
                for m in (
                    "median_ttft_ms",
                    "p90_ttft_ms",
                    "median_tpot_ms",
                    "p90_tpot_ms",
                    "median_e2e_ms",
                )
            )
        )
        if goodput:
            row += f"  {e['goodput_ratio'] * 100:+7.1f}pt"
        lines.append(row)
    held = report["held_out"]
    parts = [
        f"{label} {_pct(held[m]['median'])} (worst {_pct(held[m]['worst'])})"
        for m, label in (
            ("median_ttft_ms", "TTFT p50"),
            ("p90_ttft_ms", "TTFT p90"),
            ("median_tpot_ms", "TPOT p50"),
        )
        if m in held
    ]
    lines.append(f"held-out      {', '.join(parts)} over {held['windows']} windows")
    lines += [f"note          {n}" for n in report["notes"]]
    return lines
