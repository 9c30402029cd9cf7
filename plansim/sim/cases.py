"""Reference replay cases (the ``cases.json`` / ``micro_cases.json`` format) and how close a
replay lands to them.

A cases file is ``{"cases": [case, ...]}``; a case names a trace (relative to the file), its
format and ``trace_block_size``, a deployment in the reference's flat form (``mode``,
``num_workers`` or ``num_prefill_workers``/``num_decode_workers``, ``router_mode``,
``engine_args`` or ``prefill_engine_args``/``decode_engine_args``, ``arrival_speedup_ratio``,
``sla_ttft_ms``/``sla_itl_ms``/``sla_e2e_ms``), optionally ``closed_loop`` (``true``: the trace
is replayed closed-loop, and must have sessions or dependencies; ``false``: it is replayed
open-loop at its arrivals even if it has them; absent: as the trace says), and the reference's
``expected`` summary values (and, for micro cases, ``expected_requests``). ``load_cases`` turns
each into a
``ReferenceCase``; ``case_deployment`` and ``case_workload`` build what ``sim.replay`` takes;
``compare_summary`` grades a summary against ``expected`` with the tolerances of issue 3.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from plansim.errors import ConfigError
from plansim.sim.deployment import (
    Deployment,
    RouterConfig,
    _resolve_paths_in_engine,
    build_deployment,
)
from plansim.sim.routing import ROUTERS, router_mode

# Keys of a case that describe the deployment: scalars keep their name in the deployment
# mapping; engine args and SLA keys are renamed.
_SCALAR_KEYS = (
    "mode",
    "num_workers",
    "num_prefill_workers",
    "num_decode_workers",
    "arrival_speedup_ratio",
    "seed",
)
_ENGINE_KEYS = {
    "engine_args": "engine",
    "prefill_engine_args": "prefill_engine",
    "decode_engine_args": "decode_engine",
}
_SLA_KEYS = {"sla_ttft_ms": "ttft_ms", "sla_itl_ms": "tpot_ms", "sla_e2e_ms": "e2e_ms"}
_DEFAULT_ROUTER_MODE = RouterConfig.model_fields["mode"].default
_CASE_ONLY_KEYS = {
    "name",
    "about",
    "trace",
    "trace_format",
    "trace_block_size",
    "router_mode",
    "router_config",
    "expected",
    "expected_requests",
    "closed_loop",
}


@dataclass(frozen=True, slots=True)
class ReferenceCase:
    """One reference replay: inputs, deployment mapping and the reference's figures."""

    name: str
    trace: Path
    trace_format: str
    trace_block_size: int | None
    deployment: dict[str, Any]
    expected: dict[str, Any]
    expected_requests: list[dict[str, Any]] | None = None
    about: str = ""
    closed_loop: bool | None = None

    @property
    def router_mode(self) -> str:
        return str(self.deployment.get("router", {}).get("mode", _DEFAULT_ROUTER_MODE))


