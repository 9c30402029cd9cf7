"""What is being simulated: engines, pools, router, SLA. Validated user input (pydantic).

``EngineArgs`` takes the reference mocker's key names and defaults, so a Dynamo engine config
loads unchanged: the canonical 1.6.1 form or the older flat ``--extra-engine-args`` spellings
(``plansim.sim.engine_config`` lists every accepted key). Keys the reference knows but that do
not change the simulation here (ports, memory fractions, KVBM tiers, ...) are accepted, listed in
``EngineArgs.no_effect_keys`` and named in one warning when the deployment is built; a key nobody
knows fails with its name.

``load_deployment(path, overrides)`` reads a YAML/JSON deployment file, applies dotted-key
overrides (``{"router.mode": "kv_router", "engine.num_gpu_blocks": 2048}``) and validates it.
Every mistake raises ``ConfigError`` naming the key, before any replay starts.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import (
    BaseModel,
    Field,
    ValidationError,
    create_model,
    field_validator,
    model_serializer,
    model_validator,
)

from plansim.aic.memory import MEMORY_FRACTION_KEYS
from plansim.aic.spec import AicSpec
from plansim.configfile import parse_config_bytes, read_config
from plansim.errors import ConfigError
from plansim.limits import MAX_POOL_RANKS, MAX_POOL_WORKERS, MAX_SEED
from plansim.params import Param, params_of
from plansim.roles import POOL_COUNT_FIELDS, Mode, Role
from plansim.sim import engine_config
from plansim.sim.routing import ROUTERS, all_router_knobs, router_knobs, router_mode
from plansim.sim.schedulers import SCHEDULERS, backend_blocks, backend_engine_knobs
from plansim.sim.speculative import accept_rates
from plansim.sim.timing import TIMING_MODELS, TimingKind, timing_params
from plansim.validation import StrictModel, config_error, older_spelling

log = logging.getLogger(__name__)


# Where an engine's dump shows the keys its aic timing model decided (informational only).
DERIVED = "derived_from_model"


class _TimingModelFields(StrictModel):
    """The reference's ``timing_model`` object: ``type`` names a type of the timing registry
    (``plansim.sim.timing.TIMING_MODELS``; each type's module says what it reads), the keys
    below are the ones types share (``TimingKind.shared_keys``: an NPZ ``path``, an external
    ``provider`` and its ``config``, the ``aic`` settings), and ``TimingModelSpec`` adds the keys
    of their own that types declare (``TimingKind.Params``)."""

    # A type of the timing registry (``plansim.sim.timing.TIMING_MODELS``).
    type: str = "polynomial"
    provider: str | None = None
    config: dict[str, Any] | None = None
    path: str | None = None
    aic: AicSpec | None = None

    @model_validator(mode="before")
    @classmethod
    def _own_fields(cls, data: Any) -> Any:
        """A type's settings as written (``TimingKind.from_written``: ``aic``'s beside type)."""
        kind = (
            _timing_kind(data.get("type", cls.model_fields["type"].default))
            if isinstance(data, Mapping)
            else None
        )
        return data if kind is None else kind.from_written(data)

    @model_serializer(mode="wrap")
    def _as_written(self, handler: Any) -> Any:
        """A spec dumps as it is written (``TimingKind.to_written``)."""
        data = handler(self)
        return (
            TIMING_MODELS.get(self.type).to_written(self, data) if isinstance(data, dict) else data
        )

    @field_validator("type")
    @classmethod
    def _known_type(cls, value: str) -> str:
        if value not in TIMING_MODELS:
            raise ValueError(TIMING_MODELS.unknown(value))
        return value

    @model_validator(mode="after")
    def _complete(self) -> _TimingModelFields:
        kind = TIMING_MODELS.get(self.type)
        own = kind.shared_keys | {p.name for p in params_of(kind.Params)}
        # A key of another type is refused, not ignored: ``type: polynomial`` with ``path`` is
        # most likely an npz model whose type was left out.
        foreign = sorted(
            k for k in self.model_fields_set - own - {"type"} if getattr(self, k) is not None
        )
        if foreign:
            raise ValueError(
                f"{', '.join(foreign)}: not read by a timing model of type {self.type}"
            )
        kind.check(self)
        return self

    @property
    def npz_path(self) -> str | None:
        """The NPZ file this spec reads, if any."""
        return TIMING_MODELS.get(self.type).npz_path(self)


def _timing_kind(name: Any) -> TimingKind | None:
    """The registered timing type ``name`` names, if any (the type check names a bad one)."""
    return TIMING_MODELS.get(name) if isinstance(name, str) and name in TIMING_MODELS else None


TimingModelSpec = create_model(
    "TimingModelSpec",
    __base__=_TimingModelFields,
    __module__=__name__,
    __doc__=_TimingModelFields.__doc__,
    **{
        name: p.field()
        for name, p in timing_params().items()
        if name not in _TimingModelFields.model_fields
    },
)


def _block_model(backend: str, knobs: tuple[Param, ...]) -> type[StrictModel]:
    """The model of a backend's engine block (``engine.sglang``) from its declared knobs."""
    return create_model(
        f"{backend.capitalize()}Args",
        __base__=StrictModel,
        __module__=__name__,
        __doc__=f"The reference's ``engine.{backend}`` block (used with ``backend: {backend}``).",
        **{p.name: p.field() for p in knobs},
    )


