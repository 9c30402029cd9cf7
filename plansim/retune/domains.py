"""Candidate domains: the syntax of ``retune.router`` / ``retune.planner`` fields and the grid.

A field is one of:

- a concrete value (``0.5``, ``"kalman"``, ``true``): one value;
- ``{choices: [a, b, ...]}``: a non-empty list of unique values, in list order;
- ``{range: {min, max, step}}``: linear, ``min + i * step`` for ``i = 0 .. floor((max - min) /
  step)``, computed in decimal arithmetic so ``0.1 .. 0.3 step 0.1`` is exactly
  ``[0.1, 0.2, 0.3]`` (the endpoint is included when the steps reach it);
- ``{range: {min, max, scale: log, num: N}}``: N values spaced evenly in log space, both ends
  included; ``min > 0``.

A bare list is never a domain (write ``{choices: [...]}``). Integer fields materialise as
integers (a log range is rounded, duplicates after rounding removed).

The grid is the Cartesian product over the searched knobs in canonical order: router knobs then
planner knobs, each group sorted by live name, the last knob varying fastest; values in domain
order. A point is a mapping ``{"router": {...}, "planner": {...}}`` of the searched knobs only.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

from plansim.errors import ConfigError
from plansim.limits import MAX_RETUNE_CANDIDATES, check_count

ROUTER = "router"
PLANNER = "planner"


@dataclass(frozen=True, slots=True)
class Knob:
    """One searched knob: its group (``router``/``planner``), live name and expanded values."""

    group: str
    name: str
    values: tuple[Any, ...]

    @property
    def path(self) -> str:
        return f"retune.{self.group}.{self.name}"


@dataclass(frozen=True, slots=True)
class Point:
    """A candidate: values of the searched knobs. Hashable; equal points are one candidate."""

    router: tuple[tuple[str, Any], ...] = ()
    planner: tuple[tuple[str, Any], ...] = ()

    @staticmethod
    def of(
        router: Mapping[str, Any] | None = None, planner: Mapping[str, Any] | None = None
    ) -> Point:
        return Point(tuple(sorted((router or {}).items())), tuple(sorted((planner or {}).items())))

    @property
    def router_map(self) -> dict[str, Any]:
        return dict(self.router)

    @property
    def planner_map(self) -> dict[str, Any]:
        return dict(self.planner)

    def to_json(self) -> dict[str, dict[str, Any]]:
        return {ROUTER: self.router_map, PLANNER: self.planner_map}

    def label(self) -> str:
        """Short text for tables: ``overlap_score_weight=0.5 load_predictor=kalman``."""
        parts = [f"{k}={_fmt(v)}" for k, v in self.router + self.planner]
        return " ".join(parts) if parts else "(no searched knobs)"

    def changes_from(self, other: Point) -> dict[str, dict[str, Any]]:
        """Knobs whose value differs from ``other``: ``{"router": {...}, "planner": {...}}``."""
        mine_r, theirs_r = self.router_map, other.router_map
        mine_p, theirs_p = self.planner_map, other.planner_map
        return {
            ROUTER: {k: v for k, v in mine_r.items() if not _same(theirs_r.get(k, _MISSING), v)},
            PLANNER: {k: v for k, v in mine_p.items() if not _same(theirs_p.get(k, _MISSING), v)},
        }


_MISSING = object()


def _same(a: Any, b: Any) -> bool:
    """Equal values; a bool only equals a bool (``True == 1`` is not a match)."""
    if a is _MISSING:
        return False
    if isinstance(a, bool) or isinstance(b, bool):
        return type(a) is type(b) and a == b
    return bool(a == b)


def _fmt(value: Any) -> str:
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def parse_field(path: str, raw: Any, *, integer: bool = False) -> tuple[Any, ...]:
    """Expand one domain field to its values, in order; ConfigError names ``path`` on misuse."""
    if isinstance(raw, list):
        raise ConfigError("a bare list is not a domain; write {choices: [...]}", field=path)
    if not isinstance(raw, Mapping):
        return (_as_integer(path, raw) if integer else raw,)
    keys = set(raw)
    if keys == {"choices"}:
        return _choices(path, raw["choices"], integer)
    if keys == {"range"}:
        return _range(f"{path}.range", raw["range"], integer)
    raise ConfigError(
        f"a domain is a value, {{choices: [...]}} or {{range: {{...}}}}; got keys {sorted(keys)}",
        field=path,
    )


def _choices(path: str, values: Any, integer: bool) -> tuple[Any, ...]:
    if not isinstance(values, list) or not values:
        raise ConfigError("choices must be a non-empty list", field=f"{path}.choices")
    out = tuple(_as_integer(path, v) if integer else v for v in values)
    seen: list[Any] = []
    for value in out:
        if isinstance(value, (Mapping, list)):
            raise ConfigError("choices must be plain values", field=f"{path}.choices")
        if any(_same(value, s) for s in seen):
            raise ConfigError(f"choices repeat the value {value!r}", field=f"{path}.choices")
        seen.append(value)
    return out


def _range(path: str, spec: Any, integer: bool) -> tuple[Any, ...]:
    if not isinstance(spec, Mapping):
        raise ConfigError(
            "range must be a mapping {min, max, step} or {min, max, scale: log, num}", field=path
        )
    unknown = set(spec) - {"min", "max", "step", "scale", "num"}
    if unknown:
        raise ConfigError(f"unknown range keys {sorted(unknown)}", field=path)
    lo = _number(f"{path}.min", spec.get("min"))
    hi = _number(f"{path}.max", spec.get("max"))
    if lo > hi:
        raise ConfigError(f"min {lo} is above max {hi}", field=path)
    scale = spec.get("scale", "linear")
    if scale == "linear":
        if "num" in spec:
            raise ConfigError(
                "num is for log ranges; a linear range takes step", field=f"{path}.num"
            )
        if "step" not in spec:
            raise ConfigError("a linear range needs a positive step", field=f"{path}.step")
        step = _number(f"{path}.step", spec["step"])
        if step <= 0:
            raise ConfigError("step must be positive", field=f"{path}.step")
        check_count(
            (hi - lo) / step + 1,
            MAX_RETUNE_CANDIDATES,
            what="the number of values of this range",
            field=path,
            hint="raise step",
            error=ConfigError,
        )
        values = _linear(spec["min"], spec["max"], spec["step"])
    elif scale == "log":
        if "step" in spec:
            raise ConfigError("a log range takes num, not step", field=f"{path}.step")
        if lo <= 0:
            raise ConfigError("a log range needs min > 0", field=f"{path}.min")
        num = spec.get("num")
        if not isinstance(num, int) or isinstance(num, bool) or num < 1 or (num == 1 and lo != hi):
            raise ConfigError(
                "num must be an integer >= 2 (1 only when min == max)", field=f"{path}.num"
            )
        check_count(num, MAX_RETUNE_CANDIDATES, what="num", field=f"{path}.num", error=ConfigError)
        values = _log(lo, hi, num)
    else:
        raise ConfigError(f"scale must be linear or log, not {scale!r}", field=f"{path}.scale")
    if integer:
        rounded = []
        for value in values:
            iv = int(round(value))
            if iv not in rounded:
                rounded.append(iv)
        return tuple(rounded)
    return tuple(values)


def _number(path: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"must be a finite number, got {value!r}", field=path)
    return float(value)


def _linear(lo: Any, hi: Any, step: Any) -> list[Any]:
    """Decimal-exact stepping; integers stay integers when min, max and step all are."""
    try:
        d_lo, d_hi, d_step = (Decimal(str(v)) for v in (lo, hi, step))
    except InvalidOperation as exc:  # pragma: no cover - _number has checked them
        raise ConfigError(str(exc)) from exc
    count = int((d_hi - d_lo) // d_step)
    all_int = all(isinstance(v, int) for v in (lo, hi, step))
    out: list[Any] = []
    for i in range(count + 1):
        value = d_lo + i * d_step
        out.append(int(value) if all_int else float(value))
    return out


def _log(lo: float, hi: float, num: int) -> list[float]:
    if num == 1:
        return [lo]
    ratio = math.log(hi / lo) / (num - 1)
    values = [lo * math.exp(ratio * i) for i in range(num)]
    values[-1] = hi
    return values


def _as_integer(path: str, value: Any) -> Any:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return value
    if float(value) != int(value):
        raise ConfigError(f"must be an integer, got {value!r}", field=path)
    return int(value)


def expand_knobs(
    group: str, domain: Mapping[str, Any], integer_fields: Iterable[str] = ()
) -> list[Knob]:
    """Parse every field of one group's domain; knobs sorted by live name (canonical order)."""
    integers = set(integer_fields)
    return [
        Knob(
            group,
            name,
            parse_field(f"retune.{group}.{name}", domain[name], integer=name in integers),
        )
        for name in sorted(domain)
    ]


def grid(knobs: Iterable[Knob]) -> list[Point]:
    """The Cartesian product of the knobs in canonical order (last knob varies fastest)."""
    knobs = list(knobs)
    if not knobs:
        return []
    points = []
    for combo in itertools.product(*(k.values for k in knobs)):
        router = {k.name: v for k, v in zip(knobs, combo) if k.group == ROUTER}
        planner = {k.name: v for k, v in zip(knobs, combo) if k.group == PLANNER}
        points.append(Point.of(router, planner))
    return points


def grid_size(knobs: Iterable[Knob]) -> int:
    return math.prod(len(k.values) for k in knobs) if knobs else 0


def candidate_set(grid_points: Iterable[Point], startup: Point, current: Point) -> list[Point]:
    """Current point first, then the startup point, then the grid, duplicates removed (a point
    keeps its first position). At most ``len(grid) + 2`` points."""
    out: list[Point] = []
    seen: set[Point] = set()
    for point in itertools.chain((current, startup), grid_points):
        if point not in seen:
            seen.add(point)
            out.append(point)
    return out