def load_cases(path: str | Path) -> list[ReferenceCase]:
    """Read a cases file; trace and NPZ paths resolve against its folder."""
    source = Path(path)
    try:
        data = json.loads(source.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigError(f"cannot read file: {exc.strerror}", source=str(source)) from None
    except json.JSONDecodeError as exc:
        raise ConfigError(f"not valid JSON: {exc}", source=str(source)) from None
    cases = data.get("cases") if isinstance(data, dict) else None
    if not isinstance(cases, list):
        raise ConfigError(
            "expected an object with a 'cases' list", source=str(source), field="cases"
        )
    return [_case(raw, i, source) for i, raw in enumerate(cases)]


def _case(raw: Any, index: int, source: Path) -> ReferenceCase:
    where = f"cases[{index}]"
    if not isinstance(raw, Mapping):
        raise ConfigError("a case must be an object", source=str(source), field=where)
    for key in ("name", "trace"):
        if key not in raw:
            raise ConfigError("missing key", source=str(source), field=f"{where}.{key}")
    unknown = sorted(
        set(raw) - _CASE_ONLY_KEYS - set(_SCALAR_KEYS) - set(_ENGINE_KEYS) - set(_SLA_KEYS)
    )
    if unknown:
        raise ConfigError("unknown key", source=str(source), field=f"{where}.{unknown[0]}")
    base = source.parent
    deployment: dict[str, Any] = {}
    for key in _SCALAR_KEYS:
        if key in raw:
            deployment[key] = raw[key]
    for key, target in _ENGINE_KEYS.items():
        if key in raw:
            deployment[target] = _resolve_paths_in_engine(raw[key] or {}, base)
    router = dict(raw.get("router_config") or {})
    router["mode"] = raw.get("router_mode", _DEFAULT_ROUTER_MODE)
    deployment["router"] = router
    sla = {target: raw[key] for key, target in _SLA_KEYS.items() if raw.get(key) is not None}
    if sla:
        deployment["sla"] = sla
    block = raw.get("trace_block_size")
    closed = raw.get("closed_loop")
    if closed is not None and not isinstance(closed, bool):
        raise ConfigError("must be true or false", source=str(source), field=f"{where}.closed_loop")
    return ReferenceCase(
        name=str(raw["name"]),
        trace=base / str(raw["trace"]),
        trace_format=str(raw.get("trace_format", "mooncake")),
        trace_block_size=int(block) if block is not None else None,
        deployment=deployment,
        expected=dict(raw.get("expected") or {}),
        expected_requests=raw.get("expected_requests"),
        about=str(raw.get("about", "")),
        closed_loop=closed,
    )


def case_deployment(case: ReferenceCase) -> Deployment:
    """The validated ``Deployment`` of a case (``ConfigError`` names the bad key)."""
    return build_deployment(case.deployment, source=case.name)


def case_workload(case: ReferenceCase) -> Any:
    """The case's trace as a ``Workload`` (open-loop when the case says ``closed_loop: false``)."""
    from plansim.traces import load_workload

    workload = load_workload(
        [case.trace], format=case.trace_format, trace_block_size=case.trace_block_size
    )
    if case.closed_loop is False:
        return workload.open_loop()
    if case.closed_loop and workload.graph is None:
        raise ConfigError(
            f"closed_loop is true but {case.trace} has no sessions or dependencies",
            source=case.name,
            field="closed_loop",
        )
    return workload


@dataclass(frozen=True, slots=True)
class KeyCheck:
    """One expected key: ours vs the reference. ``kind`` is ``exact``, ``rel`` (relative
    error), ``abs`` (absolute difference) or ``info`` (reported, not graded)."""

    key: str
    ours: float | None
    expected: float
    kind: str
    tolerance: float
    error: float
    ok: bool


def tolerance(key: str, mode: str) -> tuple[str, float]:
    """The grading rule of a summary key: ``(kind, tolerance)``."""
    if key == "completed_requests":
        return "exact", 0.0
    if key == "duration_ms":
        return "rel", 0.01
    if key == "prefix_cache_reused_ratio":
        return "abs", 0.03
    if key.startswith("goodput_"):
        return "rel", 0.05
    if key.startswith("p99_"):
        return "rel", 0.15
    central = key in ("mean_tpot_ms", "output_throughput_tok_s") or any(
        key == f"{stat}_{metric}_ms"
        for stat in ("median", "p90")
        for metric in ("ttft", "itl", "e2e_latency")
    )
    if central:
        # A policy drawing from the seeded stream breaks ties otherwise than the reference's.
        return "rel", 0.10 if ROUTERS.get(router_mode(mode)).draws else 0.05
    if key == "gpu_hours":
        return "info", 0.01
    return "info", 0.0


def compare_summary(summary: Mapping[str, Any], case: ReferenceCase) -> list[KeyCheck]:
    """Grade every expected key of ``case`` against ``summary`` (missing keys fail)."""
    checks = []
    for key, expected in case.expected.items():
        kind, tol = tolerance(key, case.router_mode)
        ours = summary.get(key)
        exp = float(expected)
        if ours is None:
            checks.append(KeyCheck(key, None, exp, kind, tol, float("inf"), kind == "info"))
            continue
        value = float(ours)
        if kind == "abs":
            error = abs(value - exp)
        elif exp != 0:
            error = abs(value - exp) / abs(exp)
        else:
            error = 0.0 if value == 0 else float("inf")
        ok = {"exact": value == exp, "info": True}.get(kind, error <= tol)
        checks.append(KeyCheck(key, value, exp, kind, tol, error, ok))
    return checks
