"""``timing_model: {type: aic, ...}``: which AIConfigurator estimate times an engine.

Fields are AIConfigurator's own: ``system`` (e.g. ``h200_sxm``), ``backend`` (``vllm``,
``sglang``, ``trtllm``), ``backend_version`` (``current``, ``previous``, ``next`` or a version
one of them names), ``model`` (a HuggingFace id of the support matrix, or a local folder
holding a model's ``config.json``, which the SDK estimates outside its matrix), ``tp_size``,
``attention_dp_size``, ``moe_tp_size`` / ``moe_ep_size`` (MoE models; unset ones fill
``tp_size x attention_dp_size``, both unset: experts split by tensor parallelism) and the
quantization modes ``gemm_quant_mode``, ``kvcache_quant_mode``, ``fmha_quant_mode``,
``moe_quant_mode``, ``comm_quant_mode`` (unset: the checkpoint's own precision). The backend
defaults to the engine's ``engine_type``; with the engine's ``aic_nextn`` draft tokens
AIConfigurator estimates the MTP decode step (``nextn``, never set here).

System, backend, version and model are checked against the support matrix of the installed
SDK; each mistake is one line listing what is supported.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, ValidationInfo, field_validator, model_validator

from plansim.aic import sdk
from plansim.validation import StrictModel

QUANT_FIELDS = (
    "gemm_quant_mode",
    "kvcache_quant_mode",
    "fmha_quant_mode",
    "moe_quant_mode",
    "comm_quant_mode",
)


class AicSpec(StrictModel):
    """One AIConfigurator configuration. Hashable: it keys the compiled-engine and table caches."""

    type: Literal["aic"] = "aic"
    # Validation order matters: each field is checked against the ones above it.
    system: str
    backend: str = "vllm"
    backend_version: str = "current"
    model: str
    tp_size: int = Field(default=1, ge=1)
    attention_dp_size: int = Field(default=1, ge=1)
    moe_tp_size: int | None = Field(default=None, ge=1)
    moe_ep_size: int | None = Field(default=None, ge=1)
    gemm_quant_mode: str | None = None
    kvcache_quant_mode: str | None = None
    fmha_quant_mode: str | None = None
    moe_quant_mode: str | None = None
    comm_quant_mode: str | None = None
    # MTP draft tokens per decode step: the engine's aic_nextn (EngineArgs.effective_timing).
    nextn: int = Field(default=0, ge=0)

    @field_validator("system")
    @classmethod
    def _known_system(cls, value: str) -> str:
        if sdk.sdk_version() is None:
            raise ValueError(sdk.MISSING_SDK)
        systems = sdk.support_matrix().systems()
        if value not in systems:
            raise ValueError(
                f"{value!r} is not in AIConfigurator {sdk.sdk_version()}'s support "
                f"matrix; supported systems: {', '.join(systems)}"
            )
        return value

    @field_validator("backend")
    @classmethod
    def _known_backend(cls, value: str, info: ValidationInfo) -> str:
        system = info.data.get("system")
        if system is None:
            return value
        backends = sdk.support_matrix().backends(system)
        if value not in backends:
            raise ValueError(
                f"{value!r} is not supported on {system}; supported backends: {', '.join(backends)}"
            )
        return value

    @field_validator("backend_version")
    @classmethod
    def _known_version(cls, value: str, info: ValidationInfo) -> str:
        system, backend = info.data.get("system"), info.data.get("backend")
        if system is not None and backend is not None:
            sdk.resolve_version(system, backend, value)
        return value

    @field_validator("model")
    @classmethod
    def _known_model(cls, value: str, info: ValidationInfo) -> str:
        system, backend = info.data.get("system"), info.data.get("backend")
        version = info.data.get("backend_version")
        if system is None or backend is None or version is None or sdk.local_config(value):
            return value
        matrix = sdk.support_matrix()
        models = matrix.models(system, backend)
        if value not in models:
            raise ValueError(
                f"{value!r} is not supported by AIConfigurator for {backend} on "
                f"{system}; supported models: {', '.join(models)}"
            )
        entry = matrix.entry(system, backend, sdk.resolve_version(system, backend, version), value)
        if entry is not None and entry.status not in sdk.SUPPORTED_STATUSES:
            detail = f": {entry.message}" if entry.message else ""
            raise ValueError(
                f"{value!r} is marked {entry.status} for {backend} {version} on "
                f"{system} in AIConfigurator's support matrix{detail}"
            )
        return value

    @field_validator("tp_size")
    @classmethod
    def _divides_heads(cls, value: int, info: ValidationInfo) -> int:
        model = info.data.get("model")
        heads = sdk.model_config(model).get("num_attention_heads") if model else None
        if isinstance(heads, int) and heads % value:
            raise ValueError(f"tp_size {value} does not divide {model}'s {heads} attention heads")
        return value

    @field_validator("nextn")
    @classmethod
    def _drafts_come_from_the_engine(cls, value: int) -> int:
        if value:
            raise ValueError(
                "set aic_nextn on the engine: the aic model follows its speculative decoding"
            )
        return value

    @field_validator(*QUANT_FIELDS)
    @classmethod
    def _known_quant_mode(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None:
            return value
        from aiconfigurator_core.sdk import common

        enum = {
            "gemm_quant_mode": common.GEMMQuantMode,
            "kvcache_quant_mode": common.KVCacheQuantMode,
            "fmha_quant_mode": common.FMHAQuantMode,
            "moe_quant_mode": common.MoEQuantMode,
            "comm_quant_mode": common.CommQuantMode,
        }[info.field_name]
        if value not in enum.__members__:
            raise ValueError(
                f"{value!r} is not a {info.field_name}; choose one of {', '.join(enum.__members__)}"
            )
        return value

    @model_validator(mode="after")
    def _parallel_shape(self) -> AicSpec:
        moe_tp, moe_ep = self.moe_split
        width = self.tp_size * self.attention_dp_size
        if moe_tp * moe_ep != width:
            raise ValueError(
                f"moe_tp_size x moe_ep_size must equal tp_size x attention_dp_size "
                f"= {width}, got {self.moe_tp_size} x {self.moe_ep_size}"
            )
        return self

    @property
    def moe_split(self) -> tuple[int, int]:
        """(``moe_tp_size``, ``moe_ep_size``) in force: what is unset fills ``tp_size x
        attention_dp_size`` (both unset: experts split by tensor parallelism)."""
        width = self.tp_size * self.attention_dp_size
        tp, ep = self.moe_tp_size, self.moe_ep_size
        if tp is None and ep is None:
            return width, 1
        if tp is None:
            return (width // ep if width % ep == 0 else 0), ep
        if ep is None:
            return tp, (width // tp if width % tp == 0 else 0)
        return tp, ep

    def with_drafts(self, nextn: int) -> AicSpec:
        """This spec estimating ``nextn`` MTP draft tokens per decode step."""
        return self.model_copy(update={"nextn": int(nextn)})

    @property
    def resolved_version(self) -> str:
        """The literal perf-database version ``backend_version`` names."""
        return sdk.resolve_version(self.system, self.backend, self.backend_version)

    @property
    def label(self) -> str:
        """Short human name: ``Qwen/Qwen3-32B on h200_sxm (vllm 0.24.0, TP 2)``."""
        return (
            f"{self.model} on {self.system} ({self.backend} {self.resolved_version}, "
            f"TP {self.tp_size})"
        )

    def identity(self) -> dict[str, Any]:
        """Every input that changes AIConfigurator's answers, with the version resolved."""
        out = self.model_dump(exclude={"type"})
        out["backend_version"] = self.resolved_version
        out["moe_tp_size"], out["moe_ep_size"] = self.moe_split
        config = sdk.local_config(self.model)
        if config is not None:
            import hashlib

            out["model_config_sha256"] = hashlib.sha256(config.read_bytes()).hexdigest()
        return out


def parse_aic_spec(raw: dict[str, Any]) -> AicSpec:
    """Validate an ``aic`` timing-model mapping; ``ValueError`` with one line ``key: problem``."""
    from pydantic import ValidationError

    try:
        return AicSpec.model_validate(raw)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"])
        msg = "unknown key" if err["type"] == "extra_forbidden" else err["msg"]
        msg = msg.removeprefix("Value error, ")
        raise ValueError(f"{loc}: {msg}" if loc else msg) from None