# Each backend's own engine block, by backend (``plansim.sim.schedulers.backend_blocks``).
BACKEND_BLOCKS: dict[str, type[StrictModel]] = {
    backend: _block_model(backend, knobs) for backend, knobs in backend_blocks().items()
}
# Module attributes under their names (``SglangArgs``), so that engine args pickle (worker pools).
globals().update({model.__name__: model for model in BACKEND_BLOCKS.values()})


class HostOffloadArgs(StrictModel):
    """The reference's ``engine.native_host_offload`` block: a host KV tier of
    ``num_host_blocks`` engine blocks per rank, with its copy bandwidths (decimal GB/s, 0 is
    instantaneous; ``plansim.sim.host_offload``). Its other keys have no effect here."""

    num_host_blocks: int = Field(ge=1)
    d2h_bandwidth_gbps: float = Field(default=32.0, ge=0)
    h2d_bandwidth_gbps: float = Field(default=32.0, ge=0)


class _EngineFields(StrictModel):
    """One engine (worker) in the reference mocker's JSON key names and defaults (``EngineArgs``
    adds each backend's own keys: its block, ``sglang``, and its top-level keys)."""

    # A backend of the engine registry (``plansim.sim.schedulers.SCHEDULERS``).
    engine_type: str = "vllm"
    num_gpu_blocks: int = Field(default=16384, ge=1)
    block_size: int = Field(default=64, ge=1)
    max_model_len: int | None = Field(default=None, ge=1)
    max_num_seqs: int = Field(default=256, ge=1)
    max_num_batched_tokens: int = Field(default=8192, ge=1)
    enable_prefix_caching: bool = True
    enable_chunked_prefill: bool = True
    speedup_ratio: float = Field(default=1.0, ge=0)
    decode_speedup_ratio: float = Field(default=1.0, ge=0)
    dp_size: int = Field(default=1, ge=1, le=MAX_POOL_RANKS)
    startup_time: float | None = Field(default=None, ge=0)
    # plansim's cold-start realism for workers a planner adds: start-up times drawn from a
    # lognormal of mean ``startup_time`` and this coefficient of variation (seeded), and a
    # first pass that starts this many seconds after the worker is ready and routable (model
    # warm-up on the first request; Dynamo reports ~30 s TTFT on the first request of a
    # restored worker). Workers of the starting deployment are warm. 0: off.
    startup_time_cv: float = Field(default=0.0, ge=0, le=10)
    first_pass_delay_s: float = Field(default=0.0, ge=0)
    # vLLM's async scheduling (on by default in vLLM 0.15, PR #27614; SGLang's and
    # TensorRT-LLM's overlap schedulers do the same): a request reaching a busy rank joins the
    # pass after next (``plansim.sim.engine``, rule 6). Off: the reference mocker's scheduling.
    async_scheduling: bool = False
    worker_type: Literal["aggregated", "prefill", "decode"] = "aggregated"
    is_prefill: bool | None = None
    is_decode: bool | None = None
    preemption_mode: Literal["lifo", "fifo"] = "lifo"
    kv_bytes_per_token: int | None = Field(default=None, ge=0)
    kv_transfer_bandwidth: float | None = Field(default=None, ge=0)
    # What a disaggregated handoff transfers: the whole prompt, or only the prompt blocks the
    # destination decode rank does not hold (it is then chosen as the prefill ends).
    kv_transfer_timing_mode: Literal["full_prompt", "destination_missing"] = "full_prompt"
    planner_profile_data: str | None = None
    timing_model: TimingModelSpec | None = None
    tensor_parallel_size: int | None = Field(default=None, ge=1)
    # Memory fractions that size the KV cache from an aic timing model (one per backend).
    gpu_memory_utilization: float | None = Field(default=None, gt=0, le=1)
    mem_fraction_static: float | None = Field(default=None, gt=0, le=1)
    free_gpu_memory_fraction: float | None = Field(default=None, gt=0, le=1)
    # Speculative (MTP) decoding: draft tokens per pass, their conditional acceptance rates,
    # and the base seed of each rank's acceptance stream (``plansim.sim.speculative``).
    aic_nextn: int | None = Field(default=None, ge=1, le=5)
    aic_nextn_accept_rates: tuple[float, ...] | None = None
    aic_mtp_seed: int = Field(default=42, ge=0)
    native_host_offload: HostOffloadArgs | None = None
    # Bytes of one token's KV in a host offload block (``native_host_offload``).
    kv_cache_bytes_per_token: int | None = Field(default=None, ge=1)
    # Canonical names of the given keys that have no effect here (``engine_config.KEYS``).
    no_effect_keys: tuple[str, ...] = ()
    # Keys the aic timing model decided (``num_gpu_blocks``, ...). Dumps show them under
    # ``DERIVED``, which validation ignores, so a dump validated again (with overrides, another
    # system or TP) decides them afresh.
    derived_keys: tuple[str, ...] = ()

    @field_validator("engine_type", mode="before")
    @classmethod
    def _known_engine_type(cls, value: Any) -> Any:
        name = value.lower() if isinstance(value, str) else value
        if name not in SCHEDULERS:
            raise ValueError(SCHEDULERS.unknown(value))
        return name

    @field_validator("preemption_mode", "worker_type", mode="before")
    @classmethod
    def _lower(cls, value: Any) -> Any:
        return value.lower() if isinstance(value, str) else value

    @model_validator(mode="before")
    @classmethod
    def _normalise_keys(cls, data: Any) -> Any:
        if not isinstance(data, Mapping) or "no_effect_keys" in data:
            return data  # not user input, or already normalised (model_copy, round trips)
        normalised = engine_config.normalise(data)
        fields = normalised.fields
        no_effect = set(normalised.no_effect)
        if "native_host_offload" in fields:
            if "kv_cache_bytes_per_token" not in fields and "kv_bytes_per_token" in fields:
                # The older flags sized host blocks from kv_bytes_per_token.
                fields["kv_cache_bytes_per_token"] = fields["kv_bytes_per_token"]
        elif "kv_cache_bytes_per_token" in fields:
            no_effect.add("kv_cache_bytes_per_token")  # it sizes host offload blocks only
        backend = fields.get("engine_type", cls.model_fields["engine_type"].default)
        backend = backend.lower() if isinstance(backend, str) else backend
        if backend in SCHEDULERS:
            if "block_size" not in fields:
                # Each backend has its own default page size (vLLM 64, SGLang 1, TRT-LLM 32).
                fields["block_size"] = SCHEDULERS.get(backend).default_block_size
            # The reference's normaliser writes every backend's block; another backend's
            # settings count only if the user changed them.
            for block, knobs in backend_blocks().items():
                given = fields.get(block)
                if block != backend and isinstance(given, Mapping):
                    defaults = {knob.name: knob.default for knob in knobs}
                    no_effect.update(
                        f"{block}.{k}"
                        for k, v in given.items()
                        if k in defaults and v != defaults[k]
                    )
        timing = fields.get("timing_model")
        kind = _timing_kind(timing.get("type")) if isinstance(timing, Mapping) else None
        if kind is not None:
            fields["timing_model"] = kind.engine_defaults(timing, backend)
        return {**fields, "no_effect_keys": tuple(sorted(no_effect))}

    @model_validator(mode="wrap")
    @classmethod
    def _sized_by_model(cls, data: Any, handler: Any) -> EngineArgs:
        """With an aic timing model, fill the keys the model decides (KV blocks, handoff bytes,
        TP and DP; :mod:`plansim.aic.engine_fields`); memory fractions without effect join
        ``no_effect_keys``."""
        if isinstance(data, Mapping) and ("derived_keys" in data or DERIVED in data):
            drop = {*data.get("derived_keys", ()), "derived_keys", DERIVED}
            data = {k: v for k, v in data.items() if k not in drop}
        args = handler(data)
        spec = args.effective_timing.aic
        if spec is not None:
            from plansim.aic.engine_fields import derived_engine_fields

            updates = derived_engine_fields(args, spec)
        else:
            unused = {k for k, _ in MEMORY_FRACTION_KEYS.values() if getattr(args, k) is not None}
            updates = (
                {"no_effect_keys": tuple(sorted(set(args.no_effect_keys) | unused))}
                if unused - set(args.no_effect_keys)
                else {}
            )
        if not updates:
            return args
        derived = tuple(sorted(k for k in updates if k != "no_effect_keys"))
        return handler(
            {
                **args.model_dump(exclude_unset=True),
                "no_effect_keys": args.no_effect_keys,
                **updates,
                "derived_keys": derived,
            }
        )

    @model_serializer(mode="wrap")
    def _without_derived(self, handler: Any) -> Any:
        data = handler(self)
        if isinstance(data, dict):
            derived = {key: data.pop(key) for key in self.derived_keys if key in data}
            data.pop("derived_keys", None)
            if derived:
                data[DERIVED] = derived
        return data

    @model_validator(mode="after")
    def _backend_knobs(self) -> EngineArgs:
        for name, (knob, owners) in backend_engine_knobs().items():
            if self.engine_type not in owners and getattr(self, name) != knob.default:
                raise ValueError(f"{name}: supported only for backend {' and '.join(owners)}")
        return self

    @model_validator(mode="after")
    def _host_offload(self) -> EngineArgs:
        if self.native_host_offload is None:
            return self
        if not SCHEDULERS.get(self.engine_type).host_offload:
            hosts = [name for name, cls in SCHEDULERS.items() if cls.host_offload]
            raise ValueError(
                f"native_host_offload: supported only for backend {' and '.join(hosts)}"
            )
        if not self.enable_prefix_caching:
            raise ValueError("native_host_offload: needs enable_prefix_caching")
        if self.kv_cache_bytes_per_token is None:
            raise ValueError(
                "native_host_offload: needs kv_cache_bytes_per_token to size a host block"
            )
        return self

    @model_validator(mode="after")
    def _speculative(self) -> EngineArgs:
        if self.aic_nextn is not None:
            accept_rates(self.aic_nextn, self.aic_nextn_accept_rates)
        return self

    @model_validator(mode="after")
    def _role_flags(self) -> EngineArgs:
        if self.is_prefill and self.is_decode:
            raise ValueError("is_prefill and is_decode cannot both be true")
        return self

    @property
    def role(self) -> Role:
        """``Role.AGG`` (``worker_type: aggregated``), ``PREFILL`` or ``DECODE``
        (``is_prefill``/``is_decode`` win over ``worker_type``)."""
        if self.is_prefill:
            return Role.PREFILL
        if self.is_decode:
            return Role.DECODE
        return Role(self.worker_type)

    @property
    def gpus_per_worker(self) -> int:
        """Tensor parallel size x data parallel ranks."""
        tp = self.tensor_parallel_size or 1
        return tp * self.dp_size

    @property
    def total_kv_tokens(self) -> int:
        """KV capacity of one rank in tokens."""
        return self.num_gpu_blocks * self.block_size

    @property
    def effective_timing(self) -> TimingModelSpec:
        """The timing model in force: ``timing_model`` (an aic model estimating the engine's
        ``aic_nextn`` draft tokens), else ``planner_profile_data`` (NPZ), else the polynomial
        default."""
        timing = self.timing_model
        if timing is not None:
            if timing.aic is not None and self.aic_nextn:
                return timing.model_copy(update={"aic": timing.aic.with_drafts(self.aic_nextn)})
            return timing
        if self.planner_profile_data:
            return TimingModelSpec(type="npz", path=self.planner_profile_data)
        return TimingModelSpec()


