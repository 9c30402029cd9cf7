"""`plansim retune windows`: score the candidates of many windows at once (a day of traffic).

``plansim retune windows config.yaml [--from K] [--to K2] [--backend spawn|ray]
[--ray-address A] [--out DIR]`` sweeps windows K..K2 (default: every window of the trace) from
the startup point, prints each window's ranked table (in window order) and an overall summary,
and writes ``windows/<k>.json`` (the window's record and ranked table), ``windows.parquet`` (one
row per window and candidate), ``summary.json``, ``inputs.json`` and the report
``retune_windows_report.html`` into the output folder.

Printing lives here; the work is in ``plansim.retune_runs.batch``.
"""

from __future__ import annotations

import logging
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from plansim.commands import console
from plansim.commands.console import QuietOption
from plansim.commands.output import (
    ForceOption,
    OutputFolder,
    ResumeOption,
    open_journal,
    out_option,
    start_work,
    write_reports,
)
from plansim.commands.progress import Progress
from plansim.commands.report import SelfContainedOption
from plansim.errors import InputError
from plansim.workers.backends import EXECUTORS, backend_help, check_address, make_executor

log = logging.getLogger("plansim.retune")


# ``--backend``'s choices, the registered executors (the first the default).
Backend = Enum("Backend", [(name, name) for name in EXECUTORS], type=str)
DEFAULT_BACKEND = Backend(EXECUTORS.names()[0])


NoTimeoutOption = Annotated[
    bool,
    typer.Option(
        "--no-timeout",
        help="Ignore retune.timeout_seconds (each window's sweep runs to its end, so "
        "the ranking does not depend on how busy the machine is).",
    ),
]


def load_window_plans(config: str | Path, *, first: int, last: int | None) -> tuple[Any, list[Any]]:
    """The retune run of ``config`` and the sweep plans of its windows ``first..last``
    (default: the trace's last complete window)."""
    from plansim.retune_runs.runner import load_retune_run

    run = load_retune_run(config)
    return run, plans_of_run(run, first=first, last=last)


def plans_of_run(
    run: Any,
    *,
    first: int,
    last: int | None,
    first_option: str = "--from",
    last_option: str = "--to",
    no_timeout: bool = False,
    workload: Any = None,
) -> list[Any]:
    """The sweep plans of windows ``first..last`` (default: the trace's last complete window)
    of a loaded retune run (``workload``: its trace, when already loaded), without the
    wall-clock limit if ``no_timeout``; a window past the last complete one is an
    ``InputError`` naming the option that asked for it and the last window."""
    from dataclasses import replace

    from plansim.retune_runs.batch import window_plans
    from plansim.retune_runs.runner import count_windows, load_run_workload

    if workload is None:
        workload = load_run_workload(run)
    count = count_windows(run, workload)
    complete = (
        f"the trace has {count} complete window(s), 0 to {count - 1}"
        if count
        else "the trace has no complete window"
    )
    if last is None:
        last = count - 1
    elif last < first:
        raise InputError(f"{last} is before {first_option} {first}", field=last_option)
    if first >= count:
        raise InputError(
            f"{complete}; window {first} is past the last", source=run.source, field=first_option
        )
    if last >= count:
        raise InputError(
            f"{complete}; window {last} is past the last", source=run.source, field=last_option
        )
    plans = window_plans(run, workload, range(first, last + 1))
    return [replace(plan, timeout_s=None) for plan in plans] if no_timeout else plans


