"""What a command prints on stdout, in one place, so that every command fits a script.

Every command takes ``--json`` and ``-q``/``--quiet`` (``with_console`` adds ``--json``, and
``-q`` unless the command declares its own ``quiet``; ``plansim.cli`` applies it to every
command, so that a command added later has both):

- by default a command prints its detail lines (``echo``) and its result line (``result``);
- ``-q`` prints only the result line (and errors, which go to stderr as always);
- ``--json`` prints nothing but one JSON object, the command's result (``finish``): for a command
  that writes ``summary.json`` or ``capacity.json``, that file's object, byte for byte.

Warnings and errors go to stderr in every mode. The mode is set for the time the command
runs and reset after it, so that several command lines run in one process (tests) never share
it; outside a command (``plansim.api``) everything is printed.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Annotated, Any

import typer

# (json, quiet) of the command running.
_MODE: ContextVar[tuple[bool, bool]] = ContextVar("plansim_console_mode", default=(False, False))
JSON_HELP = "Print only the result, as one JSON object on stdout."
QUIET_HELP = "Print only the result line (and errors); no progress display."
# The --quiet/-q option, as every command declares it.
QuietOption = Annotated[bool, typer.Option("--quiet", "-q", help=QUIET_HELP)]


def json_mode() -> bool:
    """Whether ``--json`` was given: nothing but the result object goes to stdout."""
    return _MODE.get()[0]


def echo(*lines: str) -> None:
    """Detail lines: printed unless ``-q`` or ``--json``."""
    json_output, quiet = _MODE.get()
    if not (json_output or quiet):
        for line in lines:
            typer.echo(line)


def result(line: str) -> None:
    """The command's result line: printed unless ``--json``."""
    if not json_mode():
        typer.echo(line)


def finish(payload: Mapping[str, Any], status: int = 0) -> int:
    """End a command: with ``--json`` print ``payload`` as one JSON object (the encoding of
    the files plansim writes: sorted keys, 2-space indent). Returns ``status``, the command's
    exit status."""
    if json_mode():
        from plansim.io import json_bytes

        typer.echo(json_bytes(payload).decode("utf-8"), nl=False)
    return status


def with_console(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with ``--json`` and, unless it declares ``quiet``, ``-q``/``--quiet`` added to its
    options; the mode is set before ``fn`` runs (which receives ``quiet`` only if it declares
    it)."""
    signature = inspect.signature(fn)
    hints = typing.get_type_hints(fn, include_extras=True)
    params = [
        p.replace(annotation=hints.get(p.name, p.annotation)) for p in signature.parameters.values()
    ]
    declares_quiet = "quiet" in signature.parameters
    keyword = inspect.Parameter.KEYWORD_ONLY
    added = [
        inspect.Parameter(
            "json_output",
            keyword,
            default=False,
            annotation=Annotated[bool, typer.Option("--json", help=JSON_HELP)],
        )
    ]
    if not declares_quiet:
        added.append(
            inspect.Parameter(
                "quiet",
                keyword,
                default=False,
                annotation=QuietOption,
            )
        )
    # Keyword-only parameters go before a **options catch-all.
    tail = [p for p in params if p.kind is inspect.Parameter.VAR_KEYWORD]
    params = [p for p in params if p.kind is not inspect.Parameter.VAR_KEYWORD]

    @functools.wraps(fn)
    def run(*args: Any, json_output: bool = False, **kwargs: Any) -> Any:
        quiet = kwargs["quiet"] if declares_quiet else kwargs.pop("quiet", False)
        token = _MODE.set((bool(json_output), bool(quiet)))
        try:
            return fn(*args, **kwargs)
        finally:
            _MODE.reset(token)

    run.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=params + added + tail
    )
    return run
