"""Dynamo engine-config compatibility: every key the engine loader accepts, in every spelling,
and what it becomes in plansim.

Two forms load, and may be mixed (a flat key beside ``engine:`` wins over the wrapped one):

- the canonical Dynamo 1.6.1 form, which the reference mocker's config normaliser writes:
  ``{"engine": {"backend": ..., "sglang": {...}, "trtllm": {...}, "native_host_offload": {...},
  ...}, "dp_size": ..., "tensor_parallel_size": ..., "startup_time": ..., "dynamo": {...}}``;
- the older flat ``MockEngineArgs`` JSON and the mocker's command-line flags spelled as keys
  (``engine_type``, ``is_prefill_worker``, ``data_parallel_size``, ``sglang_schedule_policy``,
  ``num_host_blocks``, ``host_offload_d2h_bandwidth_gbps``, the ``ais_`` spellings of ``aic_``
  keys, ...).

``KEYS`` lists every accepted key once, under its canonical name (nested members dotted:
``sglang.max_prefill_tokens``), with its older spellings and the ``EngineArgs`` field it sets, or
``None`` when the key has no effect in plansim; a backend's own keys (its ``sglang`` block, ...)
come from its declaration (``plansim.sim.schedulers.base.BackendKeys``). No key is silently
ignored: ``normalise`` returns the no-effect keys it met with a value (null is a key left unset),
and ``plansim.sim.deployment`` names them in one warning at start-up.
A key that is not listed fails with its name.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from dataclasses import dataclass
from typing import Any

from plansim.errors import unknown_key
from plansim.params import params_of
from plansim.sim.schedulers import SCHEDULERS

NO_EFFECT = None


@dataclass(frozen=True, slots=True)
class EngineKey:
    """One accepted key. ``name``: canonical (dotted for a member of a nested block);
    ``field``: the ``EngineArgs`` field it sets (dotted for a nested model's field), ``None`` when
    it has no effect here; ``aliases``: older flat spellings; ``convert``: value mapping applied
    on the way in; ``why``: what the key does in the reference, for the no-effect warning."""

    name: str
    field: str | None
    aliases: tuple[str, ...] = ()
    convert: Callable[[Any], Any] | None = None
    why: str = ""


def _worker_type_from_mode(value: Any) -> Any:
    return {"agg": "aggregated"}.get(value, value) if isinstance(value, str) else value


def _accept_rates(value: Any) -> Any:
    """``"0.8,0.5"`` (the reference's spelling) or a list -> a tuple of floats."""
    if isinstance(value, str):
        try:
            return tuple(float(p) for p in value.split(",") if p.strip())
        except ValueError:
            raise ValueError(f"expected comma-separated numbers, got {value!r}") from None
    return value


# Memory fractions are modelled only where they matter (plansim.aic.engine_fields).
_AIC_SIZED = "memory fraction, sizes num_gpu_blocks with an aic timing model when it is unset"


def _k(
    name: str,
    field: str | None = "",
    *aliases: str,
    convert: Callable[[Any], Any] | None = None,
    why: str = "",
) -> EngineKey:
    return EngineKey(name, name if field == "" else field, aliases, convert, why)


def _respelt(spellings: Mapping[Any, Any]) -> Callable[[Any], Any]:
    """A value mapping that turns an older spelling of a value into today's."""
    return lambda value: spellings.get(value, value) if isinstance(value, Hashable) else value


def _backend_keys() -> tuple[EngineKey, ...]:
    """Every backend's own keys (``plansim.sim.schedulers.base.BackendKeys``): its block's
    members (older flat spelling ``<backend>_<member>``) and its top-level engine keys."""
    keys: list[EngineKey] = []
    for backend, cls in SCHEDULERS.items():
        for knob in params_of(cls.Knobs):
            name = f"{backend}.{knob.name}"
            spellings = cls.value_aliases.get(knob.name)
            keys.append(
                _k(
                    name,
                    name,
                    f"{backend}_{knob.name}",
                    convert=_respelt(spellings) if spellings else None,
                )
            )
        keys += [
            _k(f"{backend}.{member}", shared, f"{backend}_{member}")
            for member, shared in cls.block_aliases.items()
        ]
        keys += [_k(knob.name) for knob in params_of(cls.EngineKnobs)]
    return tuple(keys)


# Canonical 1.6.1 keys first (engine block, then top level, then the dynamo block), then the
# keys only older versions know.
KEYS: tuple[EngineKey, ...] = (
    _k("backend", "engine_type", "engine_type"),
    _k("num_gpu_blocks", "num_gpu_blocks", "num_gpu_blocks_override"),
    _k("block_size"),
    _k("max_model_len"),
    _k("max_num_seqs"),
    _k("max_num_batched_tokens"),
    _k(
        "prefill_schedule_interval",
        NO_EFFECT,
        why="live vLLM mocker's prefill cadence; the reference replay's timings do not depend on "
        "it either",
    ),
    _k("enable_prefix_caching"),
    _k("enable_chunked_prefill"),
    _k("speedup_ratio"),
    _k("decode_speedup_ratio"),
    _k("aic_nextn", "aic_nextn", "ais_nextn"),
    _k(
        "aic_nextn_accept_rates",
        "aic_nextn_accept_rates",
        "ais_nextn_accept_rates",
        convert=_accept_rates,
    ),
    _k("aic_mtp_seed", "aic_mtp_seed", "ais_mtp_seed"),
    _k("worker_type", "worker_type", "disaggregation_mode", convert=_worker_type_from_mode),
    _k("preemption_mode"),
    _k("emit_kv_events", NO_EFFECT, why="publishes KV events to a live router"),
    _k("emit_kv_token_ids", NO_EFFECT, why="adds token ids to published KV events"),
    _k("kv_transfer_bytes_per_token", "kv_bytes_per_token", "kv_bytes_per_token"),
    _k("kv_cache_bytes_per_token"),
    _k("kv_cache_groups", NO_EFFECT, why="hybrid-attention KV cache groups"),
    _k("kv_cache_capacity_bytes", NO_EFFECT, why="KV capacity of hybrid-attention cache groups"),
    _k("native_host_offload.scope", NO_EFFECT, why="host offload sharing scope"),
    _k(
        "native_host_offload.num_host_blocks",
        "native_host_offload.num_host_blocks",
        "num_host_blocks",
    ),
    _k(
        "native_host_offload.d2h_bandwidth_gbps",
        "native_host_offload.d2h_bandwidth_gbps",
        "host_offload_d2h_bandwidth_gbps",
    ),
    _k(
        "native_host_offload.h2d_bandwidth_gbps",
        "native_host_offload.h2d_bandwidth_gbps",
        "host_offload_h2d_bandwidth_gbps",
    ),
    _k(
        "native_host_offload.shared_d2h_bandwidth_gbps",
        NO_EFFECT,
        why="host offload bandwidth shared across ranks",
    ),
    _k(
        "native_host_offload.shared_h2d_bandwidth_gbps",
        NO_EFFECT,
        why="host onboard bandwidth shared across ranks",
    ),
    _k(
        "native_host_offload.latency_to_first_byte_ms", NO_EFFECT, why="host transfer start latency"
    ),
    _k("native_host_offload.kv_layout_id", NO_EFFECT, why="KV layout identity"),
    _k("state_cache", NO_EFFECT, why="recurrent-state cache of hybrid models"),
    _k("prefix_match_unit", NO_EFFECT, why="state-cache prefix match granularity"),
    _k("g3_offload", NO_EFFECT, why="shared G3 KV offload tier"),
    _k("kv_transfer_bandwidth"),
    _k("kv_transfer_timing_mode"),
    _k("timing_model"),
    *_backend_keys(),
    # Top level of the canonical form.
    _k("dp_size", "dp_size", "data_parallel_size"),
    _k("tensor_parallel_size", "tensor_parallel_size", "aic_tp_size", "ais_tp_size"),
    _k("startup_time"),
    _k("startup_time_cv"),  # plansim extension: cold-start realism (EngineArgs)
    _k("first_pass_delay_s"),  # plansim extension
    _k("async_scheduling"),  # plansim extension, vLLM's key name
    _k("num_gpu_blocks_is_explicit", NO_EFFECT, why="marks num_gpu_blocks as user-set"),
    _k("gpu_memory_utilization", why=f"vLLM {_AIC_SIZED}"),
    _k("mem_fraction_static", why=f"SGLang {_AIC_SIZED}"),
    _k("free_gpu_memory_fraction", why=f"TensorRT-LLM {_AIC_SIZED}"),
    _k("cuda_graph_reserved_bytes", NO_EFFECT, why="KV capacity estimation"),
    _k(
        "dynamo.enable_local_indexer",
        NO_EFFECT,
        "enable_local_indexer",
        why="worker-local KV indexer of a live worker",
    ),
    _k(
        "dynamo.bootstrap_port",
        NO_EFFECT,
        "bootstrap_port",
        "bootstrap_ports",
        why="live disaggregated rendezvous port",
    ),
    _k(
        "dynamo.handoff_session_timeout_ms",
        NO_EFFECT,
        "handoff_session_timeout_ms",
        why="live disaggregated handoff timeout",
    ),
    _k("dynamo.reasoning", NO_EFFECT, "reasoning", why="reasoning-token output of a live worker"),
    _k(
        "dynamo.response_replay_trace_path",
        NO_EFFECT,
        "response_replay_trace_path",
        why="output-token replay of a live worker",
    ),
    _k(
        "dynamo.zmq_kv_events_port",
        NO_EFFECT,
        "zmq_kv_events_port",
        "zmq_kv_events_ports",
        why="live KV event publishing",
    ),
    _k(
        "dynamo.zmq_replay_port",
        NO_EFFECT,
        "zmq_replay_port",
        "zmq_replay_ports",
        why="live KV event replay",
    ),
    _k(
        "dynamo.router_queue_policy",
        NO_EFFECT,
        "router_queue_policy",
        why="queue policy a live worker advertises (the router's own key is modelled)",
    ),
    # Only older versions.
    _k("is_prefill", "is_prefill", "is_prefill_worker"),
    _k("is_decode", "is_decode", "is_decode_worker"),
    _k("planner_profile_data"),
    _k("watermark", NO_EFFECT, why="vLLM KV watermark"),
    _k("model_name", NO_EFFECT, why="served model name"),
    _k("model_path", NO_EFFECT, why="tokenizer path"),
    _k("has_perf_model", NO_EFFECT, why="older marker of a loaded profile"),
    _k(
        "ais_perf_model",
        NO_EFFECT,
        "aic_perf_model",
        why="AIS timing from the flat ais_* identity; use timing_model",
    ),
    _k(
        "ais_perf_config",
        NO_EFFECT,
        "aic_perf_config",
        why="canonical AIS estimator identity; use timing_model",
    ),
    _k("aic_backend", NO_EFFECT, "ais_backend", why="AIS estimator identity"),
    _k("aic_system", NO_EFFECT, "ais_system", why="AIS estimator identity"),
    _k("aic_backend_version", NO_EFFECT, "ais_backend_version", why="AIS estimator identity"),
    _k("aic_model_path", NO_EFFECT, "ais_model_path", why="AIS estimator identity"),
    _k("aic_moe_tp_size", NO_EFFECT, "ais_moe_tp_size", why="AIS estimator identity"),
    _k("aic_moe_ep_size", NO_EFFECT, "ais_moe_ep_size", why="AIS estimator identity"),
    _k("aic_attention_dp_size", NO_EFFECT, "ais_attention_dp_size", why="AIS estimator identity"),
    _k("aic_gemm_dtype", NO_EFFECT, "ais_gemm_dtype", why="AIS estimator identity"),
    _k("aic_moe_dtype", NO_EFFECT, "ais_moe_dtype", why="AIS estimator identity"),
    _k("aic_fmha_dtype", NO_EFFECT, "ais_fmha_dtype", why="AIS estimator identity"),
    _k("aic_kv_cache_dtype", NO_EFFECT, "ais_kv_cache_dtype", why="AIS estimator identity"),
    _k("aic_comm_dtype", NO_EFFECT, "ais_comm_dtype", why="AIS estimator identity"),
    _k("kv_cache_dtype", NO_EFFECT, why="derives kv_bytes_per_token from a model config"),
    _k("num_g2_blocks", NO_EFFECT, why="KVBM host tier"),
    _k("num_g3_blocks", NO_EFFECT, why="KVBM disk tier"),
    _k("enable_g4_storage", NO_EFFECT, why="KVBM object-storage tier"),
    _k("offload_batch_size", NO_EFFECT, why="KVBM offload batching"),
    _k("bandwidth_g1_to_g2_gbps", NO_EFFECT, why="KVBM tier bandwidth"),
    _k("bandwidth_g2_to_g1_gbps", NO_EFFECT, why="KVBM tier bandwidth"),
    _k("bandwidth_g2_to_g3_gbps", NO_EFFECT, why="KVBM tier bandwidth"),
    _k("bandwidth_g3_to_g2_gbps", NO_EFFECT, why="KVBM tier bandwidth"),
    _k("bandwidth_g2_to_g4_gbps", NO_EFFECT, why="KVBM tier bandwidth"),
    _k("bandwidth_g4_to_g2_gbps", NO_EFFECT, why="KVBM tier bandwidth"),
    _k("bandwidth_g3_to_g4_gbps", NO_EFFECT, why="KVBM tier bandwidth"),
    _k("sglang_generate", NO_EFFECT, why="serves SGLang's native /generate endpoint"),
)

_BY_NAME = {k.name: k for k in KEYS}
_BY_SPELLING: dict[str, EngineKey] = {}
for _key in KEYS:
    for _spelling in (_key.name, *_key.aliases):
        _BY_SPELLING[_spelling] = _key
# Nested blocks (``sglang: {...}``): their members are the keys (``sglang.max_prefill_tokens``).
BLOCKS = frozenset(name.partition(".")[0] for name in _BY_NAME if "." in name)


def accepted_spellings() -> tuple[str, ...]:
    """Every key spelling the loader accepts (a block member dotted: ``sglang.page_size``)."""
    return tuple(_BY_SPELLING)


def key(spelling: str) -> EngineKey:
    """The accepted key a spelling names (``KeyError`` for an unknown one)."""
    return _BY_SPELLING[spelling]


@dataclass(frozen=True, slots=True)
class NormalisedEngine:
    """``fields``: ``EngineArgs`` field values (nested models as mappings); ``no_effect``: the
    canonical names of the given keys that have no effect here, sorted."""

    fields: dict[str, Any]
    no_effect: tuple[str, ...]


class EngineKeyError(ValueError):
    """A bad engine key: ``path`` names it as the user wrote it (dotted), ``reason`` says why."""

    def __init__(self, path: str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = path
        self.reason = reason


def normalise(raw: Mapping[str, Any]) -> NormalisedEngine:
    """Map an engine config in any accepted form to ``EngineArgs`` fields; raises
    ``EngineKeyError`` for an unknown key, two spellings that disagree or a bad value. Keys beside
    a wrapped
    ``engine`` block override it (that is how dotted overrides reach a wrapped file)."""
    data = dict(raw)
    fields: dict[str, Any] = {}
    no_effect: set[str] = set()
    wrapped = data.pop("engine") if isinstance(data.get("engine"), Mapping) else None
    if wrapped is not None:
        _normalise_level(wrapped, "engine.", fields, no_effect)
    _normalise_level(data, "", fields, no_effect)
    return NormalisedEngine(fields, tuple(sorted(no_effect)))


def _normalise_level(
    data: Mapping[str, Any], prefix: str, fields: dict[str, Any], no_effect: set[str]
) -> None:
    """Normalise one level's keys into ``fields`` (overwriting what an outer level set); two
    spellings of one field at this level must agree."""
    given: dict[str, str] = {}  # field -> the key of this level that set it

    def put(key: EngineKey, where: str, value: Any) -> None:
        if key.convert is not None:
            try:
                value = key.convert(value)
            except ValueError as exc:
                raise EngineKeyError(where, str(exc)) from None
        if key.field is None:
            if value is not None:  # null is the key left unset: nothing to warn about
                no_effect.add(key.name)
            return
        if key.field in given and _get(fields, key.field) != value:
            raise EngineKeyError(where, f"disagrees with {given[key.field]}")
        given[key.field] = where
        _set(fields, key.field, value)

    for spelling, value in data.items():
        where = prefix + spelling
        if spelling not in BLOCKS:
            key = _BY_SPELLING.get(spelling)
            if key is None:
                raise EngineKeyError(where, unknown_key(spelling, [*_BY_SPELLING, *BLOCKS]))
            put(key, where, value)
            continue
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise EngineKeyError(where, "expected a mapping")
        for member, member_value in value.items():
            member_key = _BY_NAME.get(f"{spelling}.{member}")
            if member_key is None:
                members = [n.partition(".")[2] for n in _BY_NAME if n.startswith(f"{spelling}.")]
                raise EngineKeyError(f"{where}.{member}", unknown_key(member, members))
            put(member_key, f"{where}.{member}", member_value)


def _get(fields: Mapping[str, Any], dotted: str) -> Any:
    node: Any = fields
    for part in dotted.split("."):
        node = node.get(part) if isinstance(node, Mapping) else None
    return node


def _set(fields: dict[str, Any], dotted: str, value: Any) -> None:
    *parents, last = dotted.split(".")
    node = fields
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value


# -- writing engine args back: in the input's spellings, or as Dynamo 1.6.1's canonical file --

# Top-level keys of the canonical file, beside its ``engine`` block (KEYS lists them after the
# engine block's keys); ``dynamo.*`` keys form its ``dynamo`` block; KEYS from ``is_prefill`` on
# are known only to older versions.
_TOP_LEVEL = frozenset(
    {
        "dp_size",
        "tensor_parallel_size",
        "startup_time",
        "num_gpu_blocks_is_explicit",
        "gpu_memory_utilization",
        "mem_fraction_static",
        "free_gpu_memory_fraction",
        "cuda_graph_reserved_bytes",
    }
)
_CANONICAL_KEYS = KEYS[: next(i for i, k in enumerate(KEYS) if k.name == "is_prefill")]
# Fields that are members of a nested block (``sglang.max_prefill_tokens``).
_NESTED = frozenset(k.field.partition(".")[0] for k in KEYS if k.field and "." in k.field)


def _key_of_field() -> dict[str, EngineKey]:
    """Each modelled field's key: the first canonical one, else the first older one."""
    out: dict[str, EngineKey] = {}
    for k in (*_CANONICAL_KEYS, *KEYS[len(_CANONICAL_KEYS) :]):
        if k.field is not None:
            out.setdefault(k.field, k)
    return out


def field_values(dump: Mapping[str, Any]) -> dict[str, Any]:
    """An ``EngineArgs`` dump (nested blocks as mappings) as dotted field -> value."""
    out: dict[str, Any] = {}
    for name, value in dump.items():
        if name in _NESTED and isinstance(value, Mapping):
            out.update({f"{name}.{member}": v for member, v in value.items()})
        else:
            out[name] = value
    return out


def spellings(raw: Mapping[str, Any]) -> dict[str, str]:
    """Field -> the spelling an engine config (flat, wrapped or mixed) gave it, dotted for a
    block member (``sglang.page_size``); the keys it does not know are left out."""
    out: dict[str, str] = {}
    levels = [raw.get("engine")] if isinstance(raw.get("engine"), Mapping) else []
    for level in (*levels, raw):
        for spelling, value in level.items():
            if spelling in BLOCKS and isinstance(value, Mapping):
                pairs = [
                    (f"{spelling}.{member}", _BY_NAME.get(f"{spelling}.{member}"))
                    for member in value
                ]
            else:
                pairs = [(spelling, _BY_SPELLING.get(spelling))]
            for written, k in pairs:
                if k is not None and k.field is not None:
                    out[k.field] = written
    return out


def spelled(dump: Mapping[str, Any], given: Mapping[str, str]) -> dict[str, Any]:
    """An ``EngineArgs`` dump as an engine config in the spellings ``given`` (``spellings``),
    canonical ones for the other fields; block members nest under their block."""
    names = _key_of_field()
    out: dict[str, Any] = {}
    for field, value in field_values(dump).items():
        written = given.get(field) or (names[field].name if field in names else field)
        _set(out, written, value)
    return out


def canonical_file(dump: Mapping[str, Any], **defaults: Any) -> tuple[dict[str, Any], list[str]]:
    """An ``EngineArgs`` dump as Dynamo 1.6.1's canonical engine config (what its mocker's
    normaliser writes: ``{"engine": {...}, "dp_size": ..., "dynamo": {...}}``), with
    ``defaults`` (canonical names) for keys the dump lacks; and the fields it has no canonical
    key for (plansim's own, such as ``timing_model``, or older-only), left out."""
    canonical: dict[str, str] = {}
    for k in _CANONICAL_KEYS:
        if k.field is not None:
            canonical.setdefault(k.field, k.name)  # the first of two keys of one field
    canonical.pop("timing_model", None)  # plansim's registry of timing models, not Dynamo's
    out: dict[str, Any] = {"engine": {}}
    left_out = []
    values = {**{_BY_NAME[n].field: v for n, v in defaults.items()}, **field_values(dump)}
    for field, value in values.items():
        name = canonical.get(field)
        if name is None:
            left_out.append(field)
        elif name in _TOP_LEVEL or name.startswith("dynamo."):
            _set(out, name, value)
        else:
            _set(out["engine"], name, value)
    return out, sorted(left_out)
