"""KV capacity from the model: a hand computation from Qwen3-32B's published config.json."""

from __future__ import annotations

import math

import pytest

from plansim.aic.memory import kv_capacity
from plansim.aic.spec import parse_aic_spec
from plansim.errors import ConfigError

# Qwen/Qwen3-32B config.json (Hugging Face): bfloat16 weights and KV cache.
LAYERS, HIDDEN, INTERMEDIATE, VOCAB = 64, 5120, 25600, 151936
HEADS, KV_HEADS, HEAD_DIM = 64, 8, 128
BF16 = 2
# h200_sxm.yaml in AIConfigurator: gpu.mem_capacity, misc.other_mem, misc.nccl_mem[tp].
H200_BYTES, OTHER_BYTES, NCCL_BYTES = 151397597184, 3758096384, {1: 0, 2: 358612992}
# AIConfigurator's activation coefficient for the LLAMA family (Qwen3 dense), per TP.
ACTIVATION_COEFFICIENT = {1: 11, 2: 6.5}


def _hand_capacity(tp: int, *, fraction: float, budget_tokens: int, block_size: int) -> dict:
    q, kv, o = (
        HIDDEN * HEADS * HEAD_DIM,
        2 * HIDDEN * KV_HEADS * HEAD_DIM,
        HEADS * HEAD_DIM * HIDDEN,
    )
    mlp = 3 * HIDDEN * INTERMEDIATE  # gate, up, down
    params = LAYERS * (q + kv + o + mlp) + 2 * VOCAB * HIDDEN  # untied embedding and LM head
    weights = params * BF16 / tp
    activations = 2 * budget_tokens * HEADS * HEAD_DIM * ACTIVATION_COEFFICIENT[tp]
    kv_per_token = LAYERS * 2 * math.ceil(KV_HEADS / tp) * HEAD_DIM * BF16
    budget = fraction * H200_BYTES - (weights + activations + NCCL_BYTES[tp] + OTHER_BYTES)
    tokens = int(budget // kv_per_token)
    return {
        "weights": weights,
        "kv_per_token": kv_per_token,
        "tokens": tokens,
        "blocks": tokens // block_size,
    }


@pytest.mark.parametrize("tp", [1, 2])
def test_kv_capacity_of_qwen3_32b_on_h200_matches_the_hand_computation(tp):
    spec = parse_aic_spec({"model": "Qwen/Qwen3-32B", "system": "h200_sxm", "tp_size": tp})
    got = kv_capacity(
        spec, block_size=64, max_num_batched_tokens=8192, max_num_seqs=256, memory_fraction=0.9
    )
    hand = _hand_capacity(tp, fraction=0.9, budget_tokens=8192, block_size=64)
    assert got.weights_bytes == hand["weights"]
    assert got.kv_bytes_per_token_per_gpu == hand["kv_per_token"]
    assert got.kv_tokens == hand["tokens"]
    assert got.num_gpu_blocks == hand["blocks"]


def test_handoff_bytes_per_token_are_what_all_tp_ranks_hold():
    spec = parse_aic_spec({"model": "Qwen/Qwen3-32B", "system": "h200_sxm", "tp_size": 2})
    got = kv_capacity(
        spec, block_size=64, max_num_batched_tokens=8192, max_num_seqs=256, memory_fraction=0.9
    )
    # Two ranks of 4 KV heads each: the whole model's 64 x 2 x 8 x 128 x 2 bytes.
    assert got.handoff_bytes_per_token == LAYERS * 2 * KV_HEADS * HEAD_DIM * BF16


def test_a_lower_memory_fraction_and_a_larger_token_budget_shrink_the_cache():
    spec = parse_aic_spec({"model": "Qwen/Qwen3-32B", "system": "h200_sxm"})
    base = kv_capacity(
        spec, block_size=64, max_num_batched_tokens=8192, max_num_seqs=256, memory_fraction=0.9
    )
    lower = kv_capacity(
        spec, block_size=64, max_num_batched_tokens=8192, max_num_seqs=256, memory_fraction=0.8
    )
    bigger = kv_capacity(
        spec, block_size=64, max_num_batched_tokens=16384, max_num_seqs=256, memory_fraction=0.9
    )
    assert (
        lower.kv_tokens
        == _hand_capacity(1, fraction=0.8, budget_tokens=8192, block_size=64)["tokens"]
    )
    assert (
        bigger.kv_tokens
        == _hand_capacity(1, fraction=0.9, budget_tokens=16384, block_size=64)["tokens"]
    )
    assert lower.kv_tokens < base.kv_tokens and bigger.kv_tokens < base.kv_tokens


def test_a_model_that_does_not_fit_is_one_line():
    spec = parse_aic_spec({"model": "meta-llama/Meta-Llama-3.1-405B", "system": "h200_sxm"})
    with pytest.raises(
        ConfigError,
        match=r"cannot size the KV cache of meta-llama/Meta-Llama-3.1-405B "
        "on h200_sxm .*: no KV budget",
    ) as err:
        kv_capacity(
            spec, block_size=64, max_num_batched_tokens=8192, max_num_seqs=256, memory_fraction=0.9
        )
    assert "\n" not in str(err.value)
