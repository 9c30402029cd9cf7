"""Agentic Mooncake: the header, request rows with explicit dependencies, and the rules for
dependencies that can never fire."""

from __future__ import annotations

import logging

import pytest
from trace_files import AGENTIC_HEADER, agentic_row, write_jsonl

from plansim.errors import TraceError
from plansim.traces import load_workload
from plansim.traces.graph import COMPLETION, DISPATCH


def _load(tmp_path, rows, header=AGENTIC_HEADER, **kw):
    return load_workload(write_jsonl(tmp_path / "a.jsonl", [header, *rows]), **kw)


def test_header_rows_and_a_join(tmp_path):
    w = _load(
        tmp_path,
        [
            agentic_row("root", "s0", 100),
            agentic_row("left", "s1", 0, [("root", "completion", 10)]),
            agentic_row("right", "s2", 0, [("root", "dispatch", 5)]),
            agentic_row("join", "s0", 0, [("left", "completion", 20), ("right", "completion", 20)]),
        ],
    )
    g = w.graph
    ids = w.request_id.tolist()
    edges = sorted(
        (ids[g.dep_source[e]], ids[i], int(g.dep_trigger[e]), float(g.dep_delay_ms[e]))
        for i in range(len(w))
        for e in range(g.dep_offsets[i], g.dep_offsets[i + 1])
    )
    assert edges == [
        ("left", "join", COMPLETION, 20.0),
        ("right", "join", COMPLETION, 20.0),
        ("root", "left", COMPLETION, 10.0),
        ("root", "right", DISPATCH, 5.0),
    ]
    # The clock starts at the smallest not_before_ms (0, of the dependent rows), as in the
    # reference: the root is released 100 ms in.
    assert g.origin_ms == 0.0 and w.trace_block_size == 512
    assert dict(zip(ids, w.arrival_ms.tolist(), strict=True)) == {
        "root": 100.0,
        "right": 105.0,
        "left": 110.0,
        "join": 130.0,
    }


def test_a_dependency_may_name_a_later_row(tmp_path):
    w = _load(
        tmp_path, [agentic_row("b", "s", 0, [("a", "completion", 1)]), agentic_row("a", "s", 50)]
    )
    assert w.request_id.tolist() == ["a", "b"]


def test_keys_without_effect_are_named_in_one_warning(tmp_path, caplog):
    with caplog.at_level(logging.WARNING):
        _load(
            tmp_path, [agentic_row("a", "s", 0, priority=3), agentic_row("b", "s", 0, priority=1)]
        )
    assert [r.message.count("priority") for r in caplog.records] == [1]


@pytest.mark.parametrize(
    ("rows", "line", "field"),
    [
        (
            [
                agentic_row("a", "s", 0, [("b", "completion", 1)]),
                agentic_row("b", "s", 0, [("a", "completion", 1)]),
            ],
            2,
            "dependencies",
        ),
        (
            [agentic_row("a", "s", 0), agentic_row("b", "s", 0, [("zz", "completion", 1)])],
            3,
            "dependencies[0].request_id",
        ),
        (
            [
                agentic_row("a", "s", 0, play_id="p1"),
                agentic_row("b", "s", 0, [("a", "completion", 1)], play_id="p2"),
            ],
            3,
            "dependencies[0].request_id",
        ),
        (
            [agentic_row("a", "s", 0), agentic_row("b", "s", 0, [("a", "completion", -1)])],
            3,
            "dependencies[0].delay_ms",
        ),
        (
            [agentic_row("a", "s", 0), agentic_row("b", "s", 0, [("a", "whenever", 1)])],
            3,
            "dependencies[0].trigger",
        ),
        ([agentic_row("a", "s", 0, model="m1"), agentic_row("b", "s", 0, model="m2")], 3, "model"),
        ([agentic_row("a", "s", -5)], 2, "not_before_ms"),
        ([agentic_row("a", "s", 0, output_length=2**63)], 2, "output_length"),
        # A prompt past its blocks (1 of 512 tokens), or past 10^7 tokens, is never cut.
        ([agentic_row("a", "s", 0), agentic_row("b", "s", 0, input_length=513)], 3, "input_length"),
        (
            [agentic_row("a", "s", 0, input_length=10**7 + 1, hash_ids=list(range(20_000)))],
            2,
            "input_length",
        ),
        ([agentic_row("a", "s", 0, output_length=10**7 + 1)], 2, "output_length"),
        ([agentic_row("a", "s", 0, colour="red")], 2, "colour"),
        ([AGENTIC_HEADER], 2, "schema"),
    ],
)
def test_bad_rows_name_line_and_field(tmp_path, rows, line, field):
    with pytest.raises(TraceError) as info:
        _load(tmp_path, rows)
    assert (info.value.line, info.value.field) == (line, field)


def test_header_is_required_and_checked(tmp_path):
    with pytest.raises(TraceError) as info:
        load_workload(
            write_jsonl(tmp_path / "a.jsonl", [agentic_row("a", "s", 0)]), format="agentic_mooncake"
        )
    assert (info.value.line, info.value.field) == (1, "schema")
    with pytest.raises(TraceError) as info:
        _load(tmp_path, [agentic_row("a", "s", 0)], trace_block_size=64)
    assert info.value.field == "block_size"
    with pytest.raises(TraceError) as info:
        _load(tmp_path, [agentic_row("a", "s", 0)], header={**AGENTIC_HEADER, "version": 1})
    assert info.value.field == "version"


def test_the_capacity_error_says_what_the_blocks_hold(tmp_path):
    with pytest.raises(TraceError) as info:
        _load(tmp_path, [agentic_row("a", "s", 0, input_length=5_000)])
    assert str(info.value).endswith(
        ":2: input_length 5000 exceeds hash_ids capacity 512 (1 hash "
        "id of 512 tokens); the prompt would be cut"
    )
