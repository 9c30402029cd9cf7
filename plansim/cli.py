"""The ``plansim`` command: composition only. Each command group lives in ``plansim.commands``.

A user mistake (``InputError``) becomes one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import sys

import typer

from plansim.errors import InputError

app = typer.Typer(
    name="plansim",
    help="Offline workbench for planning LLM serving capacity.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _register() -> None:
    from plansim.commands import predict, replay, report, retune, trace

    app.add_typer(trace.app, name="trace")
    app.add_typer(replay.app, name="replay")
    app.add_typer(retune.app, name="retune")
    app.add_typer(predict.app, name="predict")
    app.command(name="report")(report.report)


_register()


def main() -> None:
    """Console entry point: runs the app, mapping ``InputError`` to exit status 2."""
    try:
        app()
    except InputError as exc:
        print(f"plansim: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
