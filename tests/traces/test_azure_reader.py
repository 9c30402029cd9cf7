"""Azure LLM inference CSV reader."""

from __future__ import annotations

import pytest

from plansim.errors import TraceError
from plansim.traces import load_workload

HEADER = "TIMESTAMP,ContextTokens,GeneratedTokens\n"


def test_seven_fractional_digits_and_unshared_blocks(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text(HEADER + "2023-11-16 18:17:03.9799600,1000,10\n2023-11-16 18:17:04.0319600,513,8")
    w = load_workload(p)
    # 18:17:03.97996 UTC on 2023-11-16 is 1700158623979.96 ms after the epoch.
    assert w.arrival_ms[0] == pytest.approx(1_700_158_623_979.96, abs=1e-3)
    assert w.arrival_ms[1] - w.arrival_ms[0] == pytest.approx(52.0, abs=1e-6)
    assert w.isl_tokens.tolist() == [1_000, 513]
    assert w.osl_tokens.tolist() == [10, 8]
    # ceil(1000/512) = 2 and ceil(513/512) = 2 blocks, none shared.
    assert w.hash_offsets.tolist() == [0, 2, 4]
    assert sorted(w.hash_ids.tolist()) == [0, 1, 2, 3]
    assert w.request_id.tolist() == ["0", "1"]


def test_rows_with_different_utc_offsets_are_one_clock(tmp_path):
    # the second row is 18:17:04.5 UTC written at +01:00; the first carries no offset (UTC)
    p = tmp_path / "a.csv"
    p.write_text(HEADER + "2023-11-16 18:17:04.0,10,1\n2023-11-16 19:17:04.5+01:00,10,1\n")
    w = load_workload(p, format="azure")
    assert w.arrival_ms[1] - w.arrival_ms[0] == pytest.approx(500.0, abs=1e-6)


@pytest.mark.parametrize(
    ("row", "field"),
    [
        ("yesterday,10,1", "TIMESTAMP"),
        ("2023-11-16 18:17:04.0,ten,1", "ContextTokens"),
        ("2023-11-16 18:17:04.0,10,-1", "GeneratedTokens"),
        ("2023-11-16 18:17:04.0,10,1.5", "GeneratedTokens"),
    ],
)
def test_bad_cells_name_line_and_column(tmp_path, row, field):
    p = tmp_path / "a.csv"
    p.write_text(HEADER + "2023-11-16 18:17:03.0,5,1\n" + row + "\n")
    with pytest.raises(TraceError) as info:
        load_workload(p, format="azure")
    assert (info.value.line, info.value.field) == (3, field)


def test_missing_column(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text("TIMESTAMP,ContextTokens\n2023-11-16 18:17:03.0,5\n")
    with pytest.raises(TraceError) as info:
        load_workload(p, format="azure")
    assert info.value.field == "GeneratedTokens"


def test_header_only_is_empty(tmp_path):
    p = tmp_path / "a.csv"
    p.write_text(HEADER)
    with pytest.raises(TraceError, match="empty"):
        load_workload(p)
