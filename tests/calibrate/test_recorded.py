"""What calibration reads from a trace, and every trace it refuses: one error naming the file
(and the line and field where one row is at fault)."""

from __future__ import annotations

import numpy as np
import pytest

from plansim.calibrate import MIN_REQUESTS, load_recorded
from plansim.errors import InputError
from plansim.traces.writers import write_dynamo, write_mooncake
from tests.calibrate.calibrate_traces import synthetic


@pytest.fixture(scope="module")
def workload():
    return synthetic(n=MIN_REQUESTS + 20)


def _latencies(n: int) -> tuple[np.ndarray, np.ndarray]:
    ttft = np.full(n, 50.0)
    return ttft, ttft + 100.0


def test_tpot_is_the_mean_gap_after_the_first_token(tmp_path, workload):
    n = len(workload)
    ttft, total = _latencies(n)
    path = write_dynamo(workload, tmp_path / "t.jsonl.gz", ttft_ms=ttft, total_ms=total)
    loaded, rec = load_recorded([path])
    osl = loaded.osl_tokens
    assert rec.scored.all()
    np.testing.assert_allclose(rec.tpot_ms[osl > 1], 100.0 / (osl[osl > 1] - 1))
    assert np.isnan(rec.tpot_ms[osl <= 1]).all()


def test_a_request_without_latencies_is_replayed_but_not_scored(tmp_path, workload):
    n = len(workload)
    ttft, total = _latencies(n)
    ttft[3] = total[3] = np.nan  # rejected in production
    path = write_dynamo(workload, tmp_path / "t.jsonl.gz", ttft_ms=ttft, total_ms=total)
    loaded, rec = load_recorded([path])
    assert len(loaded) == n and rec.unrecorded == 1


def test_a_trace_format_without_latencies_is_refused(tmp_path, workload):
    path = write_mooncake(workload, tmp_path / "t.jsonl")
    with pytest.raises(InputError) as err:
        load_recorded([path])
    assert err.value.source == str(path)
    assert "records no latencies" in str(err.value)


def test_a_dynamo_trace_without_recorded_latencies_is_refused(tmp_path, workload):
    nan = np.full(len(workload), np.nan)
    path = write_dynamo(workload, tmp_path / "t.jsonl.gz", ttft_ms=nan, total_ms=nan)
    with pytest.raises(InputError) as err:
        load_recorded([path])
    assert err.value.source == str(path)
    assert "no request has recorded latencies" in str(err.value)


def test_a_first_token_after_the_last_names_its_line(tmp_path, workload):
    ttft, total = _latencies(len(workload))
    ttft[7] = total[7] + 1.0
    path = write_dynamo(workload, tmp_path / "t.jsonl.gz", ttft_ms=ttft, total_ms=total)
    with pytest.raises(InputError) as err:
        load_recorded([path])
    assert (err.value.source, err.value.line, err.value.field) == (str(path), 8, "ttft_ms")
    assert "after total_time_ms" in str(err.value)


def test_a_negative_latency_names_its_line(tmp_path, workload):
    ttft, total = _latencies(len(workload))
    total[4] = -5.0
    path = write_dynamo(workload, tmp_path / "t.jsonl.gz", ttft_ms=ttft, total_ms=total)
    with pytest.raises(InputError) as err:
        load_recorded([path])
    assert (err.value.source, err.value.line, err.value.field) == (str(path), 5, "total_time_ms")


def test_one_latency_without_the_other_names_the_missing_field(tmp_path, workload):
    ttft, total = _latencies(len(workload))
    total[2] = np.nan
    path = write_dynamo(workload, tmp_path / "t.jsonl.gz", ttft_ms=ttft, total_ms=total)
    with pytest.raises(InputError) as err:
        load_recorded([path])
    assert (err.value.line, err.value.field) == (3, "total_time_ms")


def test_too_few_recorded_requests_are_refused(tmp_path, workload):
    ttft, total = _latencies(len(workload))
    ttft[MIN_REQUESTS - 1 :] = total[MIN_REQUESTS - 1 :] = np.nan
    path = write_dynamo(workload, tmp_path / "t.jsonl.gz", ttft_ms=ttft, total_ms=total)
    with pytest.raises(InputError) as err:
        load_recorded([path])
    assert err.value.source == str(path)
    assert f"only {MIN_REQUESTS - 1} requests" in str(err.value)
