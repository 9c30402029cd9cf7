"""The planner knob search (``--search planner.KEY=V1,V2``, ``--tune-planner``): the cheapest
setting of the faithful ``dynamo`` policy's own knobs that holds the goodput target on the
trace, as a planner config in Dynamo's key names.

A knob is a ``PlannerConfig`` field (Dynamo's key: ``load_predictor``, ``kalman_q_level``,
``throughput_adjustment_interval_seconds``, ``min_endpoint``, ``load_scaling_down_sensitivity``,
...) or ``sla_fraction``, plansim's name for the headroom the planner sizes for: its ``ttft_ms``
and ``itl_ms`` set to that fraction of the deployment's SLA (written out as those two keys).

- **Monotone knobs** (``MONOTONE``: the targets, the headroom, the minimum endpoints, the
  scale-down sensitivity) are taken, like worker counts in the static search, to trade cost for
  goodput in one direction: their values are ordered from the cheapest to the safest and the
  first that meets the target is found by the static search's doubling and bisection
  (``static_search.smallest_count``). From the cheapest corner (every knob at its cheapest),
  each knob is searched alone; the cheapest setting found becomes the incumbent, each knob it
  raised is tried one value cheaper with every other knob's line rescuing it (one round), and
  then every knob is searched once more toward its cheaper values, twice round (a knob none of
  whose values meets the target is left at its safest): the setting found is minimal (moving
  any one knob a value cheaper misses the target). A line is pruned once a setting on it misses the
  target at a cost no lower than the cheapest feasible setting seen: everything safer on it costs
  more.
- **Other knobs** (the predictor and its parameters, the intervals) get a small adaptive search:
  one value at a time, in the order given, each tried at the best setting so far (one replay;
  pruned when it misses at no lower cost), and re-minimised along the monotone knobs when it
  holds the target or is cheaper. No full grid is replayed.

The answer is the cheapest feasible setting replayed. ``--tune-planner`` searches a preset
(``preset``) over the knobs a Dynamo user sets; Dynamo 1.6.1 has no scale-down stabilisation
window, so its nearest knobs (the load loop's scale-down sensitivity and the throughput loop's
interval, whose floor holds capacity) stand for it.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any

from plansim.capacity.static_search import smallest_count
from plansim.errors import ConfigError, InputError
from plansim.planner_core import parse_planner_config
from plansim.planner_core.config import PlannerConfig
from plansim.planner_core.predictors.factory import PREDICTORS

SLA_FRACTION = "sla_fraction"
# Monotone knobs: +1 when larger values are safer (cost more, serve more), -1 when smaller are.
MONOTONE: dict[str, int] = {
    SLA_FRACTION: -1,
    "ttft_ms": -1,
    "itl_ms": -1,
    "min_endpoint": 1,
    "prefill_min_endpoint": 1,
    "decode_min_endpoint": 1,
    "load_scaling_down_sensitivity": -1,
}
# Keys that are not knobs of the policy: what it is, the run's budget, files, plansim's own.
_NOT_KNOBS = {
    "mode": "the planner mode follows the deployment",
    "scaling_policy": "the search tunes the dynamo policy's own knobs",
    "scaling_policy_params": "the dynamo policy has no plansim parameters",
    "max_gpu_budget": "the GPU ceiling is --max-gpu-budget",
    "min_gpu_budget": "the GPU floor is not a tuning knob",
    "retune": "retune is run with plansim retune",
    "plugins": "plugins are not a tuning knob",
    "scheduling": "the tick cadence follows the intervals",
    "advisory": "an advisory planner never scales",
    "profile_results_dir": "a file, not a knob",
    "load_predictor_warmup_trace": "a file, not a knob",
    "report_interval_hours": "reports change no decision",
    "report_output_dir": "reports change no decision",
}
PRESET_THROUGHPUT_INTERVALS_S = (60, 30, 180)
PRESET_SLA_FRACTIONS = (1.0, 0.8, 0.6, 0.4, 0.25)
PRESET_SENSITIVITIES = (100, 80, 50, 20, 0)
MAX_PASSES = 2

Setting = tuple[tuple[str, Any], ...]


@dataclass(frozen=True, slots=True)
class Knob:
    """One searched planner key and its values: from the cheapest to the safest when
    ``monotone``, else in the order given (the first is where the search starts)."""

    key: str
    values: tuple[Any, ...]
    monotone: bool


def parse_knob(key: str, values: Sequence[Any]) -> Knob:
    """A ``planner.KEY`` dimension (``KEY`` without the prefix) as a knob; ``InputError``
    (``--search``) for a key that is not a knob or a value the config refuses."""
    name = key.split(".", 1)[0]
    if name in _NOT_KNOBS:
        raise InputError(f"planner.{key}: not a planner knob: {_NOT_KNOBS[name]}", field="--search")
    if key != SLA_FRACTION and key not in PlannerConfig.model_fields:
        raise InputError(f"planner.{key}: not a planner config key", field="--search")
    direction = MONOTONE.get(key)
    if direction is None:
        return Knob(key, tuple(values), False)
    try:
        ordered = sorted(values, key=lambda v: direction * float(v))
    except (TypeError, ValueError):
        raise InputError(f"planner.{key}: values must be numbers", field="--search") from None
    if key == SLA_FRACTION and not all(0 < float(v) <= 1 for v in values):
        raise InputError(f"planner.{key}: fractions of the SLA must be in (0, 1]", field="--search")
    return Knob(key, tuple(ordered), True)


def preset(base: Mapping[str, Any], limits: Mapping[str, int]) -> list[Knob]:
    """The ``--tune-planner`` knobs: the predictor, the throughput interval (each starting at
    the base config's value), the headroom over the SLA, the load loop's scale-down
    sensitivity and the minimum endpoints up to ``limits`` (the cheapest static deployment's
    counts per min-endpoint key: a floor at them is the static deployment that scales up)."""

    def first(own: Any, values: Sequence[Any]) -> tuple[Any, ...]:
        return (own, *(v for v in values if v != own))

    knobs = [
        Knob(
            "load_predictor",
            first(base.get("load_predictor", _default("load_predictor")), preset_predictors()),
            False,
        ),
        Knob(
            "throughput_adjustment_interval_seconds",
            first(
                base.get("throughput_adjustment_interval_seconds", 180),
                PRESET_THROUGHPUT_INTERVALS_S,
            ),
            False,
        ),
        parse_knob(SLA_FRACTION, PRESET_SLA_FRACTIONS),
        parse_knob("load_scaling_down_sensitivity", PRESET_SENSITIVITIES),
    ]
    knobs += [parse_knob(key, range(1, max(n, 1) + 1)) for key, n in limits.items()]
    return knobs


def preset_predictors() -> tuple[str, ...]:
    """The predictors the preset tries, in their ``tune_order`` (names break a tie)."""
    ranked = sorted(
        (cls.tune_order, name) for name, cls in PREDICTORS.items() if cls.tune_order is not None
    )
    return tuple(name for _, name in ranked)


def _default(key: str) -> Any:
    return PlannerConfig.model_fields[key].default


def merged(user: Sequence[Knob], presets: Sequence[Knob]) -> list[Knob]:
    """The preset with the user's own dimensions in place of the preset's of the same key."""
    own = {k.key for k in user}
    replaced = own | ({"ttft_ms", "itl_ms"} & own and {SLA_FRACTION})
    return [k for k in presets if k.key not in replaced] + list(user)


def check_knobs(knobs: Sequence[Knob]) -> None:
    keys = [k.key for k in knobs]
    if len(set(keys)) != len(keys):
        raise InputError("a planner key is searched twice", field="--search")
    if SLA_FRACTION in keys and {"ttft_ms", "itl_ms"} & set(keys):
        raise InputError(
            f"planner.{SLA_FRACTION} sets ttft_ms and itl_ms: search either", field="--search"
        )


def planner_mapping(
    base: Mapping[str, Any], setting: Setting, sla: Mapping[str, float | None]
) -> dict[str, Any]:
    """The planner mapping of ``setting`` over ``base``, in Dynamo's key names: the headroom
    becomes ``ttft_ms`` / ``itl_ms``, fractions of ``sla``'s ``ttft_ms`` / ``tpot_ms``
    (``SlaConfig.model_dump()``), whole seconds are written as integers (Dynamo's
    intervals are ints), and plansim's own keys are left out for the dynamo policy."""
    out = dict(base)
    for key, value in setting:
        if key == SLA_FRACTION:
            # The planner's ITL target is sized from the SLA's TPOT bound (its mean token gap).
            for name, bound in (("ttft_ms", sla.get("ttft_ms")), ("itl_ms", sla.get("tpot_ms"))):
                if bound is not None:
                    out[name] = float(bound) * float(value)
        else:
            out[key] = value
    if out.get("scaling_policy", _default("scaling_policy")) == _default("scaling_policy"):
        out.pop("scaling_policy", None)
        if not out.get("scaling_policy_params"):
            out.pop("scaling_policy_params", None)
    return {k: _plain(k, v) for k, v in out.items()}


def _plain(key: str, value: Any) -> Any:
    """A YAML-ready value: enums as their strings, whole seconds as Dynamo's integers."""
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, float) and key.endswith("_seconds") and value.is_integer():
        return int(value)
    return value


