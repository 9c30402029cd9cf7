"""Groups of command-line options written once and shared by several commands.

A group maps each parameter name to ``(type, default)``: the ``Annotated[..., typer.Option(...)]``
type and its default (``...`` for a required option). ``with_options(*groups)`` adds a group's
parameters to a command's signature, so typer shows and parses them as if they were written
there; the command takes them as ``**options`` (``ctx.params`` holds every parameter).
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Callable
from typing import Any

OptionGroup = dict[str, tuple[Any, Any]]

# The goodput SLA's flags (replay, capacity). TPOT is what the bound checks: each request's mean
# token gap; --sla-itl-ms, the reference's spelling, is accepted for it.
SLA_TTFT_HELP = "Goodput SLA: bound on each request's TTFT."
SLA_TPOT_HELP = (
    "Goodput SLA: bound on each request's TPOT, its mean token gap "
    "(--sla-itl-ms is the reference's spelling)."
)
SLA_E2E_HELP = "Goodput SLA: bound on each request's end-to-end latency."


def with_options(*groups: OptionGroup) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def add(fn: Callable[..., Any]) -> Callable[..., Any]:
        hints = typing.get_type_hints(fn, include_extras=True)
        params = [
            p.replace(annotation=hints.get(p.name, p.annotation))
            for p in inspect.signature(fn).parameters.values()
            if p.kind is not inspect.Parameter.VAR_KEYWORD
        ]
        for group in groups:
            for name, (kind, default) in group.items():
                params.append(
                    inspect.Parameter(
                        name,
                        inspect.Parameter.KEYWORD_ONLY,
                        annotation=kind,
                        default=inspect.Parameter.empty if default is ... else default,
                    )
                )
        fn.__signature__ = inspect.signature(fn).replace(parameters=params)  # type: ignore[attr-defined]
        return fn

    return add
