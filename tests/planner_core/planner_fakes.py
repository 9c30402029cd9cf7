"""Fake observations for planner tests: FPMs, capabilities and linear pass-time workers."""

from plansim.planner_core.observations import (
    ForwardPassMetrics,
    RoleCapabilities,
    WorkerCapabilities,
)


def fpm(
    worker_id=0,
    dp_rank=0,
    wall_time_s=0.01,
    *,
    n_prefill=0,
    prefill_tokens=0,
    n_decode=0,
    decode_kv=0,
    queued_prefill_tokens=0,
    queued_decode_kv=0,
    queued_prefill_requests=0,
    queued_decode_requests=0,
):
    return ForwardPassMetrics(
        worker_id=worker_id,
        dp_rank=dp_rank,
        wall_time_s=wall_time_s,
        num_prefill_requests=n_prefill,
        sum_prefill_tokens=prefill_tokens,
        num_decode_requests=n_decode,
        sum_decode_kv_tokens=decode_kv,
        queued_prefill_requests=queued_prefill_requests,
        queued_prefill_tokens=queued_prefill_tokens,
        queued_decode_requests=queued_decode_requests,
        queued_decode_kv_tokens=queued_decode_kv,
    )


def role_caps(num_gpu=1, mbt=8192, max_seqs=512, max_kv=2_000_000):
    return RoleCapabilities(
        num_gpu=num_gpu, max_num_batched_tokens=mbt, max_num_seqs=max_seqs, max_kv_tokens=max_kv
    )


# Linear workers used across tests: prefill 10 ms + 10 us/token, decode 5 ms + 0.1 us/KV token.
def prefill_wall(tokens):
    return 0.01 + 1e-5 * tokens


def decode_wall(kv):
    return 0.005 + 1e-7 * kv


def prefill_bench(avg_isl=1000):
    """Single-request prefill passes on the linear prefill worker (average ISL ``avg_isl``)."""
    return tuple(
        fpm(
            wall_time_s=prefill_wall(t),
            n_prefill=t // avg_isl if t >= avg_isl else 1,
            prefill_tokens=t,
        )
        for t in (avg_isl, 2 * avg_isl, 4 * avg_isl, 6 * avg_isl, 8 * avg_isl)
    )


def decode_bench(avg_len=1000):
    return tuple(
        fpm(wall_time_s=decode_wall(kv), n_decode=kv // avg_len, decode_kv=kv)
        for kv in (10_000, 50_000, 100_000, 200_000, 400_000)
    )


def disagg_caps(benchmark=True, **kw):
    bench = {"prefill": prefill_bench(), "decode": decode_bench()} if benchmark else {}
    return WorkerCapabilities(
        mode="disagg", decode=role_caps(**kw), prefill=role_caps(**kw), benchmark_fpms=bench
    )


def agg_caps(benchmark=True, **kw):
    bench = {"decode": decode_bench(), "prefill": prefill_bench()} if benchmark else {}
    return WorkerCapabilities(mode="agg", decode=role_caps(**kw), benchmark_fpms=bench)


class CapPlugin:
    """A user CONSTRAIN plugin: at most ``cap`` decode replicas (loaded by import path)."""

    plugin_id = "user_cap"
    stage = "constrain"
    priority = 50
    execution_interval_seconds = None
    needs = frozenset()
    observation_window_seconds = None

    def __init__(self, cap):
        self.cap = cap

    def run(self, ctx):
        from plansim.planner_core.pipeline import Override, OverrideType, StageResult

        return StageResult(overrides=(Override("decode", OverrideType.AT_MOST, self.cap),))


class SetPlugin:
    """A user PROPOSE plugin that always asks for ``value`` decode replicas."""

    stage = "propose"
    execution_interval_seconds = None
    needs = frozenset()
    observation_window_seconds = None

    def __init__(self, value, priority=5, plugin_id="user_set"):
        self.value, self.priority, self.plugin_id = value, priority, plugin_id

    def run(self, ctx):
        from plansim.planner_core.pipeline import Override, OverrideType, StageResult

        return StageResult(overrides=(Override("decode", OverrideType.SET, self.value),))


class FakeRetune:
    """Records the engine's calls; returns fixed router parameters and one decision per tick."""

    def __init__(self):
        self.calls = []

    def initial_tick(self, start_s):
        self.calls.append(("initial", start_s))

    def on_tick(self, now_s, worker_counts):
        self.calls.append(("tick", now_s, worker_counts.ready_decode))
        return {"decode": {"overlap_score_weight": 2.0}}, (
            {"outcome": "no_improvement", "at_s": now_s},
        )


def poisson_workload(rates_rps, segment_s, *, isl=3000, osl=300, seed=0):
    """A Workload with Poisson arrivals at ``rates_rps[k]`` during segment k (no shared
    prefixes)."""
    import numpy as np

    from plansim.traces.workload import Workload

    rng = np.random.default_rng(seed)
    parts = [
        np.sort(rng.uniform(k * segment_s, (k + 1) * segment_s, rng.poisson(r * segment_s)))
        for k, r in enumerate(rates_rps)
    ]
    arrival_ms = np.concatenate(parts) * 1000.0
    n = len(arrival_ms)
    isl_a = np.maximum(1, rng.lognormal(np.log(isl), 0.3, n)).astype(np.int64)
    osl_a = np.maximum(1, rng.lognormal(np.log(osl), 0.3, n)).astype(np.int64)
    blocks = -(-isl_a // 512)
    offsets = np.concatenate([[0], np.cumsum(blocks)]).astype(np.int64)
    return Workload(
        arrival_ms=arrival_ms,
        isl_tokens=isl_a,
        osl_tokens=osl_a,
        request_id=np.array([str(i) for i in range(n)], dtype=object),
        hash_offsets=offsets,
        hash_ids=np.arange(offsets[-1], dtype=np.int64),
        trace_block_size=512,
    )


def capabilities_for(deployment):
    """WorkerCapabilities from a sim Deployment (no self-benchmark: the planner learns live)."""
    from plansim.planner_core.observations import RoleCapabilities, WorkerCapabilities

    def caps(args):
        return RoleCapabilities(
            num_gpu=args.gpus_per_worker,
            max_num_batched_tokens=args.max_num_batched_tokens,
            max_num_seqs=args.max_num_seqs,
            max_kv_tokens=args.total_kv_tokens * args.dp_size,
            context_length=args.max_model_len,
        )

    if deployment.mode == "agg":
        return WorkerCapabilities(mode="agg", decode=caps(deployment.engine))
    return WorkerCapabilities(
        mode="disagg", decode=caps(deployment.decode_args), prefill=caps(deployment.prefill_args)
    )