EngineArgs = create_model(
    "EngineArgs",
    __base__=_EngineFields,
    __module__=__name__,
    __doc__=_EngineFields.__doc__,
    **{name: (model, Field(default_factory=model)) for name, model in BACKEND_BLOCKS.items()},
    **{name: knob.field() for name, (knob, _) in backend_engine_knobs().items()},
)


# Engine keys that time the disaggregated KV handoff; only the prefill pool's are read.
HANDOFF_KEYS = ("kv_transfer_bandwidth", "kv_transfer_timing_mode")


# The reference router's ``KvRouterConfig`` keys that have no effect here, with what they do
# there (for the start-up warning).
NO_EFFECT_ROUTER_KEYS = {
    "router_track_output_blocks": "output-block load tracking",
    "router_prefill_load_model": "prefill load decay model",
    "disk_cache_hit_weight": "disk-tier cache hit credit",
    "use_kv_events": "cache view from live KV events",
    "router_replica_sync": "state sync between router replicas",
    "router_ttl_secs": "approximate-index block TTL",
    "router_approximate_cache_policy": "approximate-index retention",
    "router_event_threads": "KV indexer threads",
    "use_remote_indexer": "remote KV indexer",
    "serve_indexer": "serves the router's indexer",
    "enable_session_prefix_index": "per-session prefix lineage",
    "shared_cache_multiplier": "external shared-cache credit",
    "shared_cache_type": "external shared KV cache",
    "router_predicted_ttl_secs": "predict-on-route index TTL",
    "conditional_disagg_enabled": "conditional-disagg bypass",
    "conditional_disagg_policy": "conditional-disagg policy",
    "conditional_disagg_eff_isl_threshold": "conditional-disagg ISL bound",
    "conditional_disagg_eff_isl_ratio_threshold": "conditional-disagg ISL ratio bound",
    "conditional_disagg_prefill_busy_threshold": "conditional-disagg prefill busy bound",
    "conditional_disagg_decode_busy_threshold": "conditional-disagg decode busy bound",
    "router_policy_config": "policy-class queue YAML",
    "router_prefill_policy": "prefill worker-selection override",
    "router_decode_policy": "decode worker-selection override",
    "router_tracking_hash": "tracking hash algorithm",
    "router_tracking_key_file": "keyed tracking hash key",
    "router_tracking_key_id": "keyed tracking hash key epoch",
}


