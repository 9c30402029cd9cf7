"""Declared parameters: an extension's tunable values written once, with default, bounds and
help, as the fields of a frozen dataclass.

    @dataclass(frozen=True, slots=True)
    class KvRouterKnobs:
        overlap_score_weight: float = param(1.0, ge=0, help="weight of the prefill term")

``params_of(KvRouterKnobs)`` lists them as ``Param`` records; from those the config models
(``Param.field`` for pydantic), the validation of a value from a file, a flag or a retune patch
(``Param.check``), the command-line help (``Param.describe``) and retune's search bounds are
derived. This module imports nothing from plansim but the error type.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass
from typing import Any

from pydantic import Field

from plansim.errors import ConfigError

_META = "plansim.param"
_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


@dataclass(frozen=True, slots=True)
class Param:
    """One declared parameter. ``kind``: ``float``, ``int``, ``bool`` or ``str``; bounds apply
    to numbers, ``choices`` to strings; ``optional``: ``None`` is a value (off);
    ``patchable``: a tick may change it mid-replay (routers); ``alias_of``: this is a
    deprecated spelling of that parameter (a value given for it is the other's value)."""

    name: str
    default: Any
    help: str
    kind: type = float
    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    choices: tuple[str, ...] = ()
    optional: bool = False
    patchable: bool = True
    alias_of: str | None = None

    def field(self) -> tuple[Any, Any]:
        """``(annotation, FieldInfo)`` for ``pydantic.create_model``."""
        annotation: Any = self.kind
        if self.choices:
            from typing import Literal

            annotation = Literal[self.choices]  # type: ignore[valid-type]
        if self.optional:
            annotation = annotation | None
        return annotation, Field(
            default=self.default, ge=self.ge, gt=self.gt, le=self.le, description=self.help
        )

    def bounds_text(self) -> str:
        """``>= 0``, ``> 0, <= 100``, ``one of fcfs, lcfs``, or ``""``."""
        parts = [
            f"{op} {bound:g}"
            for op, bound in ((">=", self.ge), (">", self.gt), ("<=", self.le))
            if bound is not None
        ]
        if self.choices:
            parts.append(f"one of {', '.join(self.choices)}")
        if self.optional:
            parts.append("or null")
        return ", ".join(parts)

    def describe(self) -> str:
        """One line for help texts: ``name (>= 0, default 1): help``."""
        bounds = self.bounds_text()
        default = "null" if self.default is None else format_value(self.default)
        return f"{self.name} ({bounds + ', ' if bounds else ''}default {default}): {self.help}"

    def check(self, value: Any, *, field: str | None = None) -> Any:
        """``value`` (a string from a command line is parsed) with this parameter's type, or
        ``ConfigError`` at ``field`` (default: the name) saying what is allowed."""
        where = field or self.name
        if self.optional and (
            value is None or (isinstance(value, str) and value.strip().lower() in ("null", "none"))
        ):
            return None
        if self.kind is bool:
            if isinstance(value, bool):
                return value
            text = str(value).strip().lower()
            if text in _TRUE or text in _FALSE:
                return text in _TRUE
            raise ConfigError(f"expected true or false, got {value!r}", field=where)
        if self.kind is str:
            if not isinstance(value, str) or (self.choices and value not in self.choices):
                raise ConfigError(
                    f"expected {self.bounds_text() or 'text'}, got {value!r}", field=where
                )
            return value
        what = "an integer" if self.kind is int else "a number"
        try:
            number = float(value)
        except (TypeError, ValueError):
            raise ConfigError(f"expected {what}, got {value!r}", field=where) from None
        if isinstance(value, bool) or not math.isfinite(number):
            raise ConfigError(f"expected {what}, got {value!r}", field=where)
        if self.kind is int and not number.is_integer():
            raise ConfigError(f"expected an integer, got {value!r}", field=where)
        if (
            (self.ge is not None and number < self.ge)
            or (self.gt is not None and number <= self.gt)
            or (self.le is not None and number > self.le)
        ):
            raise ConfigError(f"must be {self.bounds_text()}, got {value!r}", field=where)
        if self.kind is int:
            return int(number)
        # Integral values given as ints stay ints (labels print them without ".0").
        return value if isinstance(value, int) else number


@dataclass(frozen=True, slots=True)
class NoParams:
    """The parameters of an extension that declares none."""


def param(
    default: Any,
    *,
    help: str,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    choices: tuple[str, ...] = (),
    optional: bool = False,
    patchable: bool = True,
    alias_of: str | None = None,
) -> Any:
    """A dataclass field declaring a ``Param`` (its name and kind come from the field)."""
    spec = {
        "help": help,
        "ge": ge,
        "gt": gt,
        "le": le,
        "choices": choices,
        "optional": optional,
        "patchable": patchable,
        "alias_of": alias_of,
    }
    return dataclasses.field(default=default, metadata={_META: spec})


@functools.cache
def params_of(cls: type) -> tuple[Param, ...]:
    """The ``Param`` records of a parameter dataclass, in field order."""
    out = []
    hints = _field_kinds(cls)
    for f in dataclasses.fields(cls):
        spec = f.metadata.get(_META)
        if spec is None:
            raise TypeError(f"{cls.__name__}.{f.name} is not declared with param()")
        out.append(Param(name=f.name, default=f.default, kind=hints[f.name], **spec))
    return tuple(out)


def _field_kinds(cls: type) -> dict[str, type]:
    """Each field's base type (``float | None`` -> float), from the annotations."""
    import typing

    kinds: dict[str, type] = {}
    for name, hint in typing.get_type_hints(cls).items():
        args = [a for a in typing.get_args(hint) if a is not type(None)] or [hint]
        base = args[0]
        kinds[name] = str if typing.get_origin(base) is typing.Literal else base
    return kinds


def format_value(value: Any) -> str:
    """A parameter value as labels and help print it: ``true``, ``1`` for 1.0, ``0.5``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)
