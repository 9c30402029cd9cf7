"""`plansim compare DIR...`: replays, retune sweeps and capacity runs side by side.

Reads each output folder (``plansim.reports.compare.read_runs``), prints one line per run (what
differs between the runs, goodput, GPU-hours, p90 TTFT and TPOT, whether it is on the Pareto
front of goodput against GPU-hours) and writes ``compare.json`` and ``compare_report.html``
into ``--out``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from plansim.commands import console
from plansim.commands.output import (
    ForceOption,
    OutputFolder,
    out_option,
    warning_line,
    write_reports,
)
from plansim.commands.report import SelfContainedOption


def compare(
    folders: Annotated[
        list[Path],
        typer.Argument(
            help="Output folders of plansim replay, retune sweep or capacity runs.",
            metavar="DIR",
            show_default=False,
        ),
    ],
    out: out_option("compare") = None,
    no_report: Annotated[
        bool, typer.Option("--no-report", help="Skip compare_report.html.")
    ] = False,
    self_contained: SelfContainedOption = False,
    force: ForceOption = False,
) -> int:
    """Put runs side by side: a summary table, their latency CDFs, and goodput against
    GPU-hours with the Pareto front across them."""
    from plansim.io import atomic_write_json
    from plansim.reports.compare import comparison, read_runs, sla_groups, sla_list
    from plansim.schema import COMPARE_JSON

    folder = OutputFolder.claim(out, "compare", "plansim compare", force=force)
    runs = read_runs(folders)
    data = comparison(runs)
    groups = sla_groups(runs)
    if len(groups) > 1:
        # Goodput under another SLA is another measure: the front across them mixes the two.
        warning_line(
            "plansim: warning: the runs score goodput against different SLAs ("
            + sla_list(groups)
            + "): their goodput and the Pareto front do not compare like with like"
        )
    with folder.writing() as out_dir:
        atomic_write_json(out_dir / COMPARE_JSON, data)
        console.echo(*table_lines(data))
        if not no_report:
            write_reports(out_dir, self_contained=self_contained)
    front = ", ".join(data["pareto_front"]) or "none"
    console.result(f"{len(runs)} runs compared; on the Pareto front: {front}: {out_dir}")
    return console.finish(data)


def table_lines(data: dict) -> list[str]:
    """One line per run: label, the options that differ, goodput, GPU-hours, p90 TTFT/TPOT."""
    rows = data["runs"]
    width = max([len("run"), *(len(r["label"]) for r in rows)])
    differs = data["differs"]
    cells = [[_text(r["differs"].get(k)) for k in differs] for r in rows]
    widths = [max(len(k), *(len(c[i]) for c in cells)) for i, k in enumerate(differs)]
    head = f"{'run':<{width}}  " + "".join(
        f"{k:>{w}}  " for k, w in zip(differs, widths, strict=True)
    )
    lines = [head + f"{'goodput':>8}  {'GPU-h':>8}  {'p90 TTFT':>9}  {'p90 TPOT':>9}  front"]
    for r, c in zip(rows, cells, strict=True):
        good = "n/a" if r["goodput_ratio"] is None else f"{r['goodput_ratio']:.1%}"
        lines.append(
            f"{r['label']:<{width}}  "
            + "".join(f"{v:>{w}}  " for v, w in zip(c, widths, strict=True))
            + f"{good:>8}  {_num(r['gpu_hours'], 4):>8}  {_num(r['p90_ttft_ms'], 1):>9}  "
            f"{_num(r['p90_tpot_ms'], 2):>9}  {'*' if r['pareto'] else ''}"
        )
    return lines


def _num(value: float | None, digits: int) -> str:
    return "n/a" if value is None else f"{value:.{digits}f}"


def _text(value: object) -> str:
    return "" if value is None else str(value)
