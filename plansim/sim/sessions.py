"""Per-session results of a closed-loop replay, and the summary figures of release and sessions.

A session's total time runs from the release of its first turn to the last token of its last
turn: what its user waited for, think times included. Only sessions whose every turn completed
have one. Under ``max_concurrency``, a request's wait at the cap is its arrival (entry into the
cluster) minus its release.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from plansim.result_table import Table, column
from plansim.sim.summary import STAT_NAMES, weighted_stats
from plansim.traces.graph import RequestGraph

SESSION_COLUMNS = (
    "session_id",
    "turns",
    "completed_turns",
    "first_release_ms",
    "last_token_ms",
    "total_ms",
    "status",
)
UNRELEASED = "never released"


def session_columns(requests: Table, graph: RequestGraph) -> Table:
    """``requests`` (workload order) with ``session_id`` ("" outside a session) and
    ``turn_index`` (-1 outside one) after ``request_id``."""
    names = np.append(np.asarray(graph.session_ids, dtype=object), "")
    columns = dict(requests.columns)
    request_id = columns.pop("request_id")
    return Table(
        {
            "request_id": request_id,
            "session_id": names[graph.session].astype(str),
            "turn_index": graph.turn_index.astype(np.int64),
            **columns,
        }
    )


def sessions_table(requests: Any) -> Table:
    """One row per session (``SESSION_COLUMNS``), in order of first appearance, of a requests
    ``Table`` or DataFrame with ``session_id``."""
    session = column(requests, "session_id").astype(str)
    inside = np.flatnonzero(session != "")
    names, first, codes = np.unique(session[inside], return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty(order.size, dtype=np.int64)
    rank[order] = np.arange(order.size, dtype=np.int64)
    group = rank[codes.reshape(-1)]
    n = order.size
    done = column(requests, "status")[inside] == "completed"
    turns = np.bincount(group, minlength=n).astype(np.int64)
    completed = np.bincount(group, weights=done, minlength=n).astype(np.int64)
    # fmin/fmax skip NaN as a group's min/max does; a group of NaN stays NaN.
    first_release = np.full(n, np.nan)
    np.fmin.at(first_release, group, column(requests, "release_ms", np.float64)[inside])
    last_token = np.full(n, np.nan)
    np.fmax.at(
        last_token,
        group,
        np.where(done, column(requests, "last_token_ms", np.float64)[inside], np.nan),
    )
    complete = completed == turns
    return Table(
        {
            "session_id": names[order],
            "turns": turns,
            "completed_turns": completed,
            "first_release_ms": first_release,
            "last_token_ms": last_token,
            "total_ms": np.where(complete, last_token - first_release, np.nan),
            "status": np.where(complete, "completed", "incomplete"),
        }
    )


def session_summary(
    requests: Any, max_concurrency: int | None
) -> tuple[Table | None, dict[str, Any]]:
    """The sessions table (``None`` without sessions) and the summary keys: ``num_sessions``,
    ``completed_sessions`` and ``{stat}_session_total_ms`` (completed sessions);
    ``unreleased_requests`` (closed loop: requests that waited on a rejected one); with a cap,
    ``{stat}_release_wait_ms`` (requests that entered). ``requests``: a ``Table`` or a
    DataFrame."""
    out: dict[str, Any] = {}
    sessions = None
    if "session_id" in requests.columns:
        reason = column(requests, "reason").astype(str)
        out["unreleased_requests"] = int(np.char.startswith(reason, UNRELEASED).sum())
        if (column(requests, "session_id") != "").any():
            sessions = sessions_table(requests)
            out["num_sessions"] = len(sessions)
            out["completed_sessions"] = int((sessions["status"] == "completed").sum())
            _put(out, "session_total_ms", sessions["total_ms"])
    if max_concurrency is not None:
        wait = column(requests, "arrival_ms", np.float64) - column(
            requests, "release_ms", np.float64
        )
        _put(out, "release_wait_ms", wait)
    return sessions, out


def _put(out: dict[str, Any], metric: str, values: np.ndarray) -> None:
    stats = weighted_stats(values)
    for name in STAT_NAMES:
        out[f"{name}_{metric}"] = stats[name]
