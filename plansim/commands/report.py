"""`plansim report DIR`: re-render the reports of an output folder from its tables."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from plansim.commands.output import write_reports


def report(
    out_dir: Annotated[Path, typer.Argument(help="An output folder written by plansim.")],
) -> None:
    """Re-render the HTML reports of an output folder from its tables, without re-running."""
    write_reports(out_dir)
