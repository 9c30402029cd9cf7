"""``roofline``: pass times computed from a model's Hugging Face ``config.json`` and a GPU's
published peak FLOPS and memory bandwidth, for models and GPUs no measured table covers.

A pass puts ``t`` tokens through the weights (new prompt tokens plus one per decoding request)
and attends over the KV of its requests. Per GPU of a tensor-parallel worker of ``tp`` GPUs,
each of two operation groups takes the longer of its compute and its memory time (a roofline):

- **linear layers**: ``2 x t x active weights / tp`` FLOPs against reading the weights it
  touches, ``weights / tp x dtype_bytes`` (a mixture-of-experts layer reads the experts its
  tokens route to: ``E x (1 - (1 - k/E)^t)`` of ``E`` with ``k`` per token); the LM head runs
  for one token per request;
- **attention**: ``4 x layers x heads x head_dim / tp`` FLOPs per query-key pair against reading
  the context's KV and writing the new tokens' (``kv_bytes_per_token / tp`` each).

Compute runs at ``compute_efficiency x peak``, memory at ``memory_efficiency x bandwidth``.
With ``tp > 1`` each layer adds two ring all-reduces of ``t x hidden x dtype_bytes``:
``2 (tp - 1) / tp x bytes / interconnect bandwidth + allreduce_latency_us``. Every pass adds
``step_overhead_ms`` (the engine's own CPU time a step: scheduling, sampling, output
processing). A mixed pass (prefill and decode requests together) costs what the decoding
requests add to the prefill pass: their tokens through the weights and their attention, once
(``RooflineTiming.mixed_decode_ms``).

The efficiency factors are assumptions, not measurements: the defaults are round figures for a
well-tuned engine on a data-centre GPU (dense GEMMs at about 60 % of peak, memory-bound reads at
about 75 % of the bandwidth, a millisecond of CPU work a step), meant to be calibrated (e.g.
``bench/sim_to_real.py``). ``peak_tflops`` and ``memory_bandwidth_gbps`` override the GPU's.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from plansim.params import param, params_of
from plansim.sim.timing.base import MIN_DECODE_MS, TimingKind

GIB = 1 << 30
# The assumed figures (module docstring) and the defaults of the timing_model keys.
DEFAULTS: dict[str, Any] = {
    "gpu": "h100_sxm",
    "tp_size": 1,
    "compute_efficiency": 0.6,
    "memory_efficiency": 0.75,
    "step_overhead_ms": 1.0,
    "allreduce_latency_us": 10.0,
    "dtype_bytes": 2,
}


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """One GPU's published figures: dense FP16/BF16 tensor peak (TFLOPS, without sparsity),
    memory bandwidth and size, and the per-direction GPU-to-GPU bandwidth (decimal GB/s)."""

    name: str
    peak_tflops: float
    memory_bandwidth_gbps: float
    memory_gib: float
    interconnect_gbps: float
    source: str


# NVIDIA's data sheets; NVLink figures are the total bidirectional bandwidth halved.
GPUS: dict[str, GpuSpec] = {
    g.name: g
    for g in (
        GpuSpec(
            "h100_sxm",
            989.4,
            3350.0,
            80.0,
            450.0,
            "NVIDIA H100 Tensor Core GPU data sheet (SXM5: 1,979 TFLOPS FP16 with sparsity, "
            "3.35 TB/s HBM3, NVLink 900 GB/s)",
        ),
        GpuSpec(
            "h200_sxm",
            989.4,
            4800.0,
            141.0,
            450.0,
            "NVIDIA H200 Tensor Core GPU data sheet (SXM: 4.8 TB/s HBM3e, NVLink 900 GB/s)",
        ),
        GpuSpec(
            "a100_sxm",
            312.0,
            2039.0,
            80.0,
            300.0,
            "NVIDIA A100 Tensor Core GPU data sheet (80GB SXM: 2,039 GB/s, NVLink 600 GB/s)",
        ),
        GpuSpec(
            "l40s",
            362.05,
            864.0,
            48.0,
            32.0,
            "NVIDIA L40S data sheet (FP16 tensor 362.05 TFLOPS dense, 864 GB/s; PCIe Gen4 x16)",
        ),
    )
}


@dataclass(frozen=True, slots=True)
class ModelShape:
    """What the roofline reads from a model config. ``experts`` is 0 for a dense model."""

    layers: int
    hidden: int
    heads: int
    kv_heads: int
    head_dim: int
    intermediate: int
    vocab: int
    experts: int = 0
    experts_per_token: int = 0
    tied_embeddings: bool = False

    @classmethod
    def from_hf_config(cls, config: dict[str, Any]) -> ModelShape:
        """From a Hugging Face ``config.json`` mapping (Llama-, Mistral-, Qwen- and
        Mixtral-style keys); ``ValueError`` naming a missing or unusable key."""

        def need(key: str) -> int:
            value = config.get(key)
            if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
                raise ValueError(f"model config: {key} must be a positive integer, got {value!r}")
            return value

        heads = need("num_attention_heads")
        hidden = need("hidden_size")
        experts = config.get("num_local_experts") or config.get("num_experts") or 0
        moe_sized = experts and "moe_intermediate_size" in config
        intermediate_key = "moe_intermediate_size" if moe_sized else "intermediate_size"
        shape = cls(
            layers=need("num_hidden_layers"),
            hidden=hidden,
            heads=heads,
            kv_heads=need("num_key_value_heads")
            if config.get("num_key_value_heads") is not None
            else heads,
            head_dim=need("head_dim") if config.get("head_dim") else hidden // heads,
            intermediate=need(intermediate_key),
            vocab=need("vocab_size"),
            experts=int(experts),
            experts_per_token=need("num_experts_per_tok") if experts else 0,
            tied_embeddings=bool(config.get("tie_word_embeddings", False)),
        )
        if shape.experts and not 0 < shape.experts_per_token <= shape.experts:
            raise ValueError("model config: num_experts_per_tok must be between 1 and the experts")
        return shape

    @property
    def attention_params(self) -> int:
        """Q, K, V and output projections of one layer."""
        q = self.heads * self.head_dim
        kv = self.kv_heads * self.head_dim
        return self.hidden * (q + 2 * kv) + q * self.hidden

    @property
    def expert_params(self) -> int:
        """One gated MLP (gate, up, down): a dense layer's MLP or one expert."""
        return 3 * self.hidden * self.intermediate

    @property
    def layer_params(self) -> int:
        """All weights of one layer: attention, MLP or experts and router, two norms."""
        mlp = (
            self.expert_params * self.experts + self.hidden * self.experts
            if self.experts
            else self.expert_params
        )
        return self.attention_params + mlp + 2 * self.hidden

    @property
    def total_params(self) -> int:
        embeddings = self.vocab * self.hidden * (1 if self.tied_embeddings else 2)
        return self.layers * self.layer_params + embeddings + self.hidden

    def kv_bytes_per_token(self, dtype_bytes: int = 2) -> int:
        """Keys and values of one token over all layers (the whole worker's)."""
        return 2 * self.layers * self.kv_heads * self.head_dim * dtype_bytes


