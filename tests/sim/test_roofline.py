"""The roofline timing model: work counts of a small config computed by hand, the roofline rule,
the model configs carried as data, and the ``timing_model`` spec."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from plansim.errors import ConfigError
from plansim.sim.deployment import build_deployment
from plansim.sim.timing import make_timing_model
from plansim.sim.timing.roofline import (
    GIB,
    GPUS,
    GpuSpec,
    ModelShape,
    RooflineTiming,
    kv_capacity_tokens,
    load_model_config,
    pass_work,
)

CONFIGS = Path(__file__).resolve().parents[1] / "data" / "model_configs"

# A small dense model: 2 layers, hidden 8, 2 heads of 4, 1 KV head, MLP 16, vocabulary 10.
SMALL = ModelShape(layers=2, hidden=8, heads=2, kv_heads=1, head_dim=4, intermediate=16, vocab=10)
# By hand: attention q 8x8, k and v 8x4 each, o 8x8 -> 64 + 32 + 32 + 64 = 192; MLP 3 x 8 x 16 =
# 384; norms 2 x 8 = 16; a layer 592; two layers 1184, embeddings and head 2 x 80, final norm 8.
SMALL_LAYER = 592
SMALL_TOTAL = 2 * 592 + 160 + 8


def test_parameter_counts_of_a_small_config_by_hand():
    assert SMALL.attention_params == 192
    assert SMALL.expert_params == 384
    assert SMALL.layer_params == SMALL_LAYER
    assert SMALL.total_params == SMALL_TOTAL
    # K and V of 1 head of 4 over 2 layers, 2 bytes each: 2 x 2 x 1 x 4 x 2.
    assert SMALL.kv_bytes_per_token() == 32


def test_pass_work_of_a_small_config_by_hand():
    # 3 tokens of 2 requests attending over 5 pairs, reading 4 KV tokens, writing 3.
    work = pass_work(
        SMALL, tokens=3, sequences=2, attention_pairs=5, kv_read_tokens=4, kv_write_tokens=3
    )
    # Linear: 2 x (3 tokens x 2 layers x 592 + 2 heads-of-LM x 80) = 2 x (3552 + 160) = 7424.
    assert work.linear_flops == 7424
    # Weights read once: (2 x 592 + 80) x 2 bytes = 2528 (the input embedding is a gather).
    assert work.weight_bytes == 2528
    # Attention: 4 x 2 layers x 2 heads x 4 x 5 pairs = 320.
    assert work.attention_flops == 320
    # KV: (4 + 3) tokens x 32 bytes.
    assert work.kv_bytes == 224
    assert work.allreduces == 0


def test_tensor_parallel_splits_the_work_and_adds_two_allreduces_a_layer():
    shape = ModelShape(
        layers=2, hidden=8, heads=2, kv_heads=2, head_dim=4, intermediate=16, vocab=10
    )
    one = pass_work(
        shape, tokens=3, sequences=2, attention_pairs=5, kv_read_tokens=4, kv_write_tokens=3
    )
    two = pass_work(
        shape, tokens=3, sequences=2, attention_pairs=5, kv_read_tokens=4, kv_write_tokens=3, tp=2
    )
    assert two.linear_flops == one.linear_flops / 2
    assert two.weight_bytes == one.weight_bytes / 2
    assert two.attention_flops == one.attention_flops / 2
    assert two.kv_bytes == one.kv_bytes / 2
    assert (two.allreduces, two.allreduce_bytes) == (4, 3 * 8 * 2)


def test_kv_heads_fewer_than_tp_are_replicated():
    # One KV head on 2 GPUs: each GPU holds it whole.
    two = pass_work(
        SMALL, tokens=1, sequences=1, attention_pairs=0, kv_read_tokens=10, kv_write_tokens=0, tp=2
    )
    assert two.kv_bytes == 10 * 32


def test_moe_reads_the_experts_its_tokens_route_to():
    moe = ModelShape(
        layers=1,
        hidden=8,
        heads=2,
        kv_heads=2,
        head_dim=4,
        intermediate=16,
        vocab=10,
        experts=4,
        experts_per_token=2,
    )
    # One token touches 2 of 4 experts: E x (1 - (1 - k/E)^1) = 2; two tokens 4 x (1 - 1/4) = 3.
    one = pass_work(
        moe, tokens=1, sequences=1, attention_pairs=0, kv_read_tokens=0, kv_write_tokens=0
    )
    two = pass_work(
        moe, tokens=2, sequences=1, attention_pairs=0, kv_read_tokens=0, kv_write_tokens=0
    )
    attention, expert, router, norms = 256, 384, 32, 16
    assert one.weight_bytes == (attention + 2 * expert + router + norms + 80) * 2
    assert two.weight_bytes == (attention + 3 * expert + router + norms + 80) * 2
    # Compute is per token: k experts each.
    per_token = attention + 2 * expert + router + norms
    assert two.linear_flops == 2 * (2 * per_token + 80)


GPU = GpuSpec(
    "toy",
    peak_tflops=1.0,
    memory_bandwidth_gbps=1.0,
    memory_gib=1.0,
    interconnect_gbps=1.0,
    source="test",
)


def test_each_group_takes_the_longer_of_compute_and_memory():
    # 1 TFLOPS and 1 GB/s at full efficiency: 1e9 FLOPs and 1e6 bytes per ms.
    timing = RooflineTiming(
        SMALL, GPU, compute_efficiency=1.0, memory_efficiency=1.0, step_overhead_ms=0.5
    )
    # Decode of 1 request over 3 KV tokens: linear 2 x (2 x 592 + 80) = 2528 FLOPs (2.5e-6 ms)
    # against 2528 bytes (2.528e-3 ms); attention 4 x 2 x 2 x 4 x 3 = 192 FLOPs against
    # (3 + 1) x 32 = 128 bytes (1.28e-4 ms); plus the step overhead.
    expected = 2528 / 1e6 + 128 / 1e6 + 0.5
    assert timing.decode_ms(1, 3, 3.0, 100) == pytest.approx(max(1.0, expected))
    fast_floor = RooflineTiming(
        SMALL, GPU, compute_efficiency=1.0, memory_efficiency=1.0, step_overhead_ms=2.0
    )
    assert fast_floor.decode_ms(1, 3, 3.0, 100) == pytest.approx(2528e-6 + 128e-6 + 2.0)


def test_efficiencies_divide_the_rates():
    full = RooflineTiming(
        SMALL, GPU, compute_efficiency=1.0, memory_efficiency=1.0, step_overhead_ms=2.0
    )
    half = RooflineTiming(
        SMALL, GPU, compute_efficiency=1.0, memory_efficiency=0.5, step_overhead_ms=2.0
    )
    assert half.decode_ms(1, 3, 3.0, 100) - 2.0 == pytest.approx(
        2 * (full.decode_ms(1, 3, 3.0, 100) - 2.0)
    )


def test_prefill_counts_causal_pairs_over_the_prefix():
    timing = RooflineTiming(
        SMALL, GPU, compute_efficiency=1.0, memory_efficiency=1.0, step_overhead_ms=0.0
    )
    # 2 requests of 3 new tokens over a prefix of 4: pairs 2 x (3 x 4 + 3 x 4 / 2) = 36;
    # KV read 2 x 4, written 6.
    expected = pass_work(
        SMALL, tokens=6, sequences=2, attention_pairs=36, kv_read_tokens=8, kv_write_tokens=6
    )
    assert timing.prefill_ms(6, 2, 7.0, 4.0) == pytest.approx(timing.work_ms(expected))
    assert timing.prefill_ms(0, 0, 0.0, 0.0) == 0.0


def test_bulk_and_table_decode_agree_with_single_passes():
    timing = RooflineTiming(SMALL, GPUS["h100_sxm"], tp=1)
    batch = np.array([1, 4, 9])
    kv = np.array([100, 4_000, 90_000])
    bulk = timing.decode_ms_bulk(batch, kv, kv / batch, 10**6)
    single = [timing.decode_ms(int(b), int(k), k / b, 10**6) for b, k in zip(batch, kv)]
    assert bulk == pytest.approx(single, rel=1e-12)
    table = timing.decode_ms_by_batch(4, np.array([4_000, 8_000]), 10**6)
    assert table == pytest.approx(
        [timing.decode_ms(4, 4_000, 1_000, 10**6), timing.decode_ms(4, 8_000, 2_000, 10**6)],
        rel=1e-12,
    )


def test_mixed_pass_charges_the_weights_once():
    timing = RooflineTiming(SMALL, GPUS["h100_sxm"], step_overhead_ms=1.0)
    added = timing.mixed_decode_ms(8, 8_000, 1_000, 10**6, 512)
    alone = timing.decode_ms(8, 8_000, 1_000, 10**6)
    assert 0.0 <= added < alone


@pytest.mark.parametrize(
    ("folder", "billions"),
    [
        ("meta-llama--Llama-2-7b-hf", 6.74),
        ("meta-llama--Llama-2-70b-hf", 68.98),
        ("codellama--CodeLlama-34b-Instruct-hf", 33.74),
        ("mistralai--Mixtral-8x7B-v0.1", 46.70),
    ],
)
def test_parameter_counts_of_the_carried_configs_match_the_published_sizes(folder, billions):
    # Published sizes: Llama 2 7B 6.74B, 70B 68.98B, Code Llama 34B 33.74B, Mixtral 46.7B.
    shape = ModelShape.from_hf_config(load_model_config(CONFIGS / folder))
    assert shape.total_params / 1e9 == pytest.approx(billions, abs=0.01)


def test_kv_capacity_of_llama2_7b_on_an_h100_by_hand():
    shape = ModelShape.from_hf_config(load_model_config(CONFIGS / "meta-llama--Llama-2-7b-hf"))
    # 0.9 x 80 GiB - 6,738,415,616 x 2 bytes - 2 GiB over 2 x 32 x 32 x 128 x 2 = 524,288 bytes.
    budget = 0.9 * 80 * GIB - 6_738_415_616 * 2 - 2 * GIB
    assert kv_capacity_tokens(shape, GPUS["h100_sxm"]) == int(budget // 524_288)


def test_a_config_missing_a_key_names_it():
    with pytest.raises(ValueError, match="hidden_size"):
        ModelShape.from_hf_config({"num_attention_heads": 2, "num_hidden_layers": 1})


def _deployment(tmp_path: Path, **timing):
    config = tmp_path / "config.json"
    config.write_text(
        json.dumps(
            {
                "hidden_size": 8,
                "num_hidden_layers": 2,
                "num_attention_heads": 2,
                "num_key_value_heads": 1,
                "intermediate_size": 16,
                "vocab_size": 10,
            }
        )
    )
    return build_deployment(
        {"engine": {"timing_model": {"type": "roofline", "path": str(config), **timing}}}
    )


def test_the_timing_model_spec_builds_the_roofline(tmp_path):
    dep = _deployment(tmp_path, gpu="a100_sxm", memory_efficiency=0.5, step_overhead_ms=0.0)
    timing = make_timing_model(dep.engine.effective_timing)
    assert isinstance(timing, RooflineTiming)
    expected = RooflineTiming(SMALL, GPUS["a100_sxm"], memory_efficiency=0.5, step_overhead_ms=0.0)
    assert timing.prefill_ms(64, 1, 64.0, 0.0) == expected.prefill_ms(64, 1, 64.0, 0.0)


@pytest.mark.parametrize(
    ("timing", "message"),
    [
        ({"tp_size": 3}, "tp_size 3 does not divide"),
        ({"gpu": "h300"}, "gpu"),
        ({"memory_efficiency": 1.5}, "memory_efficiency"),
    ],
)
def test_bad_roofline_settings_name_the_key(tmp_path, timing, message):
    with pytest.raises(ConfigError, match=message):
        _deployment(tmp_path, **timing)


def test_a_missing_config_file_is_named(tmp_path):
    with pytest.raises(ConfigError, match="path"):
        build_deployment(
            {"engine": {"timing_model": {"type": "roofline", "path": str(tmp_path / "none.json")}}}
        )
