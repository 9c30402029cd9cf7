"""`plansim report DIR`: re-render the reports of an output folder from its tables."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from plansim.commands.output import OutputFolder, write_reports

SELF_CONTAINED_HELP = (
    "Embed plotly.js in every report (one ~5 MB file to mail) instead of sharing the folder's "
    "plotly.min.js."
)
SelfContainedOption = Annotated[bool, typer.Option("--self-contained", help=SELF_CONTAINED_HELP)]


def report(
    out_dir: Annotated[Path, typer.Argument(help="An output folder written by plansim.")],
    self_contained: SelfContainedOption = False,
) -> int:
    """Re-render the HTML reports of an output folder from its tables, without re-running."""
    from plansim.commands import console

    with OutputFolder.reopen(out_dir):
        reports = write_reports(out_dir, self_contained=self_contained)
    console.result(f"{len(reports)} report(s) in {out_dir}")
    return console.finish({"folder": str(out_dir), "reports": [str(p) for p in reports]})
