"""Values as a reader sees them: numbers with separators and units, ``not set`` for a missing
value, ``yes``/``no`` for flags, lists joined with commas; never a Python repr (``None``,
``True``, ``{'a': 1}``).

Units come from the key's suffix, the project's naming rule (``ttft_ms``, ``interval_s``,
``isl_tokens``), so an input key shows its unit without a table of keys.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from plansim.schema import DURATION_MS, DURATION_S, RATIO

NOT_SET = "not set"
NO_SAMPLES = "n/a"

# Key suffix -> unit shown after the value (first match wins; longer suffixes first).
_SUFFIX_UNITS = (
    ("_seconds", "s"),
    ("_hours", "h"),
    ("_ms", "ms"),
    ("_s", "s"),
    ("_tok_s", "tok/s"),
    ("_rps", "req/s"),
    ("_tokens", "tokens"),
    ("_pct", "%"),
    ("_percentage", "%"),
    ("_bytes", "bytes"),
    ("_blocks", "blocks"),
)


def unit_of(key: str) -> str:
    """The unit a key's name states (``"ttft_ms"`` -> ``"ms"``), "" when it states none."""
    key = str(key)
    if key.endswith("_tok_s"):
        return "tok/s"
    for suffix, unit in _SUFFIX_UNITS:
        if key.endswith(suffix):
            return unit
    return ""


def number(value: float | int, digits: int = 3) -> str:
    """A number for a table or a card: thousands separators, at most ``digits`` decimals for
    small values, none for large ones, scientific only for very small or very large ones."""
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    value = float(value)
    if math.isnan(value):
        return NO_SAMPLES
    if math.isinf(value):
        return "infinite" if value > 0 else "-infinite"
    size = abs(value)
    if size >= 1e15 or (0 < size < 10**-digits):
        return f"{value:.3g}"
    if size >= 1000:
        return f"{value:,.0f}"
    # about four significant digits, at most ``digits`` decimals: 896.7, 31.84, 2.326, 0.389
    decimals = min(digits, 1 if size >= 100 else 2 if size >= 10 else 3)
    text = f"{value:.{decimals}f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def duration(seconds: float) -> str:
    """A length of time in the unit that reads best: s up to 2 min, min up to 2 h, then h."""
    if math.isnan(seconds):
        return NO_SAMPLES
    if abs(seconds) < 120:
        return f"{number(seconds)} s"
    if abs(seconds) < 7200:
        return f"{number(seconds / 60)} min"
    return f"{number(seconds / 3600)} h"


def percent(share: float) -> str:
    """A share in 0..1 as a percentage with one decimal (``n/a`` for NaN)."""
    return NO_SAMPLES if math.isnan(share) else f"{share * 100.0:.1f}%"


def percent_against(share: float, target: float) -> str:
    """``percent(share)``, except within 0.1 point of ``target``: two decimals, cut down, so
    that a share just under the target never reads as the target (94.98% is not "95.0%")."""
    if math.isnan(share) or abs(share - target) >= 0.001:
        return percent(share)
    return f"{math.floor(share * 10_000) / 100:.2f}%"


def with_unit(value: Any, unit: str) -> str:
    """``value`` formatted, followed by ``unit``; a ``RATIO`` (0..1) is shown as a percentage."""
    if value is None:
        return NOT_SET
    text = plain_value(value)
    if not unit or not _is_number(value) or text in (NO_SAMPLES, NOT_SET):
        return text
    if unit == RATIO:
        return percent(float(value))
    if unit in (DURATION_MS, DURATION_S):
        return duration(float(value) / (1000.0 if unit == DURATION_MS else 1.0))
    return f"{text}%" if unit == "%" else f"{text} {unit}"


def plain_value(value: Any) -> str:
    """Any value as reader text: no ``None``/``True``/``False``/dict or list reprs."""
    if value is None:
        return NOT_SET
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (int, float)):
        return number(value)
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):  # numpy scalars
        return plain_value(value.item())
    if isinstance(value, Mapping):
        if not value:
            return "none"
        return ", ".join(f"{k}={plain_value(v)}" for k, v in value.items())
    if isinstance(value, (list, tuple, set, frozenset)):
        return ", ".join(plain_value(v) for v in value) if value else "none"
    return str(value)


def key_value(key: str, value: Any) -> str:
    """``value`` with the unit its ``key`` names."""
    return with_unit(value, unit_of(key))


def column_label(key: str) -> str:
    """A table column header from a column name: ``"arrival_ms"`` -> ``"arrival (ms)"``."""
    key = str(key)
    unit = unit_of(key)
    stem = key
    for suffix, named in (("_tok_s", "tok/s"), *_SUFFIX_UNITS):
        if named == unit and key.endswith(suffix):
            stem = key[: -len(suffix)]
            break
    words = stem.replace("_", " ")
    return f"{words} ({unit})" if unit else words


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)
