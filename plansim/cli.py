"""The ``plansim`` command: composition only. Each command group lives in ``plansim.commands``.

A user mistake (``InputError``) becomes one line on stderr and exit status 2, never a traceback.
"""

from __future__ import annotations

import sys
from typing import NoReturn

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
    from plansim.commands import predict, profile, replay, report, retune, trace

    app.add_typer(trace.app, name="trace")
    app.add_typer(replay.app, name="replay")
    app.add_typer(retune.app, name="retune")
    app.add_typer(predict.app, name="predict")
    app.add_typer(profile.app, name="profile")
    app.command(name="report")(report.report)


_register()


def main() -> None:
    """Console entry point. A user mistake, whether a bad value (``InputError``) or a bad flag
    (click's usage errors), is one line on stderr and exit status 2."""
    try:
        result = app(standalone_mode=False)
    except InputError as exc:
        _fail(str(exc), 2)
    except typer.Abort:
        _fail("aborted", 130)
    except typer.exceptions.TyperException as exc:  # click's usage errors, as typer vendors them
        message = exc.format_message()
        if not message:  # a group called without a command: show its help
            exc.show()
            raise SystemExit(exc.exit_code) from None
        _fail(" ".join(message.split()), exc.exit_code)
    raise SystemExit(result if isinstance(result, int) else 0)


def _fail(message: str, status: int) -> NoReturn:
    print(f"plansim: {message}", file=sys.stderr)
    raise SystemExit(status) from None
