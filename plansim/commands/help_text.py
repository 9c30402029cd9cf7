"""``--help`` as users of click and argparse tools read it: ``tidy_help(command)`` goes over a
click command tree once, before it runs.

- Value metavars in click's words (``INTEGER``, ``FLOAT``, ``TEXT``, ``PATH``, the choices),
  never typer's ``<int>``/``<list[Path]>``; a flag shows none, an argument its name only.
- Docstrings and option help reflowed: the single line breaks of source code are spaces, so the
  terminal wraps each paragraph at its own width (a paragraph opening with ``\\b``, or lines
  that start with ``-``, keep their breaks).
"""

from __future__ import annotations

import re
from typing import Any

import typer

_TYPE_WORDS = {"int": "INTEGER", "float": "FLOAT", "str": "TEXT", "path": "PATH", "bool": "BOOLEAN"}
_LIST = re.compile(r"^list\[(.*)\]$")


def tidy_help(command: Any) -> Any:
    """``command`` and every subcommand with the metavars and help text above; returns it."""
    _tidy(command, set())
    return command


def _tidy(command: Any, seen: set[int]) -> None:
    if id(command) in seen:
        return
    seen.add(id(command))
    command.help = reflow(command.help)
    ctx = typer.Context(command)
    for param in command.params:
        # typer's parameters are click's Parameter, but neither click Option nor Argument.
        if param.param_type_name == "option":
            param.help = reflow(param.help)
            if param.metavar is None:
                param.metavar = "" if param.is_flag else _metavar(param, ctx)
        elif param.param_type_name == "argument":
            # The argument's name says what it is; typer would add its Python type.
            param.display_type_rich = _no_type  # type: ignore[method-assign]
    help_option = _flag_help_option(command.get_help_option)
    command.get_help_option = help_option  # type: ignore[method-assign]
    for sub in getattr(command, "commands", {}).values():
        _tidy(sub, seen)


def _no_type(ctx: Any) -> None:
    return None


def _flag_help_option(make: Any) -> Any:
    """``--help`` (click makes it per context) without a metavar, as every flag."""

    def help_option(ctx: Any) -> Any:
        option = make(ctx)
        if option is not None:
            option.metavar = ""
        return option

    return help_option


def _metavar(param: Any, ctx: Any) -> str:
    """click's word for the option's value type: typer's ``<int range>`` is ``INTEGER``,
    ``<spawn|ray>`` is ``[spawn|ray]``, ``<list[Path]>`` (a repeatable option) is ``PATH``."""
    display = getattr(param, "display_type", None)
    label = display(ctx).strip("<>") if display is not None else param.type.name
    while (inner := _LIST.match(label)) is not None:
        label = inner.group(1)
    label = label.removesuffix(" range")
    if "|" in label:
        return f"[{label}]"
    return _TYPE_WORDS.get(label.lower(), label.upper())


def reflow(text: str | None) -> str | None:
    """``text`` with each paragraph's single line breaks made spaces (see the module
    docstring)."""
    if not text:
        return text
    paragraphs = []
    for paragraph in text.split("\n\n"):
        if paragraph.startswith("\b"):
            paragraphs.append(paragraph)
            continue
        lines: list[str] = []
        for line in paragraph.split("\n"):
            stripped = line.strip()
            if lines and stripped and not stripped.startswith("-"):
                lines[-1] = f"{lines[-1]} {stripped}"
            else:
                lines.append(stripped)
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs)
