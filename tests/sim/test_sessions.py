"""Per-session results: total time from first release to last token, completed sessions only,
and the summary keys (all labelled in the shared schema)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from plansim import schema
from plansim.sim.sessions import session_summary, sessions_table


def _requests():
    return pd.DataFrame(
        {
            "request_id": ["a0", "a1", "b0", "b1", "x"],
            "session_id": ["a", "a", "b", "b", ""],
            "release_ms": [0.0, 500.0, 100.0, 900.0, 50.0],
            "arrival_ms": [0.0, 600.0, 100.0, np.nan, 80.0],
            "last_token_ms": [200.0, 1_400.0, 300.0, np.nan, 90.0],
            "status": ["completed", "completed", "completed", "incomplete", "completed"],
            "reason": ["", "", "", "never released: waits on rejected request q", ""],
        }
    )


def test_session_total_runs_from_first_release_to_last_token_of_complete_sessions():
    t = sessions_table(_requests()).to_pandas().set_index("session_id")
    assert t.loc["a", "total_ms"] == 1_400.0 and t.loc["a", "status"] == "completed"
    assert np.isnan(t.loc["b", "total_ms"]) and t.loc["b", "status"] == "incomplete"
    assert t.loc["b", ["turns", "completed_turns"]].tolist() == [2, 1]
    assert list(t.index) == ["a", "b"]  # the request outside a session is no session


def test_summary_keys_are_counted_and_labelled():
    _, s = session_summary(_requests(), max_concurrency=2)
    assert (s["num_sessions"], s["completed_sessions"], s["unreleased_requests"]) == (2, 1, 1)
    assert s["mean_session_total_ms"] == 1_400.0
    # Waits of the requests that entered: 0, 100, 0, 30.
    assert s["max_release_wait_ms"] == 100.0 and s["mean_release_wait_ms"] == pytest.approx(32.5)
    distributions = {
        f"{st}_{m}" for m in schema.SUMMARY_DISTRIBUTIONS for st in schema.SUMMARY_STATS
    }
    assert set(s) - set(schema.SUMMARY_KEY_BY_NAME) - distributions == set()
