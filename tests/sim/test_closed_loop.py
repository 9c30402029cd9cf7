"""Closed-loop replay, timed by hand from the reference formulas (simkit): a session's next turn
arrives when the previous one finished plus its delay, agent graphs release on dispatch and
completion, the concurrency cap serialises, delays speed up with the arrivals."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from simkit import decode_ms, prefill_ms

from plansim.sim.deployment import build_deployment
from plansim.sim.host import replay
from plansim.traces import load_workload

APPROX = {"abs": 1e-6}


def _trace(tmp_path, rows, name="t.jsonl"):
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return load_workload(path)


def _run(workload, **deployment):
    return replay(workload, build_deployment(deployment))


def _row(result, rid):
    return result.requests.set_index("request_id").loc[rid]


def _solo(isl: int, osl: int, cached: int = 0) -> float:
    """Time from arrival to last token of a lone request on an idle worker."""
    return prefill_ms(isl - cached) + sum(decode_ms(isl + k) for k in range(1, osl))


def test_second_turn_arrives_at_the_first_turns_end_plus_delay_and_reuses_its_prefix(tmp_path):
    w = _trace(
        tmp_path,
        [
            {
                "request_id": "a0",
                "session_id": "a",
                "timestamp": 0,
                "input_length": 1000,
                "output_length": 3,
                "hash_ids": [1, 2],
            },
            {
                "request_id": "a1",
                "session_id": "a",
                "delay": 100,
                "input_length": 1500,
                "output_length": 2,
                "hash_ids": [1, 2, 3],
            },
        ],
    )
    r = _run(w)
    end0 = _solo(1000, 3)  # 32.105859 + decode(1001) + decode(1002) = 43.688982
    assert end0 == pytest.approx(43.688982, abs=1e-6)
    t1 = _row(r, "a1")
    assert t1.release_ms == pytest.approx(end0 + 100, **APPROX)
    assert t1.arrival_ms == pytest.approx(end0 + 100, **APPROX)
    # Turn 1 left 1000 // 64 = 15 complete engine blocks (960 tokens) that turn 2 starts with.
    assert t1.reused_input_tokens == 960
    assert t1.ttft_ms == pytest.approx(prefill_ms(540), **APPROX)
    assert t1.last_token_ms == pytest.approx(end0 + 100 + _solo(1500, 2, cached=960), **APPROX)
    assert (t1.session_id, t1.turn_index) == ("a", 1)
    s = r.sessions.set_index("session_id").loc["a"]
    assert s.total_ms == pytest.approx(t1.last_token_ms, **APPROX)
    assert r.summary["num_sessions"] == 1 and r.summary["completed_sessions"] == 1


def test_under_congestion_a_turn_arrives_later_than_its_open_loop_timestamp(tmp_path):
    # b keeps the worker busy; a1's recorded timestamp (40) is before a0 can finish.
    w = _trace(
        tmp_path,
        [
            {
                "request_id": "b",
                "timestamp": 0,
                "input_length": 4000,
                "output_length": 20,
                "hash_ids": [9, 10, 11, 12, 13, 14, 15, 16],
            },
            {
                "request_id": "a0",
                "session_id": "a",
                "timestamp": 0,
                "input_length": 1000,
                "output_length": 3,
                "hash_ids": [1, 2],
            },
            {
                "request_id": "a1",
                "session_id": "a",
                "delay": 10,
                "timestamp": 40,
                "input_length": 1000,
                "output_length": 2,
                "hash_ids": [1, 2],
            },
        ],
    )
    closed = _run(w)
    # a0 and b prefill together (5000 new tokens), then a0 decodes twice beside b.
    a0_end = prefill_ms(5000) + decode_ms(4001 + 1001) + decode_ms(4002 + 1002)
    assert _row(closed, "a0").last_token_ms == pytest.approx(a0_end, **APPROX)
    assert _row(closed, "a1").arrival_ms == pytest.approx(a0_end + 10, **APPROX)
    assert a0_end + 10 > 40
    open_loop = _run(w.open_loop())
    assert _row(open_loop, "a1").arrival_ms == 40.0


def test_three_node_agent_graph_with_a_join(tmp_path):
    header = {
        "schema": "dynamo.agentic_mooncake",
        "version": 2,
        "block_size": 512,
        "hash_id_scope": "local",
        "source": {"format": "test", "digest": "x"},
    }

    def row(rid, nb, hashes, isl, deps=()):
        return {
            "request_id": rid,
            "play_id": "p",
            "session_id": rid,
            "model": "m",
            "input_length": isl,
            "output_length": 3,
            "hash_ids": hashes,
            "not_before_ms": nb,
            "dependencies": [
                {"request_id": d, "trigger": t, "delay_ms": ms, "relation": rel}
                for d, t, ms, rel in deps
            ],
        }

    w = _trace(
        tmp_path,
        [
            header,
            row("root", 0, [1, 2], 1000),
            row("left", 0, [3, 4], 600, [("root", "completion", 10, "spawn")]),
            row("right", 0, [5, 6], 600, [("root", "dispatch", 500, "spawn")]),
            row(
                "join",
                0,
                [1, 2, 7],
                1100,
                [("left", "completion", 20, "join"), ("right", "completion", 20, "join")],
            ),
        ],
    )
    r = _run(w)
    root_end = _solo(1000, 3)
    left_at = root_end + 10  # root's completion + 10
    right_at = 0.0 + 500  # root's dispatch (0) + 500
    right_end = right_at + _solo(600, 3)
    assert _row(r, "left").arrival_ms == pytest.approx(left_at, **APPROX)
    assert _row(r, "right").arrival_ms == pytest.approx(right_at, **APPROX)
    # The join waits for the later of its two sources (right) and reuses root's 960 tokens.
    join = _row(r, "join")
    assert join.arrival_ms == pytest.approx(right_end + 20, **APPROX)
    assert join.reused_input_tokens == 960
    assert join.ttft_ms == pytest.approx(prefill_ms(1100 - 960), **APPROX)


def test_a_cap_of_one_serialises_the_trace_with_timestamps_as_earliest_start(tmp_path):
    w = _trace(
        tmp_path,
        [
            {
                "request_id": f"r{i}",
                "timestamp": ts,
                "input_length": 100,
                "output_length": 2,
                "hash_ids": [i + 1],
            }
            for i, ts in enumerate([0, 0, 1, 5_000])
        ],
    )
    r = _run(w, max_concurrency=1)
    one = _solo(100, 2)
    rows = [_row(r, f"r{i}") for i in range(4)]
    assert [x.release_ms for x in rows] == [0.0, 0.0, 1.0, 5_000.0]
    assert [x.arrival_ms for x in rows] == pytest.approx([0.0, one, 2 * one, 5_000.0], **APPROX)
    for prev, nxt in itertools.pairwise(rows[:3]):
        assert nxt.arrival_ms == pytest.approx(prev.last_token_ms, **APPROX)
    assert all(x.ttft_ms == pytest.approx(prefill_ms(100), **APPROX) for x in rows)
    assert r.summary["max_release_wait_ms"] == pytest.approx(2 * one - 1.0, **APPROX)


def test_speedup_divides_think_times_and_first_turn_gaps(tmp_path):
    w = _trace(
        tmp_path,
        [
            {
                "request_id": "a0",
                "session_id": "a",
                "timestamp": 1000,
                "input_length": 300,
                "output_length": 2,
                "hash_ids": [1],
            },
            {
                "request_id": "a1",
                "session_id": "a",
                "delay": 100,
                "input_length": 300,
                "output_length": 2,
                "hash_ids": [2],
            },
            {
                "request_id": "b0",
                "session_id": "b",
                "timestamp": 3000,
                "input_length": 300,
                "output_length": 2,
                "hash_ids": [3],
            },
        ],
    )
    r = _run(w, arrival_speedup_ratio=2.0)
    a0_end = _solo(300, 2)
    assert _row(r, "a1").arrival_ms == pytest.approx(a0_end + 50, **APPROX)
    assert _row(r, "b0").arrival_ms == 1000.0


def test_a_rejected_turn_releases_the_next_one_but_blocks_graph_dependents(tmp_path):
    # 20 blocks of 64 tokens cannot hold 3000 prompt tokens: a0 is rejected at once.
    w = _trace(
        tmp_path,
        [
            {
                "request_id": "a0",
                "session_id": "a",
                "timestamp": 0,
                "input_length": 3000,
                "output_length": 3,
                "hash_ids": [1, 2, 3, 4, 5, 6],
            },
            {
                "request_id": "a1",
                "session_id": "a",
                "delay": 100,
                "input_length": 300,
                "output_length": 2,
                "hash_ids": [9],
            },
        ],
    )
    r = _run(w, engine={"num_gpu_blocks": 20})
    assert _row(r, "a0").status == "rejected"
    assert _row(r, "a1").arrival_ms == 100.0 and _row(r, "a1").status == "completed"

    header = {"schema": "dynamo.agentic_mooncake", "version": 2, "block_size": 512}
    g = _trace(
        tmp_path,
        [
            header,
            {
                "request_id": "a",
                "session_id": "s",
                "input_length": 3000,
                "output_length": 3,
                "hash_ids": [1, 2, 3, 4, 5, 6],
                "not_before_ms": 0,
            },
            {
                "request_id": "b",
                "session_id": "s",
                "input_length": 300,
                "output_length": 2,
                "hash_ids": [9],
                "not_before_ms": 0,
                "dependencies": [
                    {
                        "request_id": "a",
                        "trigger": "completion",
                        "delay_ms": 1,
                        "relation": "sequence",
                    }
                ],
            },
        ],
        name="g.jsonl",
    )
    r = _run(g, engine={"num_gpu_blocks": 20})
    b = _row(r, "b")
    assert b.status == "incomplete" and np.isnan(b.release_ms)
    assert b.reason == "never released: waits on rejected request a"
    assert r.summary["unreleased_requests"] == 1
