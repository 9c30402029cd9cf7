"""The validation layer: how every user value (config file or flag) is checked and reported.

- ``StrictModel``: the base of every pydantic model of user input. Unknown keys are errors,
  numbers must be finite (``.inf`` and ``.nan`` are refused), and a boolean is never taken as a
  number (pydantic alone would read ``num_workers: true`` as 1), and a whole number must fit
  in 64 bits (tables, JSON and numpy store them so: ``num_gpu_blocks: 18446744073709551616``
  failed when inputs.json was written, a ``block_size`` of 2**63 overflowed in the router).
- ``config_error(exc, ...)``: a pydantic ``ValidationError`` as one ``ConfigError`` naming the
  dotted field and what was given (``NaN``, ``inf``, ``true``), never "Input should be greater
  than 0" for a NaN.

Validators of these models follow one convention: a ``ValueError`` whose message starts with a
field path and ": " (``"timeout_seconds: exceeds interval_seconds"``), or that carries ``path``
and ``reason`` attributes, is reported at that field.
"""

from __future__ import annotations

import re
import types
import typing
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, model_validator

from plansim.errors import ConfigError, describe_value, unknown_key

# The whole numbers a field may hold: what an int64 column, orjson and numpy take.
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# pydantic's location parts that name a union member or a validator, not a field.
_LOCATION_TAGS = frozenset({"float", "int", "str", "bool", "none", "__root__"})
_FIELD_PATH = re.compile(r"^[A-Za-z_][\w]*(\.[A-Za-z_][\w]*)*$")


def _accepts_number(annotation: Any) -> bool:
    """Whether a field's type takes numbers but not booleans (int, float, or a union of them)."""
    if annotation in (int, float):
        return True
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = typing.get_args(annotation)
        return any(_accepts_number(a) for a in args) and bool not in args
    if origin is typing.Annotated:
        return _accepts_number(typing.get_args(annotation)[0])
    return False


class StrictModel(BaseModel):
    """Base of the models of user input; see the module docstring."""

    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)

    @model_validator(mode="before")
    @classmethod
    def _no_booleans_as_numbers(cls, data: Any) -> Any:
        if not isinstance(data, Mapping):
            return data
        for name, info in cls.model_fields.items():
            for key in (name, info.alias):
                value = data.get(key) if key is not None else None
                if isinstance(value, bool) and _accepts_number(info.annotation):
                    raise ValueError(f"{key}: expected a number, got {describe_value(value)}")
        return data

    @model_validator(mode="after")
    def _whole_numbers_fit_in_64_bits(self) -> Any:
        for name in type(self).model_fields:
            value = getattr(self, name)
            if type(value) is int and not INT64_MIN <= value <= INT64_MAX:
                raise ValueError(
                    f"{name}: input should be at most {INT64_MAX:,} in size (a "
                    f"64-bit whole number), got {value}"
                )
        return self


def older_spelling(data: Any, old: str, new: str) -> Any:
    """A before-validator's step: ``data`` with key ``old`` (an older spelling of ``new``, still
    accepted) moved to ``new``. Both given with different values is an error naming ``old``."""
    if not isinstance(data, Mapping) or old not in data:
        return data
    data = dict(data)
    value = data.pop(old)
    if new in data and data[new] != value:
        raise ValueError(f"{old}: the older spelling of {new}, which is given too (give one)")
    if isinstance(value, bool):  # pydantic reports a validator's ValueError, not a TypeError
        raise ValueError(f"{old}: expected a number, got {describe_value(value)}")
    data[new] = value
    return data


def config_error(
    exc: ValidationError,
    *,
    source: str | None = None,
    prefix: str | None = None,
    aliases: Mapping[str, str] | None = None,
    model: type[BaseModel] | None = None,
) -> ConfigError:
    """The first error of ``exc`` as one ``ConfigError``: ``prefix.field.path: message, got X``.

    ``aliases`` maps a field's alias to its name, so the message uses the name. With the
    validated ``model``, an unknown key names the known key it is a typo of.
    """
    err = exc.errors()[0]
    parts = [str(p) for p in err.get("loc", ()) if _is_field_part(p)]
    message = err.get("msg", "invalid value").removeprefix("Value error, ")
    head, sep, rest = message.partition(": ")
    cause = (err.get("ctx") or {}).get("error")
    if err.get("type") == "extra_forbidden":
        message = unknown_key(parts[-1], _known_keys(model, parts[:-1])) if parts else "unknown key"
    elif hasattr(cause, "path") and hasattr(cause, "reason"):
        # A validator's error that names its key as the user wrote it (engine_config's).
        parts.append(str(cause.path))
        message = str(cause.reason)
    elif sep and _FIELD_PATH.match(head):
        # A validator's "field: message": the field is relative to where the error arose.
        if ".".join(parts[-len(head.split(".")) :]) != head:
            parts += head.split(".")
        message = rest
    elif "input" in err and not isinstance(err["input"], Mapping):
        shown = describe_value(err["input"])
        message = _lower_first(message) + ("" if shown in message else f", got {shown}")
    if aliases:
        parts = [aliases.get(p, p) for p in parts]
    field = ".".join(([prefix] if prefix else []) + parts) or None
    return ConfigError(message, source=source, field=field)


def _known_keys(model: type[BaseModel] | None, parts: list[str]) -> list[str]:
    """The keys (field names and aliases) of the model found at ``parts`` below ``model``."""
    for part in parts:
        if model is None:
            return []
        info = model.model_fields.get(part) or next(
            (f for f in model.model_fields.values() if f.alias == part), None
        )
        model = _model_in(info.annotation) if info is not None else None
    if model is None:
        return []
    return [key for name, info in model.model_fields.items() for key in (name, info.alias) if key]


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model an annotation holds (``Model``, ``Model | None``), else None."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _is_field_part(part: Any) -> bool:
    text = str(part)
    return text not in _LOCATION_TAGS and "[" not in text and not text.startswith("function-")


def _lower_first(message: str) -> str:
    return message[:1].lower() + message[1:] if message.startswith("Input") else message