class _RouterBase(StrictModel):
    """How requests are routed to workers: ``mode`` names a policy of the routing registry
    (``plansim.sim.routing.ROUTERS``); the knob fields are every policy's declared knobs.
    KV-router keys follow the reference's ``KvRouterConfig``; its keys without simulated effect,
    and knobs the chosen mode does not use, are accepted and listed in ``no_effect_keys``."""

    mode: str = "round_robin"
    no_effect_keys: tuple[str, ...] = ()

    @model_validator(mode="before")
    @classmethod
    def _split_no_effect(cls, data: Any) -> Any:
        if not isinstance(data, Mapping) or "no_effect_keys" in data:
            return data
        mode = router_mode(data.get("mode", cls.model_fields["mode"].default))
        used = {k.name for k in router_knobs(mode)} if mode in ROUTERS else set()
        unused_knobs = {k for k in data if k in all_router_knobs() and k not in used}
        given = sorted(k for k in data if k in NO_EFFECT_ROUTER_KEYS or k in unused_knobs)
        kept = {k: v for k, v in data.items() if k not in NO_EFFECT_ROUTER_KEYS}
        return {**kept, "no_effect_keys": tuple(given)}

    @model_validator(mode="after")
    def _resolve_aliases(self) -> Any:
        # A deprecated spelling's value becomes its target's (it wins) and the spelling is
        # cleared, so a later copy that changes the target is not overridden by it.
        for knob in all_router_knobs().values():
            value = getattr(self, knob.name, None) if knob.alias_of else None
            if value is not None:
                object.__setattr__(self, knob.alias_of, value)
                object.__setattr__(self, knob.name, None)
                # The target counts as given (a dump of the given fields keeps its value).
                self.__pydantic_fields_set__.discard(knob.name)
                self.__pydantic_fields_set__.add(knob.alias_of)
        return self

    @field_validator("mode", mode="before")
    @classmethod
    def _known_mode(cls, value: Any) -> Any:
        mode = router_mode(value)
        if isinstance(mode, str) and mode not in ROUTERS:
            raise ValueError(ROUTERS.unknown(value))
        return mode


