"""The reference side of ``bench/calibration.py``: runs under the reference replay's venv
(``../shared/tools/peer_env.sh``), never under plansim's, and plansim never imports it.

    RUST_LOG=error "$(../shared/tools/peer_env.sh)/venv/bin/python" bench/calibration_peer.py \
        JOBS.json OUT.json 2>/dev/null

``JOBS.json`` is a list of ``{"trace", "trace_format", "num_workers", "router_mode",
"npz" (a timing profile path, or null for the default polynomial), "sla_ttft_ms",
"sla_itl_ms", "per_request" (bool)}``. ``OUT.json`` gets one entry per job: the summary and,
with ``per_request``, each request's ``ttft_ms``, ``e2e_latency_ms``, ``output_length``,
``requested_output_length``, ``input_length``, ``arrival_time_ms`` and ``terminal_status``,
in the reference's order.
"""

import json
import sys
import time

PER_REQUEST = (
    "ttft_ms",
    "e2e_latency_ms",
    "output_length",
    "requested_output_length",
    "input_length",
    "arrival_time_ms",
    "terminal_status",
)


def run(job):
    from dynamo.replay import run_trace_replay

    engine = {}
    if job.get("npz"):
        engine = {
            "engine": {
                "timing_model": {
                    "type": "external",
                    "provider": "dynamo_profile",
                    "config": {"path": job["npz"]},
                }
            }
        }
    started = time.perf_counter()
    report = run_trace_replay(
        job["trace"],
        trace_format=job["trace_format"],
        num_workers=job["num_workers"],
        router_mode=job["router_mode"],
        extra_engine_args=engine or None,
        sla_ttft_ms=job.get("sla_ttft_ms"),
        sla_itl_ms=job.get("sla_itl_ms"),
        capture_per_request=bool(job.get("per_request")),
    )
    out = {
        "summary": {k: v for k, v in report.summary.items() if isinstance(v, (int, float))},
        "wall_s": time.perf_counter() - started,
    }
    if job.get("per_request"):
        out["requests"] = {k: [r.get(k) for r in report.per_request] for k in PER_REQUEST}
    return out


def main():
    with open(sys.argv[1]) as f:
        jobs = json.load(f)
    results = [run(job) for job in jobs]
    with open(sys.argv[2], "w") as f:
        json.dump(results, f)


if __name__ == "__main__":
    main()
