"""The deployments a capacity search compares: the base deployment, and one variant per
combination of the ``--search KEY=V1,V2,...`` dimensions.

A search key is any dotted deployment key (``engine.max_num_batched_tokens``, ``router.mode``,
``prefill_engine.max_num_seqs``, ``engine.timing_model.<field>``, even ``mode``) except the
ones the search itself owns or that are not the deployment: the worker counts (searched),
``sla`` (the goodput criterion), ``arrival_speedup_ratio`` (the traffic), ``seed`` (``--seeds``)
and ``planner`` (``--planner-config``). Values are YAML scalars (``4096``, ``0.5``, ``true``,
``kv_router``). Every variant is validated before any replay starts, so a key that is not a
deployment key, a key accepted only for compatibility (it would change nothing) or a bad value
fails at once with the key named.

``PoolLayout`` is what the count search needs to know about a variant's pools: their names,
GPUs per worker, startup time and the count keys of the deployment.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import yaml

from plansim.errors import ConfigError, InputError
from plansim.roles import Mode
from plansim.sim.deployment import Deployment, with_overrides

_RESERVED = {
    "num_workers": "worker counts are what plansim capacity searches",
    "num_prefill_workers": "worker counts are what plansim capacity searches",
    "num_decode_workers": "worker counts are what plansim capacity searches",
    "sla": "the SLA is the goodput criterion, not a deployment dimension (use --sla-*)",
    "arrival_speedup_ratio": "it changes the traffic, not the deployment",
    "seed": "use --seeds for router-seed variation",
    "planner": "planner keys are searched as planner.KEY",
}


@dataclass(frozen=True, slots=True)
class SearchDimension:
    """One ``--search`` dimension: a dotted deployment key and its values, in the given order."""

    key: str
    values: tuple[Any, ...]


def parse_search(spec: str) -> SearchDimension:
    """``KEY=V1,V2,...`` -> ``SearchDimension``; ``InputError`` (``--search``) when malformed."""
    key, sep, values = spec.partition("=")
    key = key.strip()
    if not sep or not key:
        raise InputError(f"expected KEY=V1,V2,..., got {spec!r}", field="--search")
    items = [v.strip() for v in values.split(",")]
    if not values.strip() or any(not v for v in items):
        raise InputError(
            f"{key}: expected one or more comma-separated values, got {values!r}", field="--search"
        )
    parsed = tuple(_scalar(v) for v in items)
    if len(set(map(repr, parsed))) != len(parsed):
        raise InputError(f"{key}: a value is repeated in {values!r}", field="--search")
    return SearchDimension(key, parsed)


def _scalar(text: str) -> Any:
    try:
        value = yaml.safe_load(text)
    except yaml.YAMLError:
        return text
    if isinstance(value, str):
        # YAML 1.1 reads "1e3" as a string; a number is meant.
        try:
            return float(value)
        except ValueError:
            return value
    if value is None or isinstance(value, (list, dict)):
        return text
    return value


@dataclass(frozen=True, slots=True)
class PoolLayout:
    """A variant's pools in deployment order (agg: ``agg``; disagg: ``prefill``, ``decode``)."""

    mode: Mode
    names: tuple[str, ...]
    gpus_per_worker: tuple[int, ...]
    startup_s: tuple[float, ...]
    # Each pool's GPU system when an aic timing model names it (``h200_sxm``), else None.
    gpu_systems: tuple[str | None, ...] = ()

    @property
    def count_keys(self) -> tuple[str, ...]:
        return self.mode.size_keys

    def gpus(self, counts: Sequence[int]) -> int:
        return sum(n * g for n, g in zip(counts, self.gpus_per_worker))

    def within_budget(self, counts: Sequence[int], budget: int) -> bool:
        return self.gpus(counts) <= budget

    def max_counts(self, budget: int) -> tuple[int, ...]:
        """The most workers each pool can have within ``budget`` GPUs while every other pool
        keeps one worker; 0 for a pool that cannot fit."""
        out = []
        for i, g in enumerate(self.gpus_per_worker):
            others = sum(h for j, h in enumerate(self.gpus_per_worker) if j != i)
            out.append(max((budget - others) // g, 0))
        return tuple(out)

    def fit(self, counts: Sequence[int], budget: int) -> tuple[int, ...]:
        """``counts`` with workers taken off, one at a time from the pool holding the most
        GPUs (the first of equals), until they fit in ``budget`` GPUs; every pool keeps one."""
        out = [max(int(n), 1) for n in counts]
        while self.gpus(out) > budget:
            spare = [i for i, n in enumerate(out) if n > 1]
            if not spare:
                break
            i = max(spare, key=lambda j: (out[j] * self.gpus_per_worker[j], -j))
            out[i] -= 1
        return tuple(out)


@dataclass(frozen=True, slots=True)
class Variant:
    """One deployment of the search: the base with ``overrides`` (the searched keys) applied.
    ``label`` names it in tables (``base`` when nothing is searched)."""

    overrides: tuple[tuple[str, Any], ...]
    deployment: Deployment
    layout: PoolLayout

    @property
    def label(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.overrides) or "base"

    @property
    def counts(self) -> tuple[int, ...]:
        """The deployment file's worker counts, in layout order."""
        return tuple(self.deployment.pool_sizes().values())

    def policy_start(self, budget: int) -> tuple[int, ...]:
        """Where a planner policy starts: the deployment file's counts (the deployment a user
        would switch from), fitted into the run's GPU budget."""
        return self.layout.fit(self.counts, budget)

    def with_counts(self, counts: Sequence[int], seed: int | None = None) -> Deployment:
        """The variant's deployment with ``counts`` workers per pool (and ``seed``)."""
        update: dict[str, Any] = dict(zip(self.layout.count_keys, map(int, counts)))
        if seed is not None:
            update["seed"] = seed
        return self.deployment.model_copy(update=update)


def layout_of(deployment: Deployment) -> PoolLayout:
    mode = Mode(deployment.mode)
    names = tuple(mode.pools)
    args = [deployment.pool_args(name) for name in names]
    return PoolLayout(
        mode=mode,
        names=names,
        gpus_per_worker=tuple(a.gpus_per_worker for a in args),
        startup_s=tuple(float(a.startup_time or 0.0) for a in args),
        gpu_systems=tuple(
            a.effective_timing.aic.system if a.effective_timing.aic else None for a in args
        ),
    )


def build_variants(
    base: Deployment, dimensions: Sequence[SearchDimension], *, max_gpu_budget: int
) -> list[Variant]:
    """One validated variant per combination of ``dimensions`` (first dimension slowest), the
    base alone without dimensions. Variants whose deployments are equal are kept once."""
    seen_keys: set[str] = set()
    for dim in dimensions:
        if dim.key in seen_keys:
            raise InputError(f"{dim.key}: searched twice", field="--search")
        seen_keys.add(dim.key)
        reason = _RESERVED.get(dim.key.split(".", 1)[0])
        if reason is not None:
            raise InputError(f"{dim.key}: not a search dimension: {reason}", field="--search")
    variants: list[Variant] = []
    dumps: set[str] = set()
    for values in itertools.product(*(dim.values for dim in dimensions)):
        overrides = tuple((dim.key, value) for dim, value in zip(dimensions, values))
        deployment = _apply(base, overrides)
        dump = deployment.model_dump_json()
        if dump in dumps:
            continue
        dumps.add(dump)
        layout = layout_of(deployment)
        if min(layout.max_counts(max_gpu_budget)) < 1:
            where = f" ({', '.join(f'{k}={v}' for k, v in overrides)})" if overrides else ""
            raise InputError(
                f"{max_gpu_budget} GPUs cannot hold one worker per pool{where}: "
                f"{' + '.join(map(str, layout.gpus_per_worker))} GPUs needed",
                field="--max-gpu-budget",
            )
        variants.append(Variant(overrides, deployment, layout))
    return variants


def _apply(base: Deployment, overrides: tuple[tuple[str, Any], ...]) -> Deployment:
    for key, value in overrides:
        try:
            with_overrides(base, {key: value})
        except ConfigError as exc:
            if exc.message.endswith("unknown key"):
                raise InputError(f"{key}: not a deployment key", field="--search") from None
            raise InputError(f"{key}={value}: {exc.message}", field="--search") from None
        _check_modelled(base, key, value)
    try:
        return with_overrides(base, dict(overrides))
    except ConfigError as exc:
        combo = ", ".join(f"{k}={v}" for k, v in overrides)
        raise InputError(f"{combo}: {exc.message}", field="--search") from None


def _check_modelled(base: Deployment, key: str, value: Any) -> None:
    """A key accepted only for compatibility changes nothing: searching it is a mistake."""
    before = set(base.no_effect_keys())
    after = set(with_overrides(base, {key: value}).no_effect_keys())
    if after - before:
        raise InputError(
            f"{key}: accepted for compatibility but not simulated, so every value "
            "would give the same result",
            field="--search",
        )