RouterConfig = create_model(
    "RouterConfig",
    __base__=_RouterBase,
    __module__=__name__,
    **{name: knob.field() for name, knob in all_router_knobs().items()},
)


class SlaConfig(StrictModel):
    """Goodput thresholds; a request is good when every threshold that is set holds. ``tpot_ms``
    bounds the request's mean token gap (TPOT); ``itl_ms``, the reference's name for it, is
    accepted as its spelling."""

    ttft_ms: float | None = Field(default=None, gt=0)
    tpot_ms: float | None = Field(default=None, gt=0)
    e2e_ms: float | None = Field(default=None, gt=0)

    @model_validator(mode="before")
    @classmethod
    def _itl_spelling(cls, data: Any) -> Any:
        return older_spelling(data, "itl_ms", "tpot_ms")

    @property
    def is_set(self) -> bool:
        return any(v is not None for v in (self.ttft_ms, self.tpot_ms, self.e2e_ms))


_MODE_ALIASES = {"aggregated": Mode.AGG, "disaggregated": Mode.DISAGG}


class Deployment(StrictModel):
    """A simulated deployment. ``agg``: ``num_workers`` x ``engine``. ``disagg``:
    ``num_prefill_workers`` x ``prefill_engine`` and ``num_decode_workers`` x ``decode_engine``
    (each defaults to ``engine``)."""

    mode: Mode = Mode.AGG
    num_workers: int = Field(default=1, ge=1, le=MAX_POOL_WORKERS)
    num_prefill_workers: int = Field(default=1, ge=1, le=MAX_POOL_WORKERS)
    num_decode_workers: int = Field(default=1, ge=1, le=MAX_POOL_WORKERS)
    engine: EngineArgs = Field(default_factory=EngineArgs)
    prefill_engine: EngineArgs | None = None
    decode_engine: EngineArgs | None = None
    router: RouterConfig = Field(default_factory=RouterConfig)
    arrival_speedup_ratio: float = Field(default=1.0, gt=0)
    max_concurrency: int | None = Field(default=None, ge=1)
    sla: SlaConfig = Field(default_factory=SlaConfig)
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    planner: dict[str, Any] | None = None
    # Time each request spends outside the engines (frontend, network), added to its TTFT and
    # E2E as recorded; the engines, the router and the planner never see it.
    request_overhead_ms: float = Field(default=0.0, ge=0)

    @field_validator("mode", mode="before")
    @classmethod
    def _alias_agg(cls, value: Any) -> Any:
        return _MODE_ALIASES.get(value, value) if isinstance(value, str) else value

    @model_validator(mode="after")
    def _pools(self) -> Deployment:
        other = Mode(self.mode).other
        for key in other.pool_keys:
            if key in self.model_fields_set:
                raise ValueError(f"{key}: only with mode {other} (the mode is {self.mode})")
        if self.mode == Mode.DISAGG:
            p, d = self.prefill_args, self.decode_args
            if p.block_size != d.block_size:
                raise ValueError("prefill_engine and decode_engine need the same block_size")
        for pool, workers in self.pool_sizes().items():
            ranks = workers * self.pool_args(pool).dp_size
            if ranks > MAX_POOL_RANKS:
                raise ValueError(
                    f"{POOL_COUNT_FIELDS[pool]}: {workers} workers of dp_size "
                    f"{self.pool_args(pool).dp_size} are {ranks:,} engine ranks; "
                    f"at most {MAX_POOL_RANKS:,} per pool"
                )
        return self

    @property
    def prefill_args(self) -> EngineArgs:
        return self.prefill_engine or self.engine

    @property
    def decode_args(self) -> EngineArgs:
        return self.decode_engine or self.engine

    def no_effect_keys(self) -> tuple[str, ...]:
        """Every given key, dotted from the deployment's top, that has no effect here: the
        engine sections' own, and the KV handoff keys of a section the prefill pool does not
        read (the reference times the handoff from the prefill engine's args)."""
        handoff_from = None
        if Mode(self.mode) == Mode.DISAGG:
            handoff_from = "engine" if self.prefill_engine is None else "prefill_engine"
        keys = []
        for name in ("engine", "prefill_engine", "decode_engine"):
            args = getattr(self, name)
            if args is None:
                continue
            keys += [f"{name}.{key}" for key in args.no_effect_keys]
            if name != handoff_from:
                keys += [f"{name}.{key}" for key in HANDOFF_KEYS if key in args.model_fields_set]
        return (*keys, *(f"router.{key}" for key in self.router.no_effect_keys))

    def pool_args(self, pool: Role | str) -> EngineArgs:
        """Engine args of pool ``agg``, ``prefill`` or ``decode``."""
        return {
            Role.AGG: self.engine,
            Role.PREFILL: self.prefill_args,
            Role.DECODE: self.decode_args,
        }[Role(pool)]

    def pool_sizes(self) -> dict[Role, int]:
        """Initial workers per pool, in ``Mode.pools`` order."""
        return {pool: getattr(self, POOL_COUNT_FIELDS[pool]) for pool in Mode(self.mode).pools}

    def planner_role_sizes(self) -> dict[Role, int]:
        """Initial workers per planner role (an aggregated pool is decode)."""
        return {pool.planner_role: n for pool, n in self.pool_sizes().items()}


