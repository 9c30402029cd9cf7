"""Per-session results of a closed-loop replay, and the summary figures of release and sessions.

A session's total time runs from the release of its first turn to the last token of its last
turn: what its user waited for, think times included. Only sessions whose every turn completed
have one. Under ``max_concurrency``, a request's wait at the cap is its arrival (entry into the
cluster) minus its release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from plansim.sim.summary import STAT_NAMES, weighted_stats
from plansim.traces.graph import RequestGraph

if TYPE_CHECKING:
    import pandas as pd

SESSION_COLUMNS = ("session_id", "turns", "completed_turns", "first_release_ms",
                   "last_token_ms", "total_ms", "status")
UNRELEASED = "never released"


def session_columns(requests: pd.DataFrame, graph: RequestGraph) -> pd.DataFrame:
    """``requests`` (workload order) with ``session_id`` ("" outside a session) and
    ``turn_index`` (-1 outside one) after ``request_id``."""
    names = np.append(np.asarray(graph.session_ids, dtype=object), "")
    out = requests.copy()
    out.insert(1, "session_id", names[graph.session].astype(str))
    out.insert(2, "turn_index", graph.turn_index.astype(np.int64))
    return out


def sessions_table(requests: pd.DataFrame) -> pd.DataFrame:
    """One row per session (``SESSION_COLUMNS``), in order of first appearance."""
    rows = requests[requests["session_id"] != ""]
    done = rows["status"] == "completed"
    grouped = rows.assign(done=done, last=rows["last_token_ms"].where(done)).groupby(
        "session_id", sort=False)
    import pandas as pd

    table = pd.DataFrame({
        "turns": grouped.size(),
        "completed_turns": grouped["done"].sum().astype(np.int64),
        "first_release_ms": grouped["release_ms"].min(),
        "last_token_ms": grouped["last"].max(),
    })
    complete = table["completed_turns"] == table["turns"]
    table["total_ms"] = (table["last_token_ms"] - table["first_release_ms"]).where(complete)
    table["status"] = np.where(complete, "completed", "incomplete")
    return table.reset_index()[list(SESSION_COLUMNS)]


def session_summary(requests: pd.DataFrame,
                    max_concurrency: int | None) -> tuple[pd.DataFrame | None, dict[str, Any]]:
    """The sessions table (``None`` without sessions) and the summary keys: ``num_sessions``,
    ``completed_sessions`` and ``{stat}_session_total_ms`` (completed sessions);
    ``unreleased_requests`` (closed loop: requests that waited on a rejected one); with a cap,
    ``{stat}_release_wait_ms`` (requests that entered)."""
    out: dict[str, Any] = {}
    sessions = None
    if "session_id" in requests.columns:
        out["unreleased_requests"] = int(requests["reason"].str.startswith(UNRELEASED).sum())
        if (requests["session_id"] != "").any():
            sessions = sessions_table(requests)
            out["num_sessions"] = len(sessions)
            out["completed_sessions"] = int((sessions["status"] == "completed").sum())
            _put(out, "session_total_ms", sessions["total_ms"].to_numpy(dtype=np.float64))
    if max_concurrency is not None:
        wait = (requests["arrival_ms"] - requests["release_ms"]).to_numpy(dtype=np.float64)
        _put(out, "release_wait_ms", wait)
    return sessions, out


def _put(out: dict[str, Any], metric: str, values: np.ndarray) -> None:
    stats = weighted_stats(values)
    for name in STAT_NAMES:
        out[f"{name}_{metric}"] = stats[name]
