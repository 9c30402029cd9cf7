"""plansim's ``aic`` timing model against AIConfigurator's own static estimate.

    python bench/aic_parity.py [--case NAME ...]

Each case is a model on a GPU system with a backend and TP, and a static batch: ``batch``
requests of ``isl`` prompt tokens and ``osl`` output tokens arriving at once. plansim replays the
batch on one worker whose engine schedules it the way the static estimate assumes: the whole
batch prefilled in one pass (``max_num_batched_tokens`` = batch x ISL, ``max_num_seqs`` = batch),
then decoded together, with KV for every token (``num_gpu_blocks`` set so; the static estimate
does not limit KV). Compared, per case:

- TTFT: plansim's mean TTFT against ``run_static``'s context latency;
- TPOT: plansim's mean time per output token after the first against ``run_static``'s
  generation latency / (OSL - 1).

A case passes when both are within 5 %. The table ends with ``aic parity: N/M within 5%``.
Needs the ``aic`` extra; tables come from the usual cache (``$PLANSIM_CACHE_DIR``).
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass

import numpy as np

TOLERANCE = 0.05


@dataclass(frozen=True, slots=True)
class Case:
    name: str
    model: str
    system: str
    backend: str
    tp_size: int
    batch: int
    isl: int
    osl: int


_QWEN32 = ("Qwen/Qwen3-32B", "h200_sxm", "vllm")
_LLAMA70 = ("meta-llama/Meta-Llama-3.1-70B", "b200_sxm", "vllm")
_QWEN8 = ("Qwen/Qwen3-8B", "h100_sxm", "sglang")
_MOE = ("Qwen/Qwen3-30B-A3B", "h200_sxm", "trtllm")
CASES = [
    Case("qwen32-h200-tp1-b1", *_QWEN32, 1, 1, 4096, 1024),
    Case("qwen32-h200-tp1-b8", *_QWEN32, 1, 8, 1024, 256),
    Case("qwen32-h200-tp1-b64", *_QWEN32, 1, 64, 256, 128),
    Case("qwen32-h200-tp2-b16", *_QWEN32, 2, 16, 2048, 512),
    Case("qwen32-h200-tp2-b3", *_QWEN32, 2, 3, 3000, 200),
    Case("llama70-b200-tp4-b32", *_LLAMA70, 4, 32, 1024, 512),
    Case("llama70-b200-tp4-b5", *_LLAMA70, 4, 5, 4096, 128),
    Case("llama70-b200-tp4-b64", *_LLAMA70, 4, 64, 4096, 1024),
    Case("qwen8-h100-sglang-b48", *_QWEN8, 1, 48, 512, 1024),
    Case("qwen8-h100-sglang-b1", *_QWEN8, 1, 1, 256, 128),
    Case("moe30-h200-trtllm-tp2-b24", *_MOE, 2, 24, 2048, 256),
    Case("moe30-h200-trtllm-tp2-b7", *_MOE, 2, 7, 700, 900),
]


def _workload(case: Case):
    from plansim.traces.workload import Workload

    block = 64
    blocks = -(-case.isl // block)
    # Distinct prompts: no prefix is shared, as in the static estimate.
    ids = np.arange(case.batch * blocks, dtype=np.int64)
    return Workload(
        arrival_ms=np.zeros(case.batch),
        isl_tokens=np.full(case.batch, case.isl, dtype=np.int64),
        osl_tokens=np.full(case.batch, case.osl, dtype=np.int64),
        request_id=np.array([f"r{i}" for i in range(case.batch)], dtype=object),
        hash_offsets=np.arange(case.batch + 1, dtype=np.int64) * blocks,
        hash_ids=ids,
        trace_block_size=block,
    )


def run_case(case: Case) -> dict:
    from plansim.aic import sdk
    from plansim.aic.spec import parse_aic_spec
    from plansim.sim.deployment import build_deployment
    from plansim.sim.host import replay

    timing = {
        "type": "aic",
        "model": case.model,
        "system": case.system,
        "backend": case.backend,
        "tp_size": case.tp_size,
    }
    blocks = -(-case.batch * (case.isl + case.osl) // 64) + case.batch
    deployment = build_deployment(
        {
            "num_workers": 1,
            "engine": {
                "timing_model": timing,
                "block_size": 64,
                "num_gpu_blocks": blocks,
                "max_num_seqs": case.batch,
                "max_num_batched_tokens": case.batch * case.isl,
            },
        }
    )
    t0 = time.perf_counter()
    result = replay(_workload(case), deployment)
    wall_s = time.perf_counter() - t0
    requests = result.requests
    ttft = float(requests["ttft_ms"].mean())
    tpot = float(requests["tpot_ms"].mean())
    spec = parse_aic_spec({k: v for k, v in timing.items() if k != "type"})
    with sdk.quiet():
        context_ms, generation_ms, _ = sdk.engine(spec).run_static(
            batch_size=case.batch, isl=case.isl, osl=case.osl
        )
    aic_tpot = generation_ms / (case.osl - 1)
    return {
        "case": case,
        "label": spec.label,
        "ttft": ttft,
        "aic_ttft": context_ms,
        "tpot": tpot,
        "aic_tpot": aic_tpot,
        "wall_s": wall_s,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--case", action="append", help="run only these cases (repeatable)")
    args = parser.parse_args()
    cases = [c for c in CASES if not args.case or c.name in args.case]
    print(f"load average {os.getloadavg()[0]:.2f}")
    header = (
        f"{'case':27s} {'batch':>5s} {'ISL':>5s} {'OSL':>5s} {'TTFT ms':>9s} "
        f"{'AIC TTFT':>9s} {'err':>6s} {'TPOT ms':>8s} {'AIC TPOT':>8s} {'err':>6s}  ok"
    )
    print(header)
    passed = 0
    for case in cases:
        r = run_case(case)
        e_ttft = r["ttft"] / r["aic_ttft"] - 1
        e_tpot = r["tpot"] / r["aic_tpot"] - 1
        ok = abs(e_ttft) <= TOLERANCE and abs(e_tpot) <= TOLERANCE
        passed += ok
        print(
            f"{case.name:27s} {case.batch:5d} {case.isl:5d} {case.osl:5d} {r['ttft']:9.1f} "
            f"{r['aic_ttft']:9.1f} {100 * e_ttft:+5.1f}% {r['tpot']:8.2f} {r['aic_tpot']:8.2f} "
            f"{100 * e_tpot:+5.1f}%  {'yes' if ok else 'NO'}"
        )
    print(f"aic parity: {passed}/{len(cases)} within 5%")


if __name__ == "__main__":
    main()
