"""`plansim replay` commands."""

from __future__ import annotations

import typer

app = typer.Typer(help="replay commands.", no_args_is_help=True)
