"""Engine-config compatibility: the canonical Dynamo 1.6.1 form and the older flat spellings
load, and every accepted key is either modelled or named in the one start-up warning."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from plansim.aic.memory import MEMORY_FRACTION_KEYS
from plansim.errors import ConfigError
from plansim.sim import engine_config
from plansim.sim.deployment import HANDOFF_KEYS, EngineArgs, build_deployment

NPZ = str(Path(__file__).resolve().parent / "reference" / "profiles" / "sample_h200.npz")

# One valid value, other than the default, for every spelling the loader accepts. Adding a key to
# ``engine_config.KEYS`` without a sample here fails the enumeration test below.
SAMPLES = {
    "backend": "sglang",
    "engine_type": "trtllm",
    "num_gpu_blocks": 2048,
    "num_gpu_blocks_override": 2048,
    "block_size": 32,
    "sglang.page_size": 32,
    "sglang_page_size": 32,
    "max_model_len": 4096,
    "max_num_seqs": 8,
    "max_num_batched_tokens": 1024,
    "prefill_schedule_interval": 2,
    "prefill_decode_interval": 2,
    "enable_prefix_caching": False,
    "enable_chunked_prefill": False,
    "speedup_ratio": 2.0,
    "decode_speedup_ratio": 2.0,
    "aic_nextn": 2,
    "ais_nextn": 2,
    "aic_nextn_accept_rates": "0.8,0.5",
    "ais_nextn_accept_rates": "0.8,0.5",
    "aic_mtp_seed": 7,
    "ais_mtp_seed": 7,
    "worker_type": "decode",
    "disaggregation_mode": "decode",
    "preemption_mode": "fifo",
    "emit_kv_events": True,
    "emit_kv_token_ids": True,
    "kv_transfer_bytes_per_token": 1024,
    "kv_bytes_per_token": 1024,
    "kv_cache_bytes_per_token": 1024,
    "kv_cache_groups": [],
    "kv_cache_capacity_bytes": 1,
    "native_host_offload.scope": "rank",
    "native_host_offload.num_host_blocks": 64,
    "num_host_blocks": 64,
    "native_host_offload.d2h_bandwidth_gbps": 16.0,
    "host_offload_d2h_bandwidth_gbps": 16.0,
    "native_host_offload.h2d_bandwidth_gbps": 16.0,
    "host_offload_h2d_bandwidth_gbps": 16.0,
    "native_host_offload.shared_d2h_bandwidth_gbps": 16.0,
    "native_host_offload.shared_h2d_bandwidth_gbps": 16.0,
    "native_host_offload.latency_to_first_byte_ms": 0.1,
    "native_host_offload.kv_layout_id": 1,
    "state_cache": {},
    "prefix_match_unit": 1,
    "g3_offload": {},
    "kv_transfer_bandwidth": 10.0,
    "kv_transfer_timing_mode": "destination_missing",
    "timing_model": {"type": "fixed", "prefill_ms": 1.0, "decode_ms": 1.0},
    "sglang.schedule_policy": "lpm",
    "sglang_schedule_policy": "lpm",
    "sglang.max_prefill_tokens": 4096,
    "sglang_max_prefill_tokens": 4096,
    "sglang.chunked_prefill_size": 2048,
    "sglang_chunked_prefill_size": 2048,
    "sglang.clip_max_new_tokens": 256,
    "sglang_clip_max_new_tokens": 256,
    "sglang.schedule_conservativeness": 0.5,
    "sglang_schedule_conservativeness": 0.5,
    "trtllm.capacity_scheduler_policy": "guaranteed_no_evict",
    "trtllm_capacity_scheduler_policy": "guaranteed_no_evict",
    "dp_size": 2,
    "data_parallel_size": 2,
    "tensor_parallel_size": 4,
    "aic_tp_size": 4,
    "ais_tp_size": 4,
    "startup_time": 30.0,
    "startup_time_cv": 0.2,
    "first_pass_delay_s": 5.0,
    "async_scheduling": True,
    "num_gpu_blocks_is_explicit": True,
    "gpu_memory_utilization": 0.8,
    "mem_fraction_static": 0.8,
    "free_gpu_memory_fraction": 0.8,
    "cuda_graph_reserved_bytes": 1,
    "dynamo.enable_local_indexer": True,
    "enable_local_indexer": True,
    "dynamo.bootstrap_port": 1,
    "bootstrap_port": 1,
    "bootstrap_ports": "1",
    "dynamo.handoff_session_timeout_ms": 1,
    "handoff_session_timeout_ms": 1,
    "dynamo.reasoning": {},
    "reasoning": {},
    "dynamo.response_replay_trace_path": "x",
    "response_replay_trace_path": "x",
    "dynamo.zmq_kv_events_port": 1,
    "zmq_kv_events_port": 1,
    "zmq_kv_events_ports": "1",
    "dynamo.zmq_replay_port": 1,
    "zmq_replay_port": 1,
    "zmq_replay_ports": "1",
    "dynamo.router_queue_policy": "wspt",
    "router_queue_policy": "wspt",
    "is_prefill": True,
    "is_prefill_worker": True,
    "is_decode": True,
    "is_decode_worker": True,
    "planner_profile_data": NPZ,
    "watermark": 0.01,
    "model_name": "m",
    "model_path": "m",
    "has_perf_model": True,
    "ais_perf_model": True,
    "aic_perf_model": True,
    "ais_perf_config": {},
    "aic_perf_config": {},
    "kv_cache_dtype": "fp8",
    "sglang_generate": True,
    "num_g2_blocks": 1,
    "num_g3_blocks": 1,
    "enable_g4_storage": True,
    "offload_batch_size": 1,
    "bandwidth_g1_to_g2_gbps": 1.0,
    "bandwidth_g2_to_g1_gbps": 1.0,
    "bandwidth_g2_to_g3_gbps": 1.0,
    "bandwidth_g3_to_g2_gbps": 1.0,
    "bandwidth_g2_to_g4_gbps": 1.0,
    "bandwidth_g4_to_g2_gbps": 1.0,
    "bandwidth_g3_to_g4_gbps": 1.0,
    **{
        f"{p}_{name}": "x"
        for p in ("aic", "ais")
        for name in (
            "backend",
            "system",
            "backend_version",
            "model_path",
            "moe_tp_size",
            "moe_ep_size",
            "attention_dp_size",
            "gemm_dtype",
            "moe_dtype",
            "fmha_dtype",
            "kv_cache_dtype",
            "comm_dtype",
        )
    },
}


def _backend(spelling: str) -> str | None:
    """The backend a backend-specific key (``sglang.page_size``, ``trtllm_...``) needs."""
    if spelling == "prefill_decode_interval":
        return "sglang"
    for backend in ("sglang", "trtllm"):
        if spelling.startswith((f"{backend}.", f"{backend}_")) and spelling != "sglang_generate":
            return backend
    return None


def _nested(spelling: str, value):
    """The engine mapping that gives ``spelling`` (a dotted block member is written nested),
    with the backend it belongs to."""
    block, dot, member = spelling.partition(".")
    engine = {block: {member: value}} if dot else {spelling: value}
    backend = _backend(spelling)
    if backend is not None:
        engine["backend"] = backend
    if "host" in spelling or spelling == "kv_cache_bytes_per_token":
        # Host offload keys act together: a tier needs its size and its block size.
        engine.setdefault("kv_cache_bytes_per_token", 2048)
        if "num_host_blocks" not in spelling:
            engine.setdefault("native_host_offload", {}).setdefault("num_host_blocks", 64)
    return engine


def _field(args: EngineArgs, dotted: str):
    node = args
    for part in dotted.split("."):
        node = getattr(node, part) if node is not None else None  # an unset block
    return node


def test_every_accepted_key_has_a_sample():
    assert set(SAMPLES) == set(engine_config.accepted_spellings())


# Keys modelled only beside an aic timing model (tests/aic/test_engine_fields.py: without one
# they are named in the warning).
AIC_SIZED = {
    key: {
        "timing_model": {
            "type": "aic",
            "model": "Qwen/Qwen3-32B",
            "system": "h200_sxm",
            "backend": backend,
        }
    }
    for backend, (key, _) in MEMORY_FRACTION_KEYS.items()
}


@pytest.mark.parametrize("spelling", sorted(SAMPLES))
def test_every_accepted_key_is_modelled_or_named_in_the_warning(spelling, caplog):
    key = engine_config.key(spelling)
    engine = {**AIC_SIZED.get(spelling, {}), **_nested(spelling, SAMPLES[spelling])}
    raw = {"engine": engine}
    if key.field in HANDOFF_KEYS:
        # Modelled where a pool hands off (aggregated, they are named in the warning).
        raw["mode"] = "disagg"
    with caplog.at_level(logging.WARNING, logger="plansim.sim.deployment"):
        deployment = build_deployment(raw)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    if key.field is None:
        assert len(warnings) == 1
        assert "no effect" in warnings[0] and f"engine.{key.name}" in warnings[0]
    else:
        assert warnings == []
        value = _field(deployment.engine, key.field)
        if key.field == "timing_model":
            value = value.model_dump(exclude_none=True)
        given = SAMPLES[spelling] if key.convert is None else key.convert(SAMPLES[spelling])
        if key.field == "worker_type":
            given = "decode"  # disaggregation_mode's "decode" is worker_type "decode"
        assert value == given
        if key.name != "trtllm.capacity_scheduler_policy":  # its one value is the default
            assert _field(deployment.engine, key.field) != _field(EngineArgs(), key.field)


def test_canonical_form_as_the_reference_normaliser_writes_it(caplog):
    canonical = {
        "engine": {
            "backend": "vllm",
            "num_gpu_blocks": 4096,
            "block_size": 32,
            "max_model_len": None,
            "max_num_seqs": 64,
            "max_num_batched_tokens": 4096,
            "prefill_schedule_interval": 1,
            "prefill_decode_interval": 0,
            "enable_prefix_caching": True,
            "enable_chunked_prefill": True,
            "speedup_ratio": 1.0,
            "decode_speedup_ratio": 1.0,
            "aic_nextn": None,
            "aic_nextn_accept_rates": None,
            "aic_mtp_seed": 42,
            "worker_type": "prefill",
            "preemption_mode": "lifo",
            "emit_kv_events": False,
            "emit_kv_token_ids": False,
            "kv_transfer_bytes_per_token": 2048,
            "kv_transfer_bandwidth": 50.0,
            "kv_transfer_timing_mode": "full_prompt",
            "timing_model": {"type": "polynomial"},
        },
        "dp_size": 2,
        "tensor_parallel_size": 4,
        "startup_time": 12.0,
        "num_gpu_blocks_is_explicit": False,
        "dynamo": {"enable_local_indexer": False},
    }
    with caplog.at_level(logging.WARNING, logger="plansim.sim.deployment"):
        e = build_deployment({"engine": canonical}).engine
    assert (e.num_gpu_blocks, e.block_size, e.max_num_seqs, e.role) == (4096, 32, 64, "prefill")
    assert (e.kv_bytes_per_token, e.kv_transfer_bandwidth, e.dp_size) == (2048, 50.0, 2)
    assert (e.gpus_per_worker, e.startup_time) == (8, 12.0)
    assert (
        "engine.emit_kv_events" in caplog.text
        and "engine.dynamo.enable_local_indexer" in caplog.text
    )


def test_the_host_block_size_alone_is_named_in_the_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="plansim.sim.deployment"):
        build_deployment({"engine": {"kv_cache_bytes_per_token": 4096}})
    assert "engine.kv_cache_bytes_per_token (sizes host offload blocks" in caplog.text


def test_older_flat_spellings_land_on_the_same_fields():
    old = EngineArgs.model_validate(
        {
            "engine_type": "vllm",
            "is_decode_worker": True,
            "data_parallel_size": 2,
            "ais_tp_size": 2,
            "kv_bytes_per_token": 64,
            "num_gpu_blocks_override": 99,
        }
    )
    new = EngineArgs.model_validate(
        {
            "engine": {
                "backend": "vllm",
                "worker_type": "decode",
                "kv_transfer_bytes_per_token": 64,
                "num_gpu_blocks": 99,
            },
            "dp_size": 2,
            "tensor_parallel_size": 2,
        }
    )
    assert (
        old.role,
        old.dp_size,
        old.gpus_per_worker,
        old.kv_bytes_per_token,
        old.num_gpu_blocks,
    ) == (new.role, new.dp_size, new.gpus_per_worker, new.kv_bytes_per_token, new.num_gpu_blocks)


def test_a_key_beside_the_wrapped_engine_block_overrides_it():
    e = EngineArgs.model_validate(
        {"engine": {"backend": "vllm", "max_num_seqs": 4}, "max_num_seqs": 16}
    )
    assert e.max_num_seqs == 16


@pytest.mark.parametrize(
    "engine, field",
    [
        ({"engine": {"no_such_key": 1}}, "engine.engine.no_such_key"),
        ({"sglang": {"no_such_key": 1}}, "engine.sglang.no_such_key"),
        ({"block_size": 32, "sglang": {"page_size": 16}}, "engine.sglang.page_size"),
        ({"sglang": 3}, "engine.sglang"),
        ({"aic_nextn_accept_rates": "0.8,x"}, "engine.aic_nextn_accept_rates"),
    ],
)
def test_bad_engine_keys_fail_naming_the_key(engine, field):
    with pytest.raises(ConfigError) as err:
        build_deployment({"engine": engine})
    assert err.value.field == field


ROUTER_SAMPLES = {
    "mode": "kv_router",
    "overlap_score_weight": 2.0,
    "router_temperature": 0.5,
    "prefill_load_scale": 0.5,
    "overlap_score_credit": 2.0,
    "overlap_score_credit_decay": 1.0,
    "decode_active_request_weight": 4.0,
    "host_cache_hit_weight": 0.5,
    "router_queue_threshold": 0.5,
    "router_queue_policy": "wspt",
    "router_track_active_blocks": False,
    "router_track_prefill_tokens": False,
    "router_assume_kv_reuse": False,
}


def test_every_router_key_is_modelled_or_named_in_the_warning(caplog):
    from plansim.sim.deployment import NO_EFFECT_ROUTER_KEYS, RouterConfig

    modelled = set(RouterConfig.model_fields) - {"no_effect_keys"}
    assert modelled == set(ROUTER_SAMPLES)
    aliases = {"overlap_score_weight": "prefill_load_scale"}  # deprecated spellings
    for name, value in ROUTER_SAMPLES.items():
        # Under the mode whose knobs they are (other modes name them in the warning).
        router = {"mode": "kv_router", name: value}
        assert (
            getattr(build_deployment({"router": router}).router, aliases.get(name, name)) == value
        )
    with caplog.at_level(logging.WARNING, logger="plansim.sim.deployment"):
        build_deployment({"router": dict.fromkeys(NO_EFFECT_ROUTER_KEYS)})
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert all(f"router.{name} (" in warning for name in NO_EFFECT_ROUTER_KEYS)


def test_a_no_effect_key_left_null_is_not_named(caplog):
    # The reference normaliser writes every key, unset ones as null.
    with caplog.at_level(logging.WARNING, logger="plansim.sim.deployment"):
        build_deployment(
            {
                "engine": {
                    "engine": {"block_size": 32},
                    "cuda_graph_reserved_bytes": None,
                    "emit_kv_events": False,
                }
            }
        )
    assert "engine.emit_kv_events" in caplog.text
    assert "cuda_graph_reserved_bytes" not in caplog.text


def test_handoff_keys_off_the_prefill_side_are_named_in_the_warning(caplog):
    # The reference times the handoff from the prefill engine's args only.
    raw = {
        "mode": "disagg",
        "prefill_engine": {"worker_type": "prefill", "kv_transfer_bandwidth": 64.0},
        "decode_engine": {
            "worker_type": "decode",
            "kv_transfer_bandwidth": 64.0,
            "kv_transfer_timing_mode": "destination_missing",
        },
    }
    with caplog.at_level(logging.WARNING, logger="plansim.sim.deployment"):
        build_deployment(raw)
    assert "decode_engine.kv_transfer_bandwidth (times the disaggregated KV handoff" in caplog.text
    assert "decode_engine.kv_transfer_timing_mode" in caplog.text
    assert "prefill_engine.kv_transfer_bandwidth" not in caplog.text
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="plansim.sim.deployment"):
        build_deployment({"engine": {"kv_transfer_bandwidth": 64.0}})  # aggregated: no handoff
    assert "engine.kv_transfer_bandwidth (times the disaggregated KV handoff" in caplog.text
