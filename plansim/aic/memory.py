"""KV capacity and GPUs of an engine timed by AIConfigurator, from the model and the GPU.

Per GPU (one tensor-parallel rank), with AIConfigurator's memory model (``estimate_kv_cache``,
the estimate Dynamo's mocker uses when ``num_gpu_blocks`` is unset):

    budget  = memory_fraction x GPU memory - (weights + activations + NCCL + other)
    tokens  = floor(budget / KV bytes per token per GPU)
    num_gpu_blocks = floor(tokens / block_size)

where weights are the model's at that TP and precision, activations
``2 x max_num_batched_tokens x heads x head_dim x c(TP)`` bytes (``c`` a per-family
coefficient), NCCL and other from the system's spec file, and KV bytes per token per GPU
``layers x 2 x ceil(kv_heads / TP) x head_dim x dtype bytes`` for GQA models (the latent width
for MLA models). The memory fraction is the backend's own key: ``gpu_memory_utilization``
(vLLM, default 0.9), ``mem_fraction_static`` (SGLang, 0.88) or ``free_gpu_memory_fraction``
(TRT-LLM, 0.9, a fraction of the memory left after the rest). The disaggregated handoff moves
what every GPU of the prefill worker holds for a token: KV bytes per token per GPU x TP.

Estimates are cached on disk next to the timing tables, keyed by every input.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

from plansim.aic import sdk
from plansim.aic.spec import AicSpec
from plansim.aic.table import cache_dir, input_key
from plansim.io import atomic_write_json

# The memory-fraction key each backend reads, and its default (the reference mocker's).
MEMORY_FRACTION_KEYS = {
    "vllm": ("gpu_memory_utilization", 0.9),
    "sglang": ("mem_fraction_static", 0.88),
    "trtllm": ("free_gpu_memory_fraction", 0.9),
}
MEMORY_FORMAT = 1


@dataclass(frozen=True, slots=True)
class KvCapacity:
    """One GPU's KV cache for a spec (bytes and tokens) and what it implies for the engine."""

    num_gpu_blocks: int
    kv_tokens: int
    kv_bytes_per_token_per_gpu: int
    handoff_bytes_per_token: int
    gpu_memory_bytes: int
    kv_budget_bytes: int
    weights_bytes: int
    activations_bytes: int
    comm_bytes: int
    other_bytes: int


def kv_capacity(
    spec: AicSpec,
    *,
    block_size: int,
    max_num_batched_tokens: int,
    max_num_seqs: int,
    memory_fraction: float,
) -> KvCapacity:
    """The KV capacity of one rank of ``spec`` (cached on disk)."""
    inputs = {
        "format": MEMORY_FORMAT,
        "sdk": sdk.sdk_version(),
        "spec": spec.identity(),
        "block_size": block_size,
        "max_num_batched_tokens": max_num_batched_tokens,
        "max_num_seqs": max_num_seqs,
        "memory_fraction": memory_fraction,
    }
    path = cache_dir() / f"memory-{input_key(inputs)}.json"
    try:
        return KvCapacity(**json.loads(path.read_text(encoding="utf-8"))["capacity"])
    except (OSError, ValueError, KeyError, TypeError):
        pass
    estimate = sdk.kv_cache_estimate(
        spec,
        max_num_tokens=max_num_batched_tokens,
        max_batch_size=max_num_seqs,
        memory_fraction=memory_fraction,
    )
    breakdown = estimate["memory_breakdown"]
    per_gpu = int(estimate["kv_size_per_token_bytes"])
    tokens = int(estimate["total_kv_size_tokens"])
    capacity = KvCapacity(
        num_gpu_blocks=tokens // block_size,
        kv_tokens=tokens,
        kv_bytes_per_token_per_gpu=per_gpu,
        handoff_bytes_per_token=per_gpu * spec.tp_size,
        gpu_memory_bytes=int(estimate["total_gpu_capacity_bytes"]),
        kv_budget_bytes=int(estimate["total_kv_size_bytes"]),
        weights_bytes=int(breakdown["weights_bytes"]),
        activations_bytes=int(breakdown["activations_bytes"]),
        comm_bytes=int(breakdown["comm_overhead_bytes"]),
        other_bytes=int(breakdown["runtime_overhead_bytes"]),
    )
    if capacity.num_gpu_blocks < 1:
        raise ValueError(
            f"{spec.label} leaves room for {tokens} KV tokens per GPU, less than one "
            f"block of {block_size}"
        )
    try:
        atomic_write_json(path, {"inputs": inputs, "capacity": asdict(capacity)})
    except OSError:
        pass  # an unwritable cache only costs the next run the estimate
    return capacity
