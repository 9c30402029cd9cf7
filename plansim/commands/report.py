"""`plansim report DIR`: re-render the reports of an output folder from its tables."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def report(
    out_dir: Annotated[Path, typer.Argument(help="An output folder written by plansim.")],
) -> None:
    """Re-render the HTML reports of an output folder from its tables, without re-running."""
    from plansim.reports import render_dir

    for path in render_dir(out_dir):
        typer.echo(f"report        {path}")
