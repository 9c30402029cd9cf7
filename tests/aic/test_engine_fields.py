"""Engine keys decided by the aic model: KV blocks, handoff bytes, TP and DP; reference keys."""

from __future__ import annotations

import pytest

from plansim.aic.memory import kv_capacity
from plansim.aic.spec import parse_aic_spec
from plansim.errors import ConfigError
from plansim.sim.deployment import EngineArgs, build_deployment

QWEN_TP2 = {"type": "aic", "model": "Qwen/Qwen3-32B", "system": "h200_sxm", "tp_size": 2}


def _capacity(fraction: float, **engine) -> int:
    spec = parse_aic_spec({k: v for k, v in QWEN_TP2.items() if k != "type"})
    return kv_capacity(
        spec,
        block_size=engine.get("block_size", 64),
        max_num_batched_tokens=engine.get("max_num_batched_tokens", 8192),
        max_num_seqs=engine.get("max_num_seqs", 256),
        memory_fraction=fraction,
    ).num_gpu_blocks


def test_unset_blocks_come_from_the_model_with_the_vllm_default_fraction():
    args = EngineArgs.model_validate({"timing_model": QWEN_TP2})
    assert args.num_gpu_blocks == _capacity(0.9)
    assert args.gpus_per_worker == 2 and args.tensor_parallel_size == 2
    assert args.kv_bytes_per_token == 64 * 2 * 8 * 128 * 2


def test_the_backend_memory_fraction_key_sizes_the_cache_and_the_others_are_ignored():
    args = EngineArgs.model_validate(
        {
            "timing_model": QWEN_TP2,
            "gpu_memory_utilization": 0.7,
            "mem_fraction_static": 0.5,
            "max_num_batched_tokens": 4096,
        }
    )
    assert args.num_gpu_blocks == _capacity(0.7, max_num_batched_tokens=4096)
    assert args.no_effect_keys == ("mem_fraction_static",)


def test_given_blocks_win_and_make_every_fraction_key_ineffective():
    args = EngineArgs.model_validate(
        {"timing_model": QWEN_TP2, "num_gpu_blocks": 100, "gpu_memory_utilization": 0.7}
    )
    assert args.num_gpu_blocks == 100
    assert args.no_effect_keys == ("gpu_memory_utilization",)


def test_fraction_keys_without_an_aic_model_have_no_effect():
    assert EngineArgs.model_validate({"gpu_memory_utilization": 0.8}).no_effect_keys == (
        "gpu_memory_utilization",
    )


def test_a_tensor_parallel_size_that_contradicts_the_model_is_refused():
    with pytest.raises(
        ConfigError, match=r"engine: tensor_parallel_size 4 differs from timing_model.tp_size 2"
    ):
        build_deployment({"engine": {"timing_model": QWEN_TP2, "tensor_parallel_size": 4}})


def test_attention_dp_sets_the_ranks_per_worker():
    moe = {
        "type": "aic",
        "model": "Qwen/Qwen3-30B-A3B",
        "system": "h200_sxm",
        "tp_size": 1,
        "attention_dp_size": 2,
        "moe_ep_size": 2,
    }
    args = EngineArgs.model_validate({"timing_model": moe})
    assert args.dp_size == 2 and args.gpus_per_worker == 2


def test_aic_errors_name_the_key_beside_type():
    with pytest.raises(
        ConfigError, match=r"^deploy.yaml: engine\.timing_model\.tp_size: tp_size 3 "
    ):
        build_deployment(
            {"engine": {"timing_model": {**QWEN_TP2, "tp_size": 3}}}, source="deploy.yaml"
        )


def test_without_the_extra_an_aic_model_is_one_line_naming_it(monkeypatch, run_cli, tmp_path):
    from plansim.aic import sdk

    monkeypatch.setattr(sdk, "sdk_version", lambda: None)
    config = tmp_path / "deploy.yaml"
    config.write_text(
        "engine:\n  timing_model: {type: aic, model: Qwen/Qwen3-32B, system: h200_sxm}\n"
    )
    trace = tmp_path / "t.jsonl"
    trace.write_text('{"timestamp": 0, "input_length": 10, "output_length": 2, "hash_ids": [1]}\n')
    code, _out, err = run_cli(
        "replay", "run", str(trace), "--config", str(config), "--out", str(tmp_path / "out")
    )
    assert code == 2
    assert err == (
        f"plansim: {config}:2: engine.timing_model: the aic timing model needs "
        "AIConfigurator, which is not installed: pip install 'plansim[aic]'\n"
    )
    assert not (tmp_path / "out").exists()


def test_a_dump_validates_back_to_the_same_engine():
    args = EngineArgs.model_validate({"timing_model": QWEN_TP2, "max_num_seqs": 64})
    assert "num_gpu_blocks" not in args.model_dump()
    assert args.model_dump()["derived_from_model"] == {
        "kv_bytes_per_token": args.kv_bytes_per_token,
        "num_gpu_blocks": args.num_gpu_blocks,
        "tensor_parallel_size": 2,
    }
    assert args.model_dump()["timing_model"] == {
        **args.timing_model.aic.model_dump(),
        "type": "aic",
    }
    assert EngineArgs.model_validate(args.model_dump()) == args


def test_a_dump_with_another_system_or_tp_decides_the_model_keys_afresh():
    dump = EngineArgs.model_validate({"timing_model": QWEN_TP2}).model_dump()
    dump["timing_model"] = {**dump["timing_model"], "tp_size": 1}
    args = EngineArgs.model_validate(dump)
    assert (args.tensor_parallel_size, args.gpus_per_worker) == (1, 1)
    spec = parse_aic_spec({"model": "Qwen/Qwen3-32B", "system": "h200_sxm"})
    assert (
        args.num_gpu_blocks
        == kv_capacity(
            spec, block_size=64, max_num_batched_tokens=8192, max_num_seqs=256, memory_fraction=0.9
        ).num_gpu_blocks
    )


def test_a_dump_with_explicit_blocks_keeps_them():
    dump = EngineArgs.model_validate({"timing_model": QWEN_TP2}).model_dump()
    assert EngineArgs.model_validate({**dump, "num_gpu_blocks": 77}).num_gpu_blocks == 77