def setting_config(
    base: Mapping[str, Any], setting: Setting, sla: Mapping[str, float | None]
) -> PlannerConfig:
    try:
        return parse_planner_config(planner_mapping(base, setting, sla))
    except ConfigError as exc:
        label = ", ".join(f"planner.{k}={v}" for k, v in setting)
        raise InputError(f"{label}: {exc.message}", field="--search") from None


def check_values(
    base: Mapping[str, Any], knobs: Sequence[Knob], sla: Mapping[str, float | None]
) -> None:
    """Every value of every knob, alone over the base, is a valid planner config."""
    for knob in knobs:
        for value in knob.values:
            setting_config(base, ((knob.key, value),), sla)


def tune_base(raw: Mapping[str, Any]) -> dict[str, Any]:
    """The planner mapping the search starts from: ``raw`` (the policies' base) run by the
    dynamo policy."""
    return {k: v for k, v in raw.items() if k not in ("scaling_policy", "scaling_policy_params")}


def min_endpoint_keys(mode: str) -> tuple[str, ...]:
    """The minimum-endpoint keys of a planner mode, in pool order."""
    return ("min_endpoint",) if mode == "agg" else ("prefill_min_endpoint", "decode_min_endpoint")


def label(setting: Setting) -> str:
    return ", ".join(f"{k}={v}" for k, v in setting) or "base"