def load_engine_args(path: str | Path) -> EngineArgs:
    """Read a Dynamo ``--extra-engine-args`` JSON (or YAML) file unchanged; relative NPZ paths
    resolve against the file's folder."""
    source = Path(path)
    raw = read_config(source, what="engine-args file")
    return _validate(EngineArgs, _resolve_paths_in_engine(raw, source.parent), source=str(source))


def load_deployment(
    path: str | Path | None = None,
    overrides: Mapping[str, Any] | None = None,
    *,
    flags: Mapping[str, str] | None = None,
) -> Deployment:
    """Read, override and validate a deployment file (YAML or JSON), or the defaults when
    ``path`` is None. ``overrides`` maps dotted keys to values and wins over the file; ``flags``
    names the command-line option behind an override (``{"num_workers": "--num-workers"}``), so
    that an error in it names the option, not the file.
    ``engine``/``prefill_engine``/``decode_engine`` may be a path to an engine-args file, which
    is validated on its own (its errors name it), or, as an override, inline JSON (Dynamo's
    ``--extra-engine-args '{"block_size": 64}'``; its errors name the flag). Relative file paths
    resolve against the deployment file's folder (an override's, against the working folder).
    An ``sla.tpot_ms`` override replaces the file's bound in either spelling (``itl_ms``).

    A ``mode`` override that switches the file's mode drops the file's pool keys of the other
    mode with a warning; when those keys sized the pools and nothing sizes the new mode's pools,
    it is an error (plansim never guesses how to split workers).
    """
    overrides = dict(overrides or {})
    flags = dict(flags or {})
    source = Path(path) if path is not None else None
    raw: dict[str, Any] = read_config(source, what="deployment file") if source is not None else {}
    name = str(source) if source is not None else "the defaults"
    _switch_mode(raw, overrides, name, flags)
    base = source.parent if source is not None else Path.cwd()
    if "sla.tpot_ms" in overrides and isinstance(raw.get("sla"), Mapping):
        raw["sla"] = {k: v for k, v in raw["sla"].items() if k != "itl_ms"}
    for key, value in overrides.items():
        _set_dotted(raw, key, value, flags.get(key))
    for key in ("engine", "prefill_engine", "decode_engine"):
        value = raw.get(key)
        if key in overrides and isinstance(value, str) and value.lstrip().startswith("{"):
            where = flags.get(key, key)
            inline = parse_config_bytes(value.encode("utf-8"), where, ".json")
            if not isinstance(inline, Mapping):
                raise ConfigError("inline engine args must be a JSON object", field=where)
            raw[key] = _resolve_paths_in_engine(inline, Path.cwd())
            _validate(EngineArgs, raw[key], source=where)
        elif isinstance(value, (str, Path)):
            engine_path = _resolve(base, value)
            raw[key] = _resolve_paths_in_engine(
                read_config(engine_path, what="engine-args file"), engine_path.parent
            )
            _validate(EngineArgs, raw[key], source=str(engine_path))
        elif isinstance(value, Mapping):
            raw[key] = _resolve_paths_in_engine(value, base)
    try:
        return build_deployment(raw, source=str(source) if source else None)
    except ConfigError as exc:
        if exc.field in overrides and exc.field in flags:
            raise ConfigError(exc.message, field=flags[exc.field]) from None
        raise


