"""`plansim retune` commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="retune commands.", no_args_is_help=True)
