"""Interpolation error of the ``aic`` timing model's table against direct AIConfigurator calls.

    python bench/aic_grid.py [--samples N] [--seed S]

For each configuration: the table's build time and size, how many grid points the monotone
step moved (and the largest move), then the relative error |table - SDK| / SDK of prefill,
decode and mixed passes at random points an engine asks for (median, p95, p99, max):

- prefill: batch log-uniform in 1..64, new tokens per request log-uniform with batch x tokens
  <= 8192 (the default token budget), prefix 0 for 40 % of passes, else log-uniform to 32768;
- decode: batch uniform in 1..256, context log-uniform in 16..32768;
- mixed: one prefill chunk of 64..8192 tokens with 1..128 decodes at its own context, against
  the SDK's ``mixed_step_latency`` (whose single ISL fixes that shape).

Needs the ``aic`` extra. Tables are built in a temporary cache, so build times are real.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

import numpy as np

CONFIGS = [
    {"model": "Qwen/Qwen3-32B", "system": "h200_sxm", "backend": "vllm", "tp_size": 1},
    {
        "model": "meta-llama/Meta-Llama-3.1-70B",
        "system": "b200_sxm",
        "backend": "vllm",
        "tp_size": 4,
    },
    {"model": "Qwen/Qwen3-30B-A3B", "system": "h200_sxm", "backend": "sglang", "tp_size": 2},
]


def _stats(errors: np.ndarray) -> str:
    e = np.abs(errors) * 100
    return (
        f"{np.median(e):6.2f} {np.percentile(e, 95):6.2f} {np.percentile(e, 99):6.2f} "
        f"{e.max():6.2f}"
    )


def measure(raw: dict, samples: int, seed: int) -> None:
    from plansim.aic import sdk
    from plansim.aic.spec import parse_aic_spec
    from plansim.aic.table import grid_bounds, monotone_table, sdk_table
    from plansim.sim.timing.aic import AicTiming

    spec = parse_aic_spec(raw)
    t0 = time.perf_counter()
    answers = sdk_table(spec, grid_bounds(spec))
    table = monotone_table(answers)
    build_s = time.perf_counter() - t0
    timing = AicTiming(table)
    handle = sdk.engine(spec)
    rng = np.random.default_rng(seed)

    with sdk.quiet():
        b = np.exp(rng.uniform(0, np.log(64), samples * 8)).astype(int)
        n = np.exp(rng.uniform(0, np.log(8192), samples * 8)).astype(int) + 1
        keep = b * n <= 8192
        b, n = b[keep][:samples], n[keep][:samples]
        p = np.where(
            rng.random(b.size) < 0.4,
            0,
            np.exp(rng.uniform(np.log(16), np.log(32768), b.size)).astype(int),
        )
        prefill = np.array(
            [
                timing.prefill_ms(int(x * y), int(x), int(y + z), int(z))
                / handle.predict_prefill_latency(int(x), int(y + z), int(z))
                - 1
                for x, y, z in zip(b, n, p)
            ]
        )
        batch = rng.integers(1, 257, samples)
        ctx = np.exp(rng.uniform(np.log(16), np.log(32768), samples)).astype(int)
        decode = (
            timing.decode_ms_bulk(batch, batch * ctx, ctx.astype(float), 0)
            / np.array([handle.predict_decode_latency(int(x), int(c)) for x, c in zip(batch, ctx)])
            - 1
        )
        chunk = np.exp(rng.uniform(np.log(64), np.log(8192), samples // 4)).astype(int)
        dec = rng.integers(1, 129, chunk.size)
        mixed = np.array(
            [
                (
                    timing.prefill_ms(int(t), 1, int(t), 0)
                    + timing.mixed_decode_ms(int(d), int(d * t), float(t), 0, int(t))
                )
                / handle.mixed_step_latency(int(t), int(d), int(t), 2)
                - 1
                for t, d in zip(chunk, dec)
            ]
        )

    moved = [
        np.abs(getattr(table, f) / getattr(answers, f) - 1)
        for f in ("prefill_ms", "decode_ms", "shared_ms")
    ]
    points = sum(m.size for m in moved)
    print(
        f"{spec.label}: table {points} points, built in {build_s:.1f} s; monotone step moved "
        f"{sum(int((m > 0).sum()) for m in moved)} points, at most "
        f"{100 * max(m.max() for m in moved):.2f} %"
    )
    print(
        f"  {'pass':8s} {'samples':>7s} {'median':>6s} {'p95':>6s} {'p99':>6s} {'max':>6s}  (% error)"
    )
    for name, err in (("prefill", prefill), ("decode", decode), ("mixed", mixed)):
        print(f"  {name:8s} {err.size:7d} {_stats(err)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as cache:
        os.environ["PLANSIM_CACHE_DIR"] = cache
        for raw in CONFIGS:
            measure(raw, args.samples, args.seed)


if __name__ == "__main__":
    main()
