"""What every command that writes an output folder shares: the default folder and the reports."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import typer

OUT_ROOT = Path("plansim-out")


def new_out_dir(kind: str) -> Path:
    """A folder that does not exist yet: ``plansim-out/<kind>-<local time>[-N]``."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    candidate = OUT_ROOT / f"{kind}-{stamp}"
    suffix = 2
    while candidate.exists():
        candidate = OUT_ROOT / f"{kind}-{stamp}-{suffix}"
        suffix += 1
    return candidate


def write_reports(out_dir: Path) -> None:
    """Render the folder's HTML reports and list them."""
    from plansim.reports import render_dir

    for path in render_dir(out_dir):
        typer.echo(f"report        {path}")