def windows(
    config: Annotated[
        Path,
        typer.Argument(
            help="Retune run file (YAML/JSON): trace, deployment, planner with its retune block.",
            show_default=False,
        ),
    ],
    first: Annotated[int, typer.Option("--from", min=0, help="First window index.")] = 0,
    last: Annotated[
        int | None,
        typer.Option(
            "--to",
            min=0,
            help="Last window index (default: the trace's last complete window).",
            show_default=False,
        ),
    ] = None,
    backend: Annotated[
        Backend, typer.Option(help=backend_help("candidate replays"))
    ] = DEFAULT_BACKEND,
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address",
            help="Ray cluster to connect to (default with --backend ray: start a "
            "local instance with retune.max_parallel CPUs).",
            show_default=False,
        ),
    ] = None,
    out: out_option("retune-windows") = None,
    top: Annotated[
        int,
        typer.Option(
            min=0, help="Candidates printed per window, best first (0: all; the files have all)."
        ),
    ] = 5,
    no_report: Annotated[bool, typer.Option("--no-report", help="Skip the HTML report.")] = False,
    self_contained: SelfContainedOption = False,
    no_timeout: NoTimeoutOption = False,
    quiet: QuietOption = False,
    force: ForceOption = False,
    resume: ResumeOption = False,
) -> int:
    """Score the candidates of many windows at once; print them ranked per window.

    Every (window, candidate) replay is an independent task; a summary over the windows follows
    the tables. Each replay is recorded in the output folder as it finishes, so that --resume
    after a kill replays only what is missing (with --no-timeout, or when no window reaches
    its timeout, the answer is the one an uninterrupted run gives).
    """
    from plansim.commands.retune_text import ranked_table, score_legend
    from plansim.retune_runs.batch import score_windows

    check_address(backend.value, ray_address)
    from plansim.retune_runs.runner import load_retune_run, load_run_workload

    folder = OutputFolder.claim(
        out, "retune-windows", "plansim retune windows", force=force, resume=resume
    )
    run = load_retune_run(config)
    cfg = run.retune.config
    # The backend first: a missing Ray fails before any trace is read.
    executor = make_executor(backend.value, cfg.max_parallel, ray_address)
    try:
        workload = load_run_workload(run)
        plans = plans_of_run(run, first=first, last=last, no_timeout=no_timeout, workload=workload)
        journal = open_journal(
            folder,
            {
                "command": "plansim retune windows",
                "config": str(config),
                "traces": list(run.trace_paths),
                "windows": [p.window.index for p in plans],
                "deployment": run.deployment.model_dump(mode="json"),
                "planner": run.planner_raw,
                "no_timeout": no_timeout,
            },
            workload.content_digest(),
        )
        del workload  # the sweeps read their windows again
        start_work()
        console.echo(score_legend(run.retune))
        # The folder is written from the first recorded replay on (its resume records).
        with folder.writing() as out_dir:
            with Progress("retune windows", total=len(plans), unit="windows", quiet=quiet) as bar:
                printer = _InOrder(
                    [plan.window.index for plan in plans], bar, cfg, top, ranked_table
                )
                results = score_windows(plans, executor, on_window=printer.add, journal=journal)
            executor.close()
            summary = write_window_outputs(
                out_dir,
                run,
                plans,
                results,
                command="plansim retune windows",
                config=config,
                extra={
                    "backend": backend.value,
                    "ray_address": ray_address,
                    "max_parallel": executor.max_parallel,
                    "no_timeout": no_timeout,
                },
            )
            console.echo(*summary_lines(summary))
            echo_resumed(journal)
            console.echo(f"output        {out_dir}")
            if not no_report:
                write_reports(out_dir, self_contained=self_contained)
    finally:
        executor.close()
    console.result(windows_verdict(summary, out_dir))
    return console.finish(summary)


def windows_verdict(summary: dict[str, Any], out_dir: Path) -> str:
    """The result line of scored windows: how many, and the candidate that won most."""
    ranked = sorted(summary["candidates"], key=lambda c: -c["wins"])
    best = (
        (f"; most wins: {ranked[0]['label']} ({ranked[0]['wins']} of {summary['windows']})")
        if ranked
        else ""
    )
    return f"{summary['windows']} window(s) scored{best}: {out_dir}"


def echo_resumed(journal: Any) -> None:
    """The line saying how many windows and replays a resumed run took from its journal."""
    if journal.reused:
        console.echo(
            f"resumed       {journal.reused} windows and replays recorded by the "
            "interrupted run, not run again"
        )


