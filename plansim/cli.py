"""The ``plansim`` command: composition only. Each command group lives in ``plansim.commands``.

Warnings are ``plansim: warning: ...`` lines on stderr, held until the command's inputs are
checked (a refused command prints only why). Every command runs with SIGTERM/SIGHUP unwinding it
like Ctrl-C and with one scratch folder for
all temporary files of it and its workers, removed when it ends (``plansim.lifecycle``), and
the output folder it locked is released when it ends (``commands.output.run_folders``). Every
way a command can end that is not success is one line on stderr, never a traceback:

- a user mistake (``InputError``, a bad flag): exit status 2;
- an operating-system error at the edges (a full disk, a file that vanished): exit status 1;
- Ctrl-C: "interrupted", exit status 130; SIGTERM / SIGHUP: "terminated", 128 + the signal.

Anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import gc
import importlib
import logging
import os
import signal
import sys
from typing import Annotated, Any, NoReturn

import typer
from typer.exceptions import Abort, Exit, TyperException

from plansim.commands.console import with_console
from plansim.commands.help_text import tidy_help
from plansim.commands.output import held_warnings, run_folders, warning_line
from plansim.configfile import locate
from plansim.errors import InputError
from plansim.lifecycle import Terminated, handle_termination, scratch_folder
from plansim.runtime import (
    exit_now,
    long_lived,
    no_pydantic_plugins,
    one_blas_thread,
    rare_collections,
)

app = typer.Typer(
    name="plansim",
    help="Offline workbench for planning LLM serving capacity.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


# Each command's module and attribute: a typer app (a command group) or a function (one
# command), in help order. A command line imports only the module of the command it names, so
# that ``plansim replay run`` does not load what the predictors or the reports need; ``--help``
# and an unknown name load them all.
COMMANDS: dict[str, tuple[str, str]] = {
    "trace": ("plansim.commands.trace", "app"),
    "replay": ("plansim.commands.replay", "app"),
    "retune": ("plansim.commands.retune", "app"),
    "predict": ("plansim.commands.predict", "app"),
    "profile": ("plansim.commands.profile", "app"),
    "calibrate": ("plansim.commands.calibrate", "calibrate"),
    "capacity": ("plansim.commands.capacity", "capacity"),
    "fleet": ("plansim.commands.fleet", "fleet"),
    "report": ("plansim.commands.report", "report"),
    "compare": ("plansim.commands.compare", "compare"),
}
_loaded: dict[str, Any] = {}


def _print_version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        typer.echo(f"plansim {version('plansim')}")
        raise typer.Exit()


@app.callback()
def _group(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            is_eager=True,
            callback=_print_version,
            help="Print plansim's version and exit.",
        ),
    ] = False,
) -> None:
    """A callback keeps ``plansim`` a group when only one command is registered."""


def register_commands(args: list[str]) -> None:
    """Register the command ``args`` names (its first word), or every command, in help order."""
    first = next((a for a in args if not a.startswith("-")), None)
    for name in [first] if first in COMMANDS else COMMANDS:
        if name not in _loaded:
            module, attr = COMMANDS[name]
            _loaded[name] = getattr(importlib.import_module(module), attr)
    app.registered_groups.clear()
    app.registered_commands.clear()
    for name in COMMANDS:
        command = _loaded.get(name)
        if isinstance(command, typer.Typer):
            console_everywhere(command)
            app.add_typer(command, name=name)
        elif command is not None:
            app.command(name=name)(with_console_once(command))


def console_everywhere(group: typer.Typer) -> None:
    """Give every command of ``group`` (and of its subgroups) ``--json`` and ``-q``."""
    for info in group.registered_commands:
        info.callback = with_console_once(info.callback)
    for sub in group.registered_groups:
        if sub.typer_instance is not None:
            console_everywhere(sub.typer_instance)


def with_console_once(fn: Any) -> Any:
    """``console.with_console(fn)``, once however often the commands are registered."""
    if getattr(fn, "_plansim_console", False):
        return fn
    wrapped = with_console(fn)
    wrapped._plansim_console = True
    return wrapped


class _WarningLine(logging.Handler):
    """plansim's warnings (a key with no effect, a reconciled flag) as ``plansim: warning: ...``
    lines on stderr, whatever ``sys.stderr`` is when they are logged; held while the command
    checks its inputs (``commands.output.held_warnings``)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        warning_line(f"plansim: warning: {record.getMessage()}")


def _warnings_to_stderr() -> None:
    logger = logging.getLogger("plansim")
    if not any(isinstance(h, _WarningLine) for h in logger.handlers):
        logger.addHandler(_WarningLine())


def main() -> None:
    """Run the command line ``sys.argv`` names; see the module docstring for how a command
    ends (always ``SystemExit`` with the status, or a bug's exception)."""
    one_blas_thread()
    no_pydantic_plugins()
    _warnings_to_stderr()
    try:
        _main()
    finally:
        gc.unfreeze()  # what start-up froze (``runtime.long_lived``), for an in-process caller


def run() -> NoReturn:
    """The ``plansim`` executable and ``python -m plansim``: ``main()``, then the process ends
    at once (``runtime.exit_now``) with its status; cyclic garbage is collected rarely
    (``runtime.rare_collections``), as for a process plansim owns."""
    rare_collections()
    try:
        main()
    except SystemExit as exc:
        if exc.code is not None and not isinstance(exc.code, int):
            raise
        exit_now(exc.code or 0)
    exit_now(0)


def _main() -> NoReturn:
    with long_lived():
        register_commands(sys.argv[1:])
        command = tidy_help(typer.main.get_command(app))
    try:
        with (
            handle_termination(),
            scratch_folder(),
            run_folders(),
            held_warnings(),
            command.make_context("plansim", sys.argv[1:]) as ctx,
        ):
            result = command.invoke(ctx)
    except Exit as exc:  # --help, or a group called without a command
        raise SystemExit(exc.exit_code) from None
    except InputError as exc:
        _fail(str(locate(exc)), 2)
    except Terminated as exc:
        _fail(f"terminated ({signal.Signals(exc.signum).name})", 128 + exc.signum)
    except KeyboardInterrupt:
        _fail("interrupted", 130)
    except Abort:
        _fail("aborted", 130)
    except TyperException as exc:  # click's usage errors, as typer vendors them
        message = exc.format_message()
        if not message:  # a group called without a command: show its help
            exc.show()  # type: ignore[attr-defined]
            raise SystemExit(exc.exit_code) from None
        _fail(" ".join(message.split()), exc.exit_code)
    except BrokenPipeError:  # stdout closed early (`plansim ... | head`): nothing to say
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - so the exit flush cannot fail
        raise SystemExit(1) from None
    except OSError as exc:
        _fail(describe_os_error(exc), 1)
    raise SystemExit(result if isinstance(result, int) else 0)


def describe_os_error(exc: OSError) -> str:
    """``path: reason`` for an operating-system error (``No space left on device``)."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    path = exc.filename if exc.filename is not None else None
    return f"{path}: {reason}" if path is not None else reason


def _fail(message: str, status: int) -> NoReturn:
    # One line, whatever the message holds (a library's error text may span several).
    print(
        f"plansim: {'; '.join(filter(None, map(str.strip, message.splitlines())))}", file=sys.stderr
    )
    raise SystemExit(status) from None
