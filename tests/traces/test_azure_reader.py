"""Azure LLM inference CSV reader."""

from __future__ import annotations

import io

import numpy as np
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
        # Past 10^7 tokens per request (plansim.limits), in the plain and the pandas paths.
        ("2023-11-16 18:17:04.0,10000001,1", "ContextTokens"),
        ("2023-11-16 18:17:04.0,10,99999999999999", "GeneratedTokens"),
        ('"2023-11-16 18:17:04.0",1e20,1', "ContextTokens"),
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


PLAIN_FILES = {
    "lf": HEADER + "2023-11-16 18:17:03.9799600,1000,10\n2023-11-16 18:17:04.0319600,513,8\n",
    "crlf-no-final-newline": HEADER.replace("\n", "\r\n")
    + "2023-11-16 18:17:03.9799600,1000,10\r\n2023-11-16T18:17:04,0,8",
    "nine-digits-and-none": HEADER + "2023-11-16 18:17:03.123456789,7,1\n2024-02-29 00:00:00,1,0\n",
    "other-column-order-and-extra": "GeneratedTokens,Extra,TIMESTAMP,ContextTokens\n"
    "3,x,2023-11-16 18:17:03.5,100\n4,y,2023-11-16 18:17:03.25,200\n",
}


@pytest.mark.parametrize("name", sorted(PLAIN_FILES))
def test_a_plain_file_is_read_without_pandas_to_the_same_columns(name):
    from plansim.traces import azure

    data = PLAIN_FILES[name].encode()
    plain = azure._read_plain(data)
    assert plain is not None
    general = azure._read_pandas(io.BytesIO(data), "a.csv")
    for ours, theirs in zip(plain, general):
        assert ours.dtype == theirs.dtype and np.array_equal(ours, theirs)


@pytest.mark.parametrize(
    "text",
    [
        HEADER + '"2023-11-16 18:17:03.9",10,1\n',  # quoted
        HEADER + "2023-11-16 18:17:03.9,10,1\n\n2023-11-16 18:17:04.9,10,1\n",  # blank line
        HEADER + "2023-11-16 18:17:03.9+01:00,10,1\n",  # an offset
        HEADER + "2023-02-30 18:17:03.9,10,1\n",  # no such day
        HEADER + "2023-11-16 18:17:03.9, 10,1\n",  # a space
        HEADER + "2023-11-16 18:17:03.9,10\n",  # ragged
        HEADER,  # header only
    ],
)
def test_anything_else_goes_to_the_general_reader(text):
    from plansim.traces import azure

    assert azure._read_plain(text.encode()) is None


def test_a_crlf_file_like_the_public_one_loads_through_the_plain_reader(tmp_path):
    from plansim.traces import azure

    p = tmp_path / "a.csv"
    p.write_bytes(PLAIN_FILES["crlf-no-final-newline"].encode())
    w = load_workload(p, format="azure")
    # 18:17:04 is 20.04 ms after 18:17:03.97996 (ms since the epoch: float64 steps of 2^-12).
    assert w.arrival_ms[1] - w.arrival_ms[0] == pytest.approx(20.04, abs=1e-3)
    assert w.isl_tokens.tolist() == [1000, 0] and w.osl_tokens.tolist() == [10, 8]
    assert azure._read_plain(p.read_bytes()) is not None
