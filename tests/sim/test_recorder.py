"""What a replay records: the per-second time series and the token-gap samples."""

from __future__ import annotations

import pytest

from simkit import run


def test_time_series_counts_tokens_arrivals_and_prefix_reuse_per_second():
    # A (50 tokens) finishes within second 0; B arrives at 1.0 s reusing 1024 of 1500 tokens.
    r = run([(0.0, 1500, 50, [1, 2, 3]), (1000.0, 1500, 50, [1, 2, 4])])
    ts = r.timeseries.set_index("time_s")
    assert ts.loc[1.0, "output_tok_s"] == 50.0   # A's tokens, all in second 0
    assert ts.loc[1.0, "arrivals"] == 1          # B, in (0 s, 1 s]
    assert ts.loc[2.0, "output_tok_s"] == 50.0   # B's tokens, all in second 1
    assert ts.loc[2.0, "prefix_reuse"] == pytest.approx(1024 / 1500)
    assert set(ts["ready"]) == {1}


def test_every_token_gap_is_sampled_once():
    r = run([(0.0, 1000, 10, [1, 2]), (5.0, 700, 7, [3, 4])], num_workers=1)
    # gaps = sum(osl - 1); their mean is the token-weighted mean TPOT. Gaps are kept to the
    # microsecond, so the mean agrees within half a microsecond.
    n_gaps = 9 + 6
    req = r.requests
    total = ((req["last_token_ms"] - req["first_token_ms"])).sum()
    assert r.summary["mean_itl_ms"] == pytest.approx(total / n_gaps, abs=5e-4)