def _mode_named(value: Any) -> Mode | None:
    """The mode ``value`` spells (an alias included), or None when it spells none."""
    if not isinstance(value, str):
        return None
    value = _MODE_ALIASES.get(value, value)
    return Mode(value) if value in tuple(Mode) else None


def _switch_mode(
    raw: dict[str, Any], overrides: Mapping[str, Any], name: str, flags: Mapping[str, str]
) -> None:
    """Drop (loudly) the file's pool keys that a ``mode`` override makes meaningless; see
    ``load_deployment``."""
    new, old = _mode_named(overrides.get("mode")), _mode_named(raw.get("mode", Mode.AGG))
    if new is None or old is None or new == old:
        return  # validation names a mode that is not one
    stale = [key for key in old.pool_keys if key in raw]
    sized = [key for key in stale if key in old.size_keys]
    if sized and not any(key in overrides or key in raw for key in new.size_keys):
        wanted = " and ".join(flags.get(key, key) for key in new.size_keys)
        mode_flag = flags.get("mode", "mode")
        raise ConfigError(
            f"{name} sizes the {old} pools ({', '.join(f'{k} {raw[k]}' for k in sized)}), "
            f"which mean nothing in {new} mode; give the {new} pool sizes with {wanted}",
            field=mode_flag,
        )
    if stale:
        log.warning(
            "%s: %s: no effect with %s %s", name, ", ".join(stale), flags.get("mode", "mode"), new
        )
        for key in stale:
            del raw[key]


def with_overrides(
    deployment: Deployment, overrides: Mapping[str, Any], *, source: str | None = None
) -> Deployment:
    """``deployment`` with dotted-key ``overrides`` applied and validated again (``ConfigError``
    naming the key on a mistake). A ``prefill_engine.*`` / ``decode_engine.*`` key on a pool that
    inherits ``engine`` starts from ``engine``'s values, as the pool did. A ``mode`` override
    leaves the other mode's pool keys behind, a ``router.mode`` override the knobs the new mode
    does not use (unless an override sets them)."""
    raw = deployment_mapping(deployment, mode=overrides.get("mode"))
    for key, value in overrides.items():
        pool = key.split(".", 1)[0]
        if pool in ("prefill_engine", "decode_engine") and "." in key and raw.get(pool) is None:
            raw[pool] = dict(raw.get("engine") or {})
        _set_dotted(raw, key, value)
    _drop_unused_knobs(
        raw, keep={key.split(".", 1)[1] for key in overrides if key.startswith("router.")}
    )
    return build_deployment(raw, source=source)


def deployment_mapping(
    deployment: Deployment, *, mode: Any = None, json: bool = False
) -> dict[str, Any]:
    """``deployment`` as the mapping that validates back to it: the fields that were given
    (defaults are derived again), except the pool keys of the mode it is not in (or will not be
    in: ``mode``), the router knobs its router mode does not use, the record of no-effect keys
    (already warned about; a key added to the mapping is checked afresh) and the record of what
    an aic model decided (decided afresh). ``json``: JSON types."""
    raw = deployment.model_dump(mode="json" if json else "python", exclude_unset=True)
    mode = _MODE_ALIASES.get(mode, mode) if isinstance(mode, str) else deployment.mode
    for key in (Mode.DISAGG if mode == Mode.AGG else Mode.AGG).pool_keys:
        raw.pop(key, None)
    for key in ("engine", "prefill_engine", "decode_engine", "router"):
        if isinstance(raw.get(key), dict):
            raw[key].pop("no_effect_keys", None)
            raw[key].pop(DERIVED, None)
    _drop_unused_knobs(raw)
    return raw


