"""The capacity search's task functions: module-level and pure apart from reading the trace file
in the sweep folder, so the spawn pool and Ray run them with the same results.

- ``replay_full_task``: the whole trace on one deployment (static, or with a planner), scored
  per segment;
- ``replay_segment_task``: one segment with its lead-in on one deployment, its own requests
  scored.

Both return compact records (no per-request tables cross the process boundary). Times are
replay ms from the trace's first arrival.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from plansim.capacity.segments import SegmentWindow
from plansim.retune.tasks import load_window
from plansim.sim.summary import good_mask, without_host_keys
from plansim.workers.executor import TaskContext

# Policy replays keep one worker-count sample per this many seconds of replay time.
WORKER_SERIES_STEP_S = 10


@dataclass(frozen=True, slots=True)
class FullReplay:
    """One replay of the whole trace. ``segment_good``: good requests per segment (by arrival);
    ``end_ms``: the replay's duration (its last completion); ``summary``: the replay summary
    without host-speed keys; ``scaling_events`` and ``worker_series`` (``(time_s, workers per
    pool...)`` rows of provisioned workers) are filled for planner replays."""

    summary: dict[str, Any]
    segment_good: tuple[int, ...]
    end_ms: float
    scaling_events: int = 0
    worker_series: tuple[tuple[float, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class SegmentReplay:
    """One segment replay: good requests among the segment's own, and the latest completion of
    the sub-replay in the whole trace's replay ms (NaN when nothing completed)."""

    segment: int
    good: int
    end_ms: float


def replay_full_task(
    context: TaskContext,
    trace_path: str,
    deployment: Any,
    segment_first_rows: tuple[int, ...],
    planner_config: Any = None,
    changes: tuple[Any, ...] = (),
) -> FullReplay:
    """Replay the trace file on ``deployment``, with a planner built from ``planner_config``
    or the scripted count ``changes`` (``scripted.CountChange``) when given; score each
    segment's requests (``segment_first_rows``: S + 1 row bounds)."""
    del context
    from plansim import api

    workload = load_window(trace_path)
    planner = planner_config
    if planner is None and changes:
        from plansim.capacity.scripted import CountSchedule

        planner = CountSchedule(changes)
    result = api.replay(workload, api.setup(deployment, planner))
    good = good_mask(result.requests, deployment.sla)
    bounds = np.asarray(segment_first_rows, dtype=np.int64)
    segment_of_row = np.repeat(np.arange(bounds.size - 1), np.diff(bounds))
    counts = np.bincount(segment_of_row[good], minlength=bounds.size - 1)
    series: tuple[tuple[float, ...], ...] = ()
    if planner is not None:
        series = _worker_series(result.timeseries, tuple(deployment.pool_sizes()))
    return FullReplay(
        summary=without_host_keys(result.summary),
        segment_good=tuple(int(c) for c in counts),
        end_ms=float(result.summary["duration_ms"]),
        scaling_events=len(result.scaling_events),
        worker_series=series,
    )


def replay_segment_task(
    context: TaskContext,
    trace_path: str,
    deployment: Any,
    window: SegmentWindow,
    counts: tuple[int, ...],
) -> SegmentReplay:
    """Replay ``window``'s rows on ``deployment`` (whose worker counts serve the lead-in),
    scaling to ``counts`` at the segment edge; score the segment's own requests."""
    del context
    from plansim import api
    from plansim.capacity.scripted import CountSchedule, change_to

    workload = load_window(trace_path).rows(window.lead_row, window.stop_row)
    planner = None
    if window.has_lead_in and tuple(deployment.pool_sizes().values()) != tuple(counts):
        edge_s = (window.edge_ms - window.offset_ms) / 1000.0
        planner = CountSchedule([change_to(deployment.mode, edge_s, counts)])
    result = api.replay(workload, api.setup(deployment, planner))
    good = good_mask(result.requests, deployment.sla)
    own = good[window.start_row - window.lead_row :]
    last = result.requests["last_token_ms"].to_numpy(dtype=np.float64)
    done = (result.requests["status"] == "completed").to_numpy()
    end = float(np.nanmax(last[done])) if done.any() else float("nan")
    # The sub-replay's time 0 is its first arrival; a speed-up divides the gaps after it.
    return SegmentReplay(window.index, int(own.sum()), window.offset_ms + end)


def _worker_series(timeseries: Any, pools: tuple[str, ...]) -> tuple[tuple[float, ...], ...]:
    """Provisioned workers (ready + starting + draining) per pool every
    ``WORKER_SERIES_STEP_S`` seconds of the replay's time series."""
    if timeseries is None or not len(timeseries):
        return ()
    frame = timeseries[timeseries["time_s"] % WORKER_SERIES_STEP_S == 0]
    provisioned = frame["ready"] + frame["starting"] + frame["draining"]
    table = (
        frame.assign(workers=provisioned)
        .pivot_table(index="time_s", columns="pool", values="workers", aggfunc="first")
        .reindex(columns=list(pools))
        .fillna(0)
    )
    return tuple((float(t), *map(float, row)) for t, row in zip(table.index, table.to_numpy()))