def write_window_outputs(
    out_dir: Path,
    run: Any,
    plans: list[Any],
    results: list[Any],
    *,
    command: str,
    config: Path,
    extra: dict[str, Any],
) -> dict[str, Any]:
    """The folder of scored windows: ``windows/<k>.json``, ``windows.parquet``,
    ``summary.json`` (with the reader's counts summed over the windows, also logged at INFO)
    and ``inputs.json`` (with ``extra``). Returns the summary."""
    from plansim.commands.retune_text import scoring_sla
    from plansim.io import atomic_write_json, write_parquet_atomic
    from plansim.retune_runs.batch import summarize, window_record
    from plansim.schema import INPUTS_JSON, SUMMARY_JSON, WINDOW_RECORDS_DIR, WINDOWS_TABLE

    summary = summarize(results)
    records = [window_record(result) for result in results]
    reader: dict[str, int] = {}
    for record in records:
        for key, n in record["reader_counts"].items():
            reader[key] = reader.get(key, 0) + int(n)
    summary["reader_counts"] = reader
    if any(reader.values()):
        counts = ", ".join(f"{k.replace('_', ' ')} {n:,}" for k, n in reader.items() if n)
        log.info("reader over %d window(s): %s", len(records), counts)
    for record in records:
        atomic_write_json(out_dir / WINDOW_RECORDS_DIR / f"{record['window']}.json", record)
    write_parquet_atomic(out_dir / WINDOWS_TABLE, candidates_frame(records))
    atomic_write_json(out_dir / SUMMARY_JSON, summary)
    atomic_write_json(
        out_dir / INPUTS_JSON,
        {
            "command": command,
            "config": str(config),
            "traces": list(run.trace_paths),
            "requests": sum(record["window_requests"] for record in records),
            # The first and last window scored, named so that the pair does not read as two windows.
            "windows": (
                {"first": plans[0].window.index, "last": plans[-1].window.index} if plans else {}
            ),
            **extra,
            "deployment": run.deployment.model_dump(mode="json"),
            "planner": run.planner_raw,
            "sla": run.deployment.sla.model_dump(mode="json"),
            "objective": run.retune.config.objective,
            "scoring_sla": scoring_sla(run.retune),
            "min_improvement_percentage": run.retune.config.min_improvement_percentage,
            "seed": run.retune.config.seed,
        },
    )
    return summary


class _InOrder:
    """Prints each window's ranked table as soon as every earlier window has been printed, so
    the output is in window order whatever order the windows finish in."""

    def __init__(self, indices: list[int], bar: Progress, cfg: Any, top: int, table: Any) -> None:
        self._order = indices
        self._next = 0
        self._waiting: dict[int, Any] = {}
        self._bar, self._cfg, self._top, self._table = bar, cfg, top, table

    def add(self, result: Any) -> None:
        self._waiting[result.index] = result
        lines = []
        while self._next < len(self._order) and self._order[self._next] in self._waiting:
            lines += self._lines(self._waiting.pop(self._order[self._next]))
            self._next += 1
        self._bar.echo(*lines)
        self._bar.advance()

    def _lines(self, result: Any) -> list[str]:
        lines = self._table(result.report, self._cfg, result.index)
        # Header lines, then the "rank" header and one line per candidate, then the decision.
        header_at = next(
            (i for i, line in enumerate(lines) if line.lstrip().startswith("rank")), None
        )
        if header_at is None:
            return [*lines, ""]
        rows = lines[header_at + 1 : -1]
        if self._top and len(rows) > self._top:
            rows = rows[: self._top] + [f"      ... {len(rows) - self._top} more"]
        return lines[: header_at + 1] + rows + lines[-1:] + [""]


def candidates_frame(records: list[dict[str, Any]]) -> Any:
    """One row per (window, candidate) of the window records, in window then rank order."""
    import pandas as pd

    from plansim.schema import WINDOW_CANDIDATE_COLUMNS

    columns = list(WINDOW_CANDIDATE_COLUMNS)
    rows = [
        {"window": record["window"], **{k: row[k] for k in columns[1:]}}
        for record in records
        for row in record["ranked"]
    ]
    return pd.DataFrame(rows, columns=columns)


def summary_lines(summary: dict[str, Any]) -> list[str]:
    """The summary over windows: outcomes, then per candidate its wins and score distribution."""
    from plansim.commands.retune_text import format_number

    outcomes = ", ".join(f"{n} {k}" for k, n in summary["outcomes"].items()) or "none"
    lines = [
        f"summary: {summary['windows']} windows ({outcomes}); objective {summary['objective']}",
        f"{'wins':>5} {'share':>6} {'failed':>6} {'mean':>10} {'p25':>10} {'median':>10} "
        f"{'p75':>10} {'min':>10} {'max':>10}  candidate",
    ]
    ordered = sorted(summary["candidates"], key=lambda c: -c["wins"])
    for cand in ordered:
        dist = cand["score"]
        share = "-" if cand["win_share"] is None else f"{cand['win_share'] * 100:.0f}%"
        cells = " ".join(
            f"{format_number(dist[k]):>10}" for k in ("mean", "p25", "median", "p75", "min", "max")
        )
        tag = " (current)" if cand["is_current"] else ""
        lines.append(
            f"{cand['wins']:>5} {share:>6} {cand['failed']:>6} {cells}  {cand['label']}{tag}"
        )
    return lines
