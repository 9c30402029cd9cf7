"""Assembling a finished replay's ``ReplayResult``: the recorder's tables, the summary (worker
seconds and GPUs per planner role, goodput SLA, session figures), the workers table, and the
planner host's ticks and scaling events. Tables are described in ``plansim.sim.result``."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from plansim.roles import Mode, Role
from plansim.sim.cluster import Pool
from plansim.sim.recorder import Recorder
from plansim.sim.result import ReplayResult
from plansim.sim.sessions import session_columns, session_summary
from plansim.sim.summary import replay_duration_ms, summarize

if TYPE_CHECKING:
    import pandas as pd

    from plansim.sim.planner_host import PlannerHost

WORKER_COLUMNS = ["worker_id", "pool", "ready_at_ms", "removed_at_ms", "requests",
                  "input_tokens", "output_tokens", "reused_input_tokens"]


def assemble_result(workload: Any, deployment: Any, pools: Mapping[Role, Pool], rec: Recorder,
                    planner_host: PlannerHost | None, wall_ms: float) -> ReplayResult:
    """The result of a replay of ``workload`` on ``deployment`` that ran ``wall_ms``;
    ``planner_host`` is None without a planner."""
    requests = rec.requests_table(workload.request_id)
    graph = workload.graph
    if graph is not None:
        requests = session_columns(requests, graph)
    done_ms = replay_duration_ms(requests)
    d = deployment
    # Worker-seconds and GPUs per worker by planner role (an aggregated pool is decode).
    seconds = {Role.PREFILL: 0.0, Role.DECODE: 0.0}
    gpus = {Role.PREFILL: 0, Role.DECODE: 0}
    for name, pool in pools.items():
        seconds[name.planner_role] = pool.worker_seconds(done_ms)
        gpus[name.planner_role] = d.pool_args(name).gpus_per_worker
    gaps, counts = rec.itl_samples()
    summary = summarize(requests, gaps, counts, prefill_worker_seconds=seconds[Role.PREFILL],
                        decode_worker_seconds=seconds[Role.DECODE],
                        prefill_gpus_per_worker=gpus[Role.PREFILL],
                        decode_gpus_per_worker=gpus[Role.DECODE],
                        sla=d.sla if d.sla.is_set else None, wall_time_ms=wall_ms)
    sessions = None
    if graph is not None or d.max_concurrency is not None:
        sessions, extra = session_summary(requests, d.max_concurrency)
        summary.update(extra)
    ticks = scaling = None
    if planner_host is not None:
        ticks = planner_host.ticks_table()
        scaling = planner_host.scaling_events
    return ReplayResult(
        summary=summary,
        requests=requests,
        timeseries=rec.timeseries_table(Mode(d.mode).visible_pool),
        workers=workers_table(pools, requests),
        ticks=ticks,
        sessions=sessions,
        scaling_events=scaling or [],
        inputs={"num_requests": len(workload), "deployment": d.model_dump(mode="json")},
    )


def workers_table(pools: Mapping[Role, Pool], requests: pd.DataFrame) -> pd.DataFrame:
    """One row per worker ever provisioned, with the requests and tokens it served."""
    import pandas as pd  # the tables' library, loaded once the replay has run

    rows = []
    for pool in pools.values():
        col = "prefill_worker" if pool.name.hands_off else "decode_worker"
        served = requests[requests[col] >= 0]
        by_worker = served.groupby(col)
        n_req = by_worker.size()
        inp = by_worker["input_length"].sum()
        out = by_worker["output_length"].sum()
        reused = by_worker["reused_input_tokens"].sum()
        for w in pool.workers:
            wid = w.worker_id
            rows.append({
                "worker_id": wid, "pool": pool.name.value, "ready_at_ms": w.ready_ms,
                "removed_at_ms": w.removed_ms, "requests": int(n_req.get(wid, 0)),
                "input_tokens": int(inp.get(wid, 0)),
                "output_tokens": int(out.get(wid, 0)) if pool.name.decodes else 0,
                "reused_input_tokens": int(reused.get(wid, 0)),
            })
    return pd.DataFrame(rows, columns=WORKER_COLUMNS)
