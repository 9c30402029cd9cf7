"""The one door to AIConfigurator (PyPI ``aiconfigurator-core``, installed by ``plansim[aic]``).

Everything plansim asks the SDK goes through here: whether it is installed, its support matrix
(systems x backends x versions x models with a status), queryable backend versions, compiled
engines (one per :class:`~plansim.aic.spec.AicSpec`, kept for the process), per-pass latencies
and the KV-cache memory estimate. The SDK logs warnings about fallback perf rows on every
database load; they are silenced here, since plansim reports its own provenance.
"""

from __future__ import annotations

import contextlib
import csv
import importlib.metadata
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache, lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from plansim.errors import ConfigError

if TYPE_CHECKING:
    from plansim.aic.spec import AicSpec

DISTRIBUTION = "aiconfigurator-core"
MISSING_SDK = (
    "the aic timing model needs AIConfigurator, which is not installed: pip install 'plansim[aic]'"
)
VERSION_ALIASES = ("current", "previous", "next")
# Support-matrix statuses under which AIConfigurator estimates a model end to end.
SUPPORTED_STATUSES = ("PASS", "HYBRID_PASS")


def sdk_version() -> str | None:
    """The installed ``aiconfigurator-core`` version, or None when it is not installed."""
    try:
        return importlib.metadata.version(DISTRIBUTION)
    except importlib.metadata.PackageNotFoundError:
        return None


def require_sdk(field: str | None = None) -> str:
    """The SDK version; ``ConfigError`` (one line naming the extra) when it is not installed."""
    version = sdk_version()
    if version is None:
        raise ConfigError(MISSING_SDK, field=field)
    return version


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    logger = logging.getLogger("aiconfigurator_core")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


def _package_dir() -> Path:
    import aiconfigurator_core

    return Path(aiconfigurator_core.__file__).parent


@dataclass(frozen=True, slots=True)
class MatrixEntry:
    """One support-matrix row for aggregated serving: status and AIConfigurator's message."""

    status: str
    message: str


@dataclass(frozen=True, slots=True)
class SupportMatrix:
    """AIConfigurator's support matrix: ``rows[system][backend][version][model]``."""

    rows: dict[str, dict[str, dict[str, dict[str, MatrixEntry]]]]

    def systems(self) -> list[str]:
        return sorted(self.rows)

    def backends(self, system: str) -> list[str]:
        return sorted(self.rows.get(system, {}))

    def models(self, system: str, backend: str) -> list[str]:
        """Models with a supported status for some version of ``backend`` on ``system``."""
        out = set()
        for per_model in self.rows.get(system, {}).get(backend, {}).values():
            out.update(m for m, e in per_model.items() if e.status in SUPPORTED_STATUSES)
        return sorted(out)

    def entry(self, system: str, backend: str, version: str, model: str) -> MatrixEntry | None:
        return self.rows.get(system, {}).get(backend, {}).get(version, {}).get(model)


@lru_cache(maxsize=1)
def support_matrix() -> SupportMatrix:
    """The support matrix shipped with the installed SDK (aggregated-mode rows)."""
    require_sdk()
    rows: dict[str, dict[str, dict[str, dict[str, MatrixEntry]]]] = {}
    for path in sorted((_package_dir() / "systems" / "support_matrix").glob("*.csv")):
        with path.open(newline="", encoding="utf-8") as f:
            for row in csv.DictReader(f):
                if row.get("Mode") != "agg":
                    continue
                per_version = rows.setdefault(row["System"], {}).setdefault(row["Backend"], {})
                per_version.setdefault(row["Version"], {})[row["HuggingFaceID"]] = MatrixEntry(
                    row["Status"], " ".join((row.get("ErrMsg") or "").split())
                )
    return SupportMatrix(rows)


@lru_cache(maxsize=64)
def version_slots(system: str, backend: str) -> dict[str, str]:
    """Queryable versions of ``backend`` on ``system``: ``{"current": "0.24.0", ...}``."""
    from aiconfigurator_core.sdk import perf_database

    with quiet():
        return dict(perf_database.get_version_slots(system, backend) or {})


def resolve_version(system: str, backend: str, requested: str) -> str:
    """The literal perf-database version ``requested`` (an alias or a slot version) names."""
    slots = version_slots(system, backend)
    if requested in slots:
        return slots[requested]
    if requested in slots.values():
        return requested
    available = ", ".join(f"{k} ({v})" for k, v in slots.items()) or "none"
    raise ValueError(
        f"{requested!r} is not available for {backend} on {system}; available: {available}"
    )


def local_config(model: str) -> Path | None:
    """The ``config.json`` of ``model`` when it names a local folder holding one (the SDK
    then estimates the model from that config, outside its support matrix), else None."""
    path = Path(model) / "config.json"
    return path if path.is_file() else None


@cache
def model_config(model: str) -> dict[str, Any]:
    """The HuggingFace ``config.json`` of ``model``: a local folder's, or the published one
    the SDK bundles."""
    import json

    path = local_config(model) or (
        _package_dir() / "model_configs" / (model.replace("/", "--", 1) + "_config.json")
    )
    return json.loads(path.read_text(encoding="utf-8"))


def _compile_kwargs(spec: AicSpec) -> dict[str, Any]:
    return {
        "backend_version": spec.resolved_version,
        "tp_size": spec.tp_size,
        "attention_dp_size": spec.attention_dp_size,
        "moe_tp_size": spec.moe_split[0],
        "moe_ep_size": spec.moe_split[1],
        "gemm_quant_mode": spec.gemm_quant_mode,
        "kvcache_quant_mode": spec.kvcache_quant_mode,
        "fmha_quant_mode": spec.fmha_quant_mode,
        "moe_quant_mode": spec.moe_quant_mode,
        "comm_quant_mode": spec.comm_quant_mode,
        "nextn": spec.nextn,
    }


@lru_cache(maxsize=4)
def engine(spec: AicSpec) -> Any:
    """The SDK's compiled engine (``EngineHandle``) for ``spec``; about a second to build. Only
    table builds and benchmarks need it; replays read the cached table."""
    from aiconfigurator_core.sdk import EngineHandle

    try:
        with quiet():
            return EngineHandle.compile(
                spec.model, spec.system, spec.backend, **_compile_kwargs(spec)
            )
    except (ValueError, AssertionError, KeyError) as exc:
        raise ConfigError(
            f"AIConfigurator cannot build {spec.label}: {_one_line(exc)}", field="timing_model"
        ) from None


def kv_cache_estimate(
    spec: AicSpec, *, max_num_tokens: int, max_batch_size: int, memory_fraction: float
) -> dict[str, Any]:
    """The SDK's rank-local KV-cache estimate (``estimate_kv_cache``, native memory model):
    byte budget, bytes per token per GPU, tokens, and the non-KV memory breakdown."""
    from aiconfigurator_core.sdk.memory import estimate_kv_cache

    kwargs = _compile_kwargs(spec)
    version = kwargs.pop("backend_version")
    try:
        with quiet():
            return estimate_kv_cache(
                spec.model,
                spec.system,
                spec.backend,
                version,
                max_num_tokens=max_num_tokens,
                max_batch_size=max_batch_size,
                # TRT-LLM's fraction is of the memory left free; vLLM's and SGLang's of all of it.
                memory_fraction_kind="of_free" if spec.backend == "trtllm" else "of_total",
                memory_fraction_value=memory_fraction,
                **kwargs,
            )
    except ValueError as exc:
        raise ConfigError(
            f"AIConfigurator cannot size the KV cache of {spec.label}: {_one_line(exc)}",
            field="num_gpu_blocks",
        ) from None


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split())
