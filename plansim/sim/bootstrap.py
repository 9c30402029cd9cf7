"""What a simulated worker tells the planner before any traffic: its capabilities and a
self-benchmark of its own timing model (bootstrap source 1 of the seed; reference
``prepare_planner_replay`` step 5). ``planner_for_deployment`` composes the planner a host
drives from these, the profiling data and the predictor warm-up trace.

Prefill sweep: batch 1, ISL from 100 to ``max_num_batched_tokens`` in ``granularity`` steps.
Decode sweep: context lengths {500, 2000, 4000, 8000} x batch sizes from 1 to ``max_num_seqs`` in
``granularity`` steps, stopping once ``batch * context`` exceeds the rank's KV capacity. Pass
times are the timing model's, divided by the speedup ratios, in seconds.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from plansim.planner_core.config import PlannerConfig
from plansim.planner_core.engine import PlannerEngine
from plansim.planner_core.observations import (
    ForwardPassMetrics,
    RoleCapabilities,
    SlaTargets,
    WorkerCapabilities,
)
from plansim.planner_core.scaling_policies import SCALING_POLICIES
from plansim.planner_io import read_profile_fpms, read_warmup_observations
from plansim.roles import Mode, Role
from plansim.sim.deployment import Deployment, EngineArgs
from plansim.sim.timing import make_timing_model

log = logging.getLogger("plansim.planner")
DECODE_CONTEXTS = (500, 2000, 4000, 8000)
PREFILL_MIN_ISL = 100
BENCH_WORKER_ID = -1
ProfileFpms = dict[str, tuple[ForwardPassMetrics, ...]]


def _steps(lo: int, hi: int, n: int) -> list[int]:
    if hi <= lo:
        return [hi]
    return sorted({int(round(x)) for x in np.linspace(lo, hi, max(n, 2))})


def _bench_fpm(
    wall_ms: float,
    *,
    n_prefill: int = 0,
    prefill_tokens: int = 0,
    n_decode: int = 0,
    decode_kv_tokens: int = 0,
) -> ForwardPassMetrics:
    """One self-benchmark pass of ``wall_ms`` (stored in seconds) with empty queues."""
    return ForwardPassMetrics.sample(
        BENCH_WORKER_ID,
        wall_ms / 1000.0,
        n_prefill=n_prefill,
        prefill_tokens=prefill_tokens,
        n_decode=n_decode,
        decode_kv_tokens=decode_kv_tokens,
    )


def prefill_fpms(args: EngineArgs, granularity: int = 8) -> tuple[ForwardPassMetrics, ...]:
    """Batch-1 prefill passes over ISL."""
    timing = make_timing_model(args.effective_timing)
    out = []
    for isl in _steps(PREFILL_MIN_ISL, args.max_num_batched_tokens, granularity):
        ms = timing.prefill_ms(isl, 1, float(isl), 0.0)
        wall_ms = ms / args.speedup_ratio if args.speedup_ratio > 0 else 0.0
        out.append(_bench_fpm(wall_ms, n_prefill=1, prefill_tokens=isl))
    return tuple(out)


def decode_fpms(args: EngineArgs, granularity: int = 8) -> tuple[ForwardPassMetrics, ...]:
    """Decode passes over context length x batch size."""
    timing = make_timing_model(args.effective_timing)
    capacity = args.total_kv_tokens
    divisor = args.speedup_ratio * args.decode_speedup_ratio
    out = []
    for ctx in DECODE_CONTEXTS:
        for batch in _steps(1, args.max_num_seqs, granularity):
            kv = batch * ctx
            if kv > capacity:
                break
            ms = timing.decode_ms(batch, kv, float(ctx), capacity)
            wall_ms = ms / divisor if divisor > 0 else 0.0
            out.append(_bench_fpm(wall_ms, n_decode=batch, decode_kv_tokens=kv))
    return tuple(out)


def benchmark_fpms(engine_args: EngineArgs, granularity: int = 8) -> tuple[ForwardPassMetrics, ...]:
    """A worker's self-benchmark for its role: prefill sweep (prefill workers), decode sweep
    (decode workers), or both concatenated (aggregated workers)."""
    return _role_fpms(engine_args.role, engine_args, granularity)


def _role_fpms(role: Role, args: EngineArgs, granularity: int) -> tuple[ForwardPassMetrics, ...]:
    fpms: tuple[ForwardPassMetrics, ...] = ()
    if role.prefills:
        fpms += prefill_fpms(args, granularity)
    if role.decodes:
        fpms += decode_fpms(args, granularity)
    return fpms


def role_capabilities(args: EngineArgs) -> RoleCapabilities:
    return RoleCapabilities(
        num_gpu=args.gpus_per_worker,
        max_num_batched_tokens=args.max_num_batched_tokens,
        max_num_seqs=args.max_num_seqs,
        max_kv_tokens=args.num_gpu_blocks * args.block_size * args.dp_size,
        context_length=args.max_model_len,
        speculative_nextn=0,
    )


def worker_capabilities(
    deployment: Deployment, granularity: int = 8, *, benchmark: bool = True
) -> WorkerCapabilities:
    """Capabilities per planner role of a deployment (an aggregated pool is decode), with the
    workers' self-benchmark FPMs (an aggregated worker benchmarks both sweeps)."""
    mode = Mode(deployment.mode)
    caps: dict[Role, RoleCapabilities] = {}
    fpms: dict[str, tuple[ForwardPassMetrics, ...]] = {}
    for pool in mode.pools:
        args = deployment.pool_args(pool)
        caps[pool.planner_role] = role_capabilities(args)
        if benchmark:
            fpms[pool.planner_role.value] = _role_fpms(pool, args, granularity)
    return WorkerCapabilities(
        mode=mode.value,
        decode=caps[Role.DECODE],
        prefill=caps.get(Role.PREFILL),
        benchmark_fpms=fpms,
    )


