"""Traces recorded by plansim itself: a synthetic workload replayed on a deployment whose timing
is known, its per-request TTFT and E2E written as the recorded latencies of a Dynamo trace."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from plansim import api
from plansim.sim.deployment import build_deployment
from plansim.traces.synth import LengthSpec, SynthSpec, synthesize
from plansim.traces.writers import write_dynamo

# A deployment the tests calibrate against: 2 workers, KV router, the default engine.
DEPLOYMENT = {
    "num_workers": 2,
    "router": {"mode": "kv_router"},
    "sla": {"ttft_ms": 400.0, "itl_ms": 12.0},
}


def synthetic(n: int = 600, rate_rps: float = 4.0, seed: int = 3, **spec: Any) -> Any:
    """``n`` requests at ``rate_rps`` (Poisson), prompts about 1500 tokens (a third of each a
    shared prefix of 8 groups), about 60 output tokens."""
    defaults = {
        "duration_s": n / rate_rps * 1.5,
        "rate_rps": rate_rps,
        "isl": LengthSpec.lognormal(1500, 900, maximum=12000),
        "osl": LengthSpec.lognormal(60, 40, minimum=2),
        "prefix_groups": 8,
        "shared_prefix_ratio": 0.3,
        "max_requests": n,
    }
    return synthesize(SynthSpec(**{**defaults, **spec}), seed=seed)


def record(
    path: Path, workload: Any, deployment: dict[str, Any], *, noise: float = 0.0, seed: int = 0
) -> Path:
    """Replay ``workload`` on ``deployment`` (a mapping) and write it to ``path`` with the
    replay's TTFT and E2E as recorded latencies; ``noise``: the log-normal sigma of a
    measurement error applied to each request's TTFT and to its decode time."""
    result = api.replay(workload, api.setup(build_deployment(deployment)))
    req = result.tables["requests"]
    ttft, e2e = req["ttft_ms"].copy(), req["e2e_latency_ms"].copy()
    if noise:
        rng = np.random.default_rng(seed)
        decode = (e2e - ttft) * rng.lognormal(0.0, noise, ttft.shape[0])
        ttft = ttft * rng.lognormal(0.0, noise, ttft.shape[0])
        e2e = ttft + decode
    return write_dynamo(workload, path, ttft_ms=ttft, total_ms=e2e, epoch_ms=1.7e12)
