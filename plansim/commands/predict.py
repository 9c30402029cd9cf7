"""`plansim predict` commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="predict commands.", no_args_is_help=True)