@dataclass(frozen=True, slots=True)
class Trial:
    """One setting replayed: its goodput, cost and whether it holds the target."""

    setting: Setting
    good: int
    requests: int
    cost: float
    meets_target: bool
    replay: Any = None

    @property
    def goodput_ratio(self) -> float:
        return self.good / self.requests if self.requests else 0.0


# A search yields the settings it wants replayed and receives their trials.
KnobSearch = Generator[list[Setting], list[Trial], "Trial | None"]


def search(knobs: Sequence[Knob]) -> KnobSearch:
    """The search described in the module docstring; returns the cheapest feasible trial
    (None when no setting replayed holds the target). Trials are asked for in the scheduler's
    protocol and memoised, so a setting is replayed once."""
    seen: dict[Setting, Trial] = {}
    best: list[Trial] = []
    monotone = [k for k in knobs if k.monotone]
    others = [k for k in knobs if not k.monotone]
    # Monotone knobs start at their cheapest values, the others at their first.
    current = {k.key: k.values[0] for k in knobs}

    def setting_of(values: Mapping[str, Any]) -> Setting:
        return tuple((k.key, values[k.key]) for k in knobs)

    def trial(values: Mapping[str, Any]) -> Generator[list[Setting], list[Trial], Trial]:
        s = setting_of(values)
        if s not in seen:
            (t,) = yield [s]
            seen[s] = t
            if t.meets_target and (not best or t.cost < best[0].cost):
                best[:] = [t]
        return seen[s]

    def pruned(t: Trial) -> bool:
        return not t.meets_target and bool(best) and t.cost >= best[0].cost

    def line(knob: Knob, upto: int) -> Generator[list[Setting], list[Trial], int | None]:
        """The first index in ``0..upto`` of ``knob`` that holds the target with the other
        knobs at ``current``: doubling then bisection; None when none does (or pruned)."""
        counts = smallest_count(lambda n: (n - 1,), upto + 1)
        wants = next(counts)
        while True:
            (index,) = wants[0]
            t = yield from trial({**current, knob.key: knob.values[index]})
            if pruned(t):
                return None
            try:
                wants = counts.send([t])
            except StopIteration as stop:
                return None if stop.value is None else stop.value[0] - 1

    def minimise() -> Generator[list[Setting], list[Trial], Trial]:
        """Every monotone knob to its first feasible value, twice round (the second pass only
        looks at cheaper values): a knob that cannot hold the target stays at its safest."""
        for sweep in range(MAX_PASSES):
            for knob in monotone:
                at = knob.values.index(current[knob.key])
                now = yield from trial(current)
                if sweep and not now.meets_target:
                    continue
                upto = at if now.meets_target else len(knob.values) - 1
                if now.meets_target and at == 0:
                    continue
                found = yield from line(knob, upto)
                if found is not None:
                    current[knob.key] = knob.values[found]
                elif not now.meets_target and not pruned(now):
                    current[knob.key] = knob.values[-1]
        return (yield from trial(current))

    def corner() -> Generator[list[Setting], list[Trial], None]:
        """From where ``current`` is, each monotone knob alone along its line (the others
        where they are): a knob that makes the corner feasible on its own is a candidate; the
        cheapest one found becomes ``current``, then each knob it raised is tried a value
        cheaper with every other knob's line rescuing it (one round)."""
        start = dict(current)
        for knob in monotone:
            current.clear()
            current.update(start)
            found = yield from line(knob, len(knob.values) - 1)
            if found is not None:
                current[knob.key] = knob.values[found]
        current.clear()
        current.update(dict(best[0].setting) if best else start)
        if not best:
            return
        raised = dict(best[0].setting)
        for knob in monotone:
            at = knob.values.index(raised[knob.key])
            if at == 0:
                continue
            for other in monotone:
                if other is knob:
                    continue
                current.clear()
                current.update({**raised, knob.key: knob.values[at - 1]})
                yield from line(other, len(other.values) - 1)
        current.clear()
        current.update(dict(best[0].setting))

    yield from corner()
    yield from minimise()
    for knob in others:
        incumbent = dict(best[0].setting) if best else dict(current)
        for value in knob.values[1:]:
            incumbent = dict(best[0].setting) if best else incumbent
            current.clear()
            current.update({**incumbent, knob.key: value})
            t = yield from trial(current)
            if pruned(t):
                continue
            if not best:
                yield from corner()
            yield from minimise()
        # The next knob starts from the best setting, or this knob's first value when none
        # held the target yet.
        current.clear()
        current.update(dict(best[0].setting) if best else {**incumbent, knob.key: knob.values[0]})
    return best[0] if best else None


def drive(
    knob_search: KnobSearch, replay: Callable[[Sequence[Setting]], Generator[Any, Any, list[Trial]]]
) -> Generator[Any, Any, tuple[Trial | None, list[Trial]]]:
    """Run ``knob_search``, replaying what it asks with ``replay`` (a generator in the
    scheduler protocol); returns the answer and every trial in the order replayed."""
    order: list[Trial] = []
    sent: list[Trial] | None = None
    while True:
        try:
            wants = next(knob_search) if sent is None else knob_search.send(sent)
        except StopIteration as stop:
            return stop.value, order
        sent = yield from replay(wants)
        order += sent
