"""``ReplayResult``: what ``sim.replay`` returns, and the table schemas reports read.

Tables (``plansim.result_table.Table`` columns in ``ReplayResult.tables``, as pandas DataFrames
from the properties of the same names, built on first use; times in ms of virtual time from the
first arrival unless named _s):

``requests`` (one row per request, in workload order):
    request_id (str), release_ms (when it became eligible: its trace arrival, or for a
    closed-loop request when its dependencies fired), arrival_ms (when it entered the cluster:
    the release, or later under ``max_concurrency``), first_admit_ms, first_token_ms,
    last_token_ms, ttft_ms, ttst_ms, e2e_latency_ms, tpot_ms (latencies count from
    arrival_ms), input_length, output_length, reused_input_tokens (int), prefill_worker,
    decode_worker (int, -1 when none), admission_count, readmission_count (int), status (str:
    completed | rejected | incomplete), reason (str, "" when completed; "never released: ..."
    for a request waiting on a rejected one). Closed-loop replays add session_id (str, ""
    outside a session) and turn_index (int, -1 outside a session).
    Latency columns are NaN where undefined.

``sessions`` (closed-loop replays; one row per session, in order of first appearance; see
    ``plansim.sim.sessions``): session_id, turns, completed_turns (int), first_release_ms,
    last_token_ms, total_ms (first release to last token, NaN unless every turn completed),
    status (completed | incomplete).

``timeseries`` (long format, one row per pool per sampled second of virtual time):
    time_s (float), pool (str: agg | prefill | decode), ready, starting, draining (int workers),
    running, waiting (int requests), queued_prefill_tokens (int), kv_usage (float 0..1, mean over
    ready workers), prefix_reuse (float 0..1, reused / admitted input tokens in the interval),
    arrivals (int, requests arriving in the interval), output_tok_s (float).

``workers`` (one row per worker ever provisioned):
    worker_id (int), pool (str), ready_at_ms, removed_at_ms (NaN if never), requests (int),
    input_tokens, output_tokens (int), reused_input_tokens (int).

``ticks`` (planner runs only; one row per tick): at_s plus the planner's diagnostics columns.

``scaling_events`` (list of dicts): at_s, component (agg | prefill | decode), from_count,
    to_count, reason, applied (bool; False in advisory mode).

``retune_events``: list of decision records when retune is set, else ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from plansim.result_table import Table


@dataclass(frozen=True, slots=True)
class ReplayResult:
    """``tables``: ``requests``, ``timeseries``, ``workers`` and, for a closed-loop replay,
    ``sessions``; the properties of those names give each as a DataFrame (built once)."""

    summary: dict[str, Any]
    tables: dict[str, Table]
    ticks: pd.DataFrame | None = None
    scaling_events: list[dict[str, Any]] = field(default_factory=list)
    retune_events: list[dict[str, Any]] | None = None
    inputs: dict[str, Any] = field(default_factory=dict)
    _frames: dict[str, pd.DataFrame] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    def frame(self, name: str) -> pd.DataFrame | None:
        """Table ``name`` as a DataFrame (None when the replay has no such table)."""
        if name not in self._frames:
            table = self.tables.get(name)
            self._frames[name] = None if table is None else table.to_pandas()
        return self._frames[name]

    @property
    def requests(self) -> pd.DataFrame:
        return self.frame("requests")

    @property
    def timeseries(self) -> pd.DataFrame:
        return self.frame("timeseries")

    @property
    def workers(self) -> pd.DataFrame:
        return self.frame("workers")

    @property
    def sessions(self) -> pd.DataFrame | None:
        return self.frame("sessions")