def load_model_config(path: str | Path) -> dict[str, Any]:
    """A ``config.json`` (or a folder holding one) as a mapping."""
    p = Path(path)
    if p.is_dir():
        p = p / "config.json"
    data = json.loads(p.read_text(encoding="utf-8"))
    if not isinstance(data, dict):  # bad input: check() reports ValueErrors as the path's
        raise ValueError(f"{p}: a model config is a JSON object")
    return data


@dataclass(frozen=True, slots=True)
class PassWork:
    """What one pass asks of one GPU: linear-layer FLOPs and weight bytes, attention FLOPs and
    KV bytes, bytes each all-reduce moves, and how many all-reduces."""

    linear_flops: float
    weight_bytes: float
    attention_flops: float
    kv_bytes: float
    allreduce_bytes: float
    allreduces: int


def pass_work(
    shape: ModelShape,
    *,
    tokens: float,
    sequences: float,
    attention_pairs: float,
    kv_read_tokens: float,
    kv_write_tokens: float,
    tp: int = 1,
    dtype_bytes: int = 2,
) -> PassWork:
    """The work of a pass putting ``tokens`` through the weights for ``sequences`` requests (the
    LM head runs once each), with ``attention_pairs`` query-key pairs over ``kv_read_tokens``
    of context KV, writing ``kv_write_tokens``' KV, on one of ``tp`` GPUs."""
    if shape.experts:
        touched = shape.experts * (1.0 - (1.0 - shape.experts_per_token / shape.experts) ** tokens)
        mlp_active = shape.expert_params * shape.experts_per_token + shape.hidden * shape.experts
        mlp_read = shape.expert_params * touched + shape.hidden * shape.experts
    else:
        mlp_active = mlp_read = shape.expert_params
    per_layer_active = shape.attention_params + mlp_active + 2 * shape.hidden
    per_layer_read = shape.attention_params + mlp_read + 2 * shape.hidden
    head = shape.vocab * shape.hidden
    linear_flops = 2.0 * (tokens * shape.layers * per_layer_active + sequences * head) / tp
    weight_bytes = (shape.layers * per_layer_read + head) * dtype_bytes / tp
    attention_flops = 4.0 * shape.layers * shape.heads * shape.head_dim * attention_pairs / tp
    kv_per_gpu = (
        shape.kv_bytes_per_token(dtype_bytes) * math.ceil(shape.kv_heads / tp) / shape.kv_heads
    )
    kv_bytes = (kv_read_tokens + kv_write_tokens) * kv_per_gpu
    allreduces = 2 * shape.layers if tp > 1 else 0
    return PassWork(
        linear_flops,
        weight_bytes,
        attention_flops,
        kv_bytes,
        tokens * shape.hidden * dtype_bytes,
        allreduces,
    )