def _drop_unused_knobs(raw: dict[str, Any], keep: set[str] = frozenset()) -> None:
    """Remove from ``raw["router"]`` the knobs its mode does not use, except ``keep``."""
    router = raw.get("router")
    if not isinstance(router, dict):
        return
    mode = router_mode(router.get("mode", _RouterBase.model_fields["mode"].default))
    if mode not in ROUTERS:
        return
    used = {k.name for k in router_knobs(mode)}
    for name in [k for k in router if k in all_router_knobs() and k not in used]:
        if name not in keep:
            del router[name]


def build_deployment(raw: Mapping[str, Any], *, source: str | None = None) -> Deployment:
    """Validate an already-parsed deployment mapping; NPZ files are checked here."""
    deployment = _validate(Deployment, dict(raw), source=source)
    for name in ("engine", "prefill_engine", "decode_engine"):
        args = getattr(deployment, name)
        if args is not None:
            check_timing_files(args, field=name, source=source)
    no_effect = deployment.no_effect_keys()
    if no_effect:
        log.warning(
            "%skeys with no effect in plansim (accepted for compatibility): %s",
            f"{source}: " if source else "",
            "; ".join(f"{key} ({_no_effect_reason(key)})" for key in no_effect),
        )
    return deployment


def _no_effect_reason(dotted: str) -> str:
    """What a no-effect key (``engine.emit_kv_events``, ``router.use_kv_events``) does in the
    reference."""
    section, _, name = dotted.partition(".")
    if section == "router":
        if name in NO_EFFECT_ROUTER_KEYS:
            return NO_EFFECT_ROUTER_KEYS[name]
        modes = [mode for mode in ROUTERS if name in {k.name for k in router_knobs(mode)}]
        return f"a knob of router mode {' and '.join(modes)} only"
    block = name.partition(".")[0]
    if block in BACKEND_BLOCKS:
        return f"used only with backend {block}"
    if name in HANDOFF_KEYS:
        return "times the disaggregated KV handoff; only the prefill pool's engine args are read"
    if name == "kv_cache_bytes_per_token":
        return "sizes host offload blocks, used only with native_host_offload"
    return engine_config.key(name).why


def check_timing_files(args: EngineArgs, *, field: str, source: str | None = None) -> None:
    """Fail now, naming the key, when a timing model's NPZ file is missing or malformed."""
    from plansim.sim.timing import load_npz_profile

    spec = args.effective_timing
    if spec.npz_path is not None:
        key = f"{field}.timing_model" if args.timing_model else f"{field}.planner_profile_data"
        load_npz_profile(spec.npz_path, field=key, source=source)


def _validate(model: type[BaseModel], raw: dict[str, Any], *, source: str | None) -> Any:
    try:
        return model.model_validate(raw)
    except ValidationError as exc:
        raise config_error(exc, source=source, model=model) from None


def _resolve(base: Path, value: str | Path) -> Path:
    p = Path(value).expanduser()
    return p if p.is_absolute() else base / p


def _resolve_paths_in_engine(raw: Mapping[str, Any], base: Path) -> dict[str, Any]:
    """Make the NPZ paths of an engine mapping absolute against ``base``."""
    out = dict(raw)
    if isinstance(out.get("engine"), Mapping):
        out["engine"] = _resolve_paths_in_engine(out["engine"], base)
    if isinstance(out.get("planner_profile_data"), str):
        out["planner_profile_data"] = str(_resolve(base, out["planner_profile_data"]))
    tm = out.get("timing_model")
    if isinstance(tm, Mapping):
        tm = dict(tm)
        if isinstance(tm.get("path"), str):
            tm["path"] = str(_resolve(base, tm["path"]))
        cfg = tm.get("config")
        if isinstance(cfg, Mapping) and isinstance(cfg.get("path"), str):
            tm["config"] = {**cfg, "path": str(_resolve(base, cfg["path"]))}
        out["timing_model"] = tm
    return out


def _set_dotted(raw: dict[str, Any], key: str, value: Any, flag: str | None = None) -> None:
    parts = key.split(".")
    node = raw
    for part in parts[:-1]:
        child = node.get(part)
        if child is None:
            child = node[part] = {}
        elif not isinstance(child, dict):
            raise ConfigError(f"cannot set {key}: {part} is not a mapping", field=flag or key)
        node = child
    node[parts[-1]] = value