def planner_inputs(
    config: PlannerConfig, deployment: Deployment
) -> tuple[WorkerCapabilities, ProfileFpms | None]:
    """The deployment's worker capabilities (with their self-benchmark FPMs) and, only when the
    workers cannot self-benchmark, the profiling data in ``config.profile_results_dir``."""
    capabilities = worker_capabilities(deployment)
    profile = None if capabilities.benchmark_fpms else read_profile_fpms(config.profile_results_dir)
    return capabilities, profile


def planner_for_deployment(
    config: PlannerConfig, deployment: Deployment, *, retune: Any = None
) -> PlannerEngine:
    """The planner a host drives for ``deployment``: bootstrapped from the workers'
    self-benchmark (else the profiling data), its predictors warmed from
    ``load_predictor_warmup_trace``, told the deployment's goodput SLA (which ``sla_goodput``
    sizes for); ``retune`` is the optional retune controller."""
    capabilities, profile = planner_inputs(config, deployment)
    sla = SlaTargets(ttft_ms=deployment.sla.ttft_ms, itl_ms=deployment.sla.tpot_ms)
    if SCALING_POLICIES.get(config.scaling_policy).sizes_for_deployment_sla:
        _warn_unused_planner_sla(config, sla)
    return PlannerEngine(
        config,
        capabilities,
        warmup=read_warmup_observations(config),
        retune=retune,
        profile_fpms=profile,
        sla=sla,
    )


def _warn_unused_planner_sla(config: PlannerConfig, sla: SlaTargets) -> None:
    """A policy that sizes for the deployment's SLA (``sizes_for_deployment_sla``): a planner
    ttft_ms/itl_ms it overrides has no effect, and the user should hear so."""
    unused = [
        f"{name} {getattr(config, name):g}"
        for name, value in (("ttft_ms", sla.ttft_ms), ("itl_ms", sla.itl_ms))
        if name in config.model_fields_set and value is not None and value != getattr(config, name)
    ]
    if unused:
        log.warning(
            "planner config: scaling_policy %s sizes for the deployment's sla (%s); %s not used",
            config.scaling_policy,
            _sla_text(sla),
            ", ".join(unused),
        )


def _sla_text(sla: SlaTargets) -> str:
    # The deployment's keys: its tpot_ms bound is the planner's ITL target.
    parts = [
        f"{k} {v:g}"
        for k, v in (("ttft_ms", sla.ttft_ms), ("tpot_ms", sla.itl_ms))
        if v is not None
    ]
    return ", ".join(parts) or "none"