def kv_capacity_tokens(
    shape: ModelShape,
    gpu: GpuSpec,
    *,
    tp: int = 1,
    memory_utilization: float = 0.9,
    reserved_gib: float = 2.0,
    dtype_bytes: int = 2,
) -> int:
    """KV tokens one worker holds: per GPU, ``memory_utilization x memory`` less its share of
    the weights and ``reserved_gib`` (activations, CUDA graphs, communication buffers), over
    the KV bytes a token takes on that GPU; 0 when the weights do not fit."""
    budget = (
        memory_utilization * gpu.memory_gib * GIB
        - shape.total_params * dtype_bytes / tp
        - reserved_gib * GIB
    )
    per_token = (
        shape.kv_bytes_per_token(dtype_bytes) * math.ceil(shape.kv_heads / tp) / shape.kv_heads
    )
    return max(0, int(budget // per_token))


class RooflineTiming:
    """Pass times in ms of one model on ``tp`` GPUs of one kind; see the module docstring."""

    def __init__(
        self,
        shape: ModelShape,
        gpu: GpuSpec,
        *,
        tp: int = 1,
        compute_efficiency: float = DEFAULTS["compute_efficiency"],
        memory_efficiency: float = DEFAULTS["memory_efficiency"],
        step_overhead_ms: float = DEFAULTS["step_overhead_ms"],
        allreduce_latency_us: float = DEFAULTS["allreduce_latency_us"],
        dtype_bytes: int = DEFAULTS["dtype_bytes"],
        peak_tflops: float | None = None,
        memory_bandwidth_gbps: float | None = None,
    ) -> None:
        self.shape, self.gpu, self.tp, self.dtype_bytes = shape, gpu, int(tp), int(dtype_bytes)
        # FLOPs and bytes per millisecond at the assumed efficiencies.
        self._flops_per_ms = (peak_tflops or gpu.peak_tflops) * 1e9 * compute_efficiency
        self._bytes_per_ms = (
            (memory_bandwidth_gbps or gpu.memory_bandwidth_gbps) * 1e6 * memory_efficiency
        )
        self._link_bytes_per_ms = gpu.interconnect_gbps * 1e6
        self._allreduce_ms = allreduce_latency_us / 1000.0
        self._overhead_ms = float(step_overhead_ms)

    def work_ms(self, work: PassWork, maximum: Any = max) -> float:
        """The time of ``work`` without the step overhead (``maximum=np.maximum`` for a
        ``PassWork`` of arrays)."""
        linear = maximum(
            work.linear_flops / self._flops_per_ms, work.weight_bytes / self._bytes_per_ms
        )
        attention = maximum(
            work.attention_flops / self._flops_per_ms, work.kv_bytes / self._bytes_per_ms
        )
        comm = 0.0
        if work.allreduces:
            ring = 2.0 * (self.tp - 1) / self.tp * work.allreduce_bytes / self._link_bytes_per_ms
            comm = work.allreduces * (ring + self._allreduce_ms)
        return linear + attention + comm

    def _work(self, **kw: float) -> PassWork:
        return pass_work(self.shape, tp=self.tp, dtype_bytes=self.dtype_bytes, **kw)

    def prefill_ms(
        self, new_tokens: int, batch_size: int, mean_isl: float, mean_prefix: float
    ) -> float:
        if new_tokens <= 0:
            return 0.0
        count = max(1, int(batch_size))
        per_request = new_tokens / count
        prefix = max(0.0, float(mean_prefix))
        # Causal attention: each new token attends to the prefix and the new tokens before it.
        pairs = count * (per_request * prefix + per_request * (per_request + 1) / 2)
        work = self._work(
            tokens=float(new_tokens),
            sequences=float(count),
            attention_pairs=pairs,
            kv_read_tokens=count * prefix,
            kv_write_tokens=float(new_tokens),
        )
        return self.work_ms(work) + self._overhead_ms

    def _decode_work(self, batch: float, kv: float) -> PassWork:
        return self._work(
            tokens=batch,
            sequences=batch,
            attention_pairs=kv,
            kv_read_tokens=kv,
            kv_write_tokens=batch,
        )

    def decode_ms(
        self, batch_size: int, active_kv_tokens: int, mean_context: float, total_kv_tokens: int
    ) -> float:
        work = self._decode_work(float(batch_size), float(active_kv_tokens))
        return max(MIN_DECODE_MS, self.work_ms(work) + self._overhead_ms)

    def decode_ms_bulk(
        self,
        batch_size: np.ndarray,
        active_kv_tokens: np.ndarray,
        mean_context: np.ndarray,
        total_kv_tokens: int,
    ) -> np.ndarray:
        work = self._decode_work(
            np.asarray(batch_size, dtype=np.float64), np.asarray(active_kv_tokens, dtype=np.float64)
        )
        return np.maximum(MIN_DECODE_MS, self.work_ms(work, np.maximum) + self._overhead_ms)

    def decode_ms_by_batch(
        self, batch_size: int, active_kv_tokens: np.ndarray, total_kv_tokens: int
    ) -> np.ndarray:
        """``decode_ms`` of one batch size over an array of KV token counts."""
        return self.decode_ms_bulk(np.float64(batch_size), active_kv_tokens, None, total_kv_tokens)

    def mixed_decode_ms(
        self,
        batch_size: int,
        active_kv_tokens: int,
        mean_context: float,
        total_kv_tokens: int,
        prefill_tokens: int,
    ) -> float:
        """What ``batch_size`` decoding requests add to a pass prefilling ``prefill_tokens``:
        their tokens join the prefill's through the weights (one weights pass for both) and
        their attention over ``active_kv_tokens`` is added; never below 0."""
        t = float(prefill_tokens)
        b = float(batch_size)
        alone = self._work(
            tokens=t, sequences=1.0, attention_pairs=0.0, kv_read_tokens=0.0, kv_write_tokens=0.0
        )
        joint = self._work(
            tokens=t + b,
            sequences=1.0 + b,
            attention_pairs=0.0,
            kv_read_tokens=0.0,
            kv_write_tokens=0.0,
        )
        attention = self._decode_work(b, float(active_kv_tokens))
        attention_ms = max(
            attention.attention_flops / self._flops_per_ms, attention.kv_bytes / self._bytes_per_ms
        )
        return max(0.0, self.work_ms(joint) - self.work_ms(alone) + attention_ms)


def _default(name: str) -> str:
    return f"default {DEFAULTS[name]}"


@dataclass(frozen=True, slots=True)
class RooflineParams:
    """The ``timing_model`` keys of type ``roofline`` (``path``: the model's config.json). Unset
    (null) keys take ``DEFAULTS``, so other timing types' dumps carry none of them."""

    gpu: str | None = param(
        None,
        choices=tuple(GPUS),
        optional=True,
        help=f"the GPU (published peak figures; {_default('gpu')})",
    )
    tp_size: int | None = param(
        None, ge=1, optional=True, help=f"tensor-parallel GPUs per worker ({_default('tp_size')})"
    )
    compute_efficiency: float | None = param(
        None,
        gt=0,
        le=1,
        optional=True,
        help=f"share of the peak FLOPS the GEMMs reach ({_default('compute_efficiency')})",
    )
    memory_efficiency: float | None = param(
        None,
        gt=0,
        le=1,
        optional=True,
        help=f"share of the bandwidth weight and KV reads reach ({_default('memory_efficiency')})",
    )
    step_overhead_ms: float | None = param(
        None,
        ge=0,
        optional=True,
        help=f"engine CPU time added to every pass, ms ({_default('step_overhead_ms')})",
    )
    allreduce_latency_us: float | None = param(
        None,
        ge=0,
        optional=True,
        help=f"fixed cost of one all-reduce, us ({_default('allreduce_latency_us')})",
    )
    dtype_bytes: int | None = param(
        None,
        ge=1,
        le=8,
        optional=True,
        help=f"bytes of a weight and a KV element ({_default('dtype_bytes')})",
    )
    peak_tflops: float | None = param(
        None, gt=0, optional=True, help="dense FP16 peak overriding the GPU's (TFLOPS)"
    )
    memory_bandwidth_gbps: float | None = param(
        None, gt=0, optional=True, help="bandwidth overriding the GPU's (GB/s)"
    )


def settings(spec: Any) -> dict[str, Any]:
    """A spec's roofline keys with ``DEFAULTS`` for the unset ones."""
    out = {p.name: getattr(spec, p.name) for p in params_of(RooflineParams)}
    return {k: DEFAULTS[k] if v is None and k in DEFAULTS else v for k, v in out.items()}


class RooflineKind(TimingKind):
    """``timing_model.type: roofline`` with ``path`` naming the model's ``config.json``."""

    Params = RooflineParams
    shared_keys = frozenset({"path"})

    def check(self, spec: Any) -> None:
        if not spec.path:
            raise ValueError("a roofline timing model needs path: the model's config.json")
        try:
            shape = ModelShape.from_hf_config(load_model_config(spec.path))
        except (OSError, ValueError) as exc:
            raise ValueError(f"path: {' '.join(str(exc).split())}") from None
        tp = settings(spec)["tp_size"]
        if shape.heads % tp:
            raise ValueError(
                f"tp_size {tp} does not divide the model's {shape.heads} attention heads"
            )

    def build(self, spec: Any) -> RooflineTiming:
        shape = ModelShape.from_hf_config(load_model_config(spec.path))
        values = settings(spec)
        gpu, tp = GPUS[values.pop("gpu")], values.pop("tp_size")
        return RooflineTiming(shape, gpu, tp=tp, **values)


KIND = RooflineKind()
