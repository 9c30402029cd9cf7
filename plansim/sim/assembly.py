"""Assembling a finished replay's ``ReplayResult``: the recorder's tables, the summary (worker
seconds and GPUs per planner role, goodput SLA, session figures), the workers table, and the
planner host's ticks and scaling events. Tables are described in ``plansim.sim.result``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from plansim.result_table import Table
from plansim.roles import Mode, Role
from plansim.sim.cluster import Pool
from plansim.sim.recorder import Recorder
from plansim.sim.result import ReplayResult
from plansim.sim.sessions import session_columns, session_summary
from plansim.sim.summary import replay_end_ms, summarize

if TYPE_CHECKING:
    from plansim.sim.planner_host import PlannerHost

WORKER_COLUMNS = [
    "worker_id",
    "pool",
    "ready_at_ms",
    "removed_at_ms",
    "requests",
    "input_tokens",
    "output_tokens",
    "reused_input_tokens",
]


def assemble_result(
    workload: Any,
    deployment: Any,
    pools: Mapping[Role, Pool],
    rec: Recorder,
    planner_host: PlannerHost | None,
    wall_ms: float,
) -> ReplayResult:
    """The result of a replay of ``workload`` on ``deployment`` that ran ``wall_ms``;
    ``planner_host`` is None without a planner."""
    requests = rec.requests_table(workload.request_id)
    d = deployment
    if d.request_overhead_ms:
        # The client sees every token that much later: TTFT and E2E grow by it, TPOT does not.
        for name in ("first_token_ms", "last_token_ms", "ttft_ms", "e2e_latency_ms"):
            requests.columns[name] = requests[name] + d.request_overhead_ms
    graph = workload.graph
    if graph is not None:
        requests = session_columns(requests, graph)
    end_ms = replay_end_ms(requests)
    # Worker-seconds and GPUs per worker by planner role (an aggregated pool is decode).
    seconds = {Role.PREFILL: 0.0, Role.DECODE: 0.0}
    gpus = {Role.PREFILL: 0, Role.DECODE: 0}
    for name, pool in pools.items():
        seconds[name.planner_role] = pool.worker_seconds(end_ms)
        gpus[name.planner_role] = d.pool_args(name).gpus_per_worker
    gaps, counts = rec.itl_samples()
    summary = summarize(
        requests,
        gaps,
        counts,
        prefill_worker_seconds=seconds[Role.PREFILL],
        decode_worker_seconds=seconds[Role.DECODE],
        prefill_gpus_per_worker=gpus[Role.PREFILL],
        decode_gpus_per_worker=gpus[Role.DECODE],
        sla=d.sla if d.sla.is_set else None,
        wall_time_ms=wall_ms,
    )
    sessions = None
    if graph is not None or d.max_concurrency is not None:
        sessions, extra = session_summary(requests, d.max_concurrency)
        summary.update(extra)
    ticks = scaling = None
    if planner_host is not None:
        ticks = planner_host.ticks_table()
        scaling = planner_host.scaling_events
    tables = {
        "requests": requests,
        "timeseries": rec.timeseries_table(Mode(d.mode).visible_pool),
        "workers": workers_table(pools, requests),
    }
    if sessions is not None:
        tables["sessions"] = sessions
    return ReplayResult(
        summary=summary,
        tables=tables,
        ticks=ticks,
        scaling_events=scaling or [],
        inputs={"num_requests": len(workload), "deployment": d.model_dump(mode="json")},
    )


def workers_table(pools: Mapping[Role, Pool], requests: Table) -> Table:
    """One row per worker ever provisioned, with the requests and tokens it served."""
    rows = []
    for pool in pools.values():
        col = "prefill_worker" if pool.name.hands_off else "decode_worker"
        served = requests[col] >= 0
        ids = requests[col][served]
        size = 1 + max(
            max((w.worker_id for w in pool.workers), default=-1), int(ids.max(initial=-1))
        )

        def per_worker(name: str, served=served, ids=ids, size=size) -> np.ndarray:
            total = np.zeros(size, dtype=np.int64)
            np.add.at(total, ids, requests[name][served])
            return total

        n_req = np.bincount(ids, minlength=size)
        inp, out = per_worker("input_length"), per_worker("output_length")
        reused = per_worker("reused_input_tokens")
        for w in pool.workers:
            wid = w.worker_id
            rows.append(
                (
                    wid,
                    pool.name.value,
                    w.ready_ms,
                    w.removed_ms,
                    int(n_req[wid]),
                    int(inp[wid]),
                    int(out[wid]) if pool.name.decodes else 0,
                    int(reused[wid]),
                )
            )
    dtypes = (np.int64, str, np.float64, np.float64, np.int64, np.int64, np.int64, np.int64)
    return Table(
        {
            name: np.array([row[i] for row in rows], dtype=dtype)
            for i, (name, dtype) in enumerate(zip(WORKER_COLUMNS, dtypes))
        }
    )
