"""Writers: what they write reads back as the same workload."""

from __future__ import annotations

import gzip

import numpy as np
import orjson
from trace_files import dynamo_row, mooncake_row, write_jsonl

from plansim.traces import load_workload
from plansim.traces.synth import LengthSpec, SynthSpec, synthesize
from plansim.traces.writers import write_dynamo, write_mooncake


def _same(a, b, *, arrival_shift=0.0):
    assert np.allclose(a.arrival_ms + arrival_shift, b.arrival_ms)
    assert a.isl_tokens.tolist() == b.isl_tokens.tolist()
    assert a.osl_tokens.tolist() == b.osl_tokens.tolist()
    assert a.request_id.tolist() == b.request_id.tolist()
    assert a.hash_offsets.tolist() == b.hash_offsets.tolist()
    # Ids carry no order, only identity: the two id columns must map one-to-one.
    pairs = set(zip(a.hash_ids.tolist(), b.hash_ids.tolist(), strict=True))
    assert len(pairs) == len(set(a.hash_ids.tolist())) == len(set(b.hash_ids.tolist()))


def test_dynamo_round_trip_keeps_latencies(tmp_path):
    rows = [
        dynamo_row("a", 1_000, isl=1_500, total_ms=250.0, ttft_ms=40.5),
        dynamo_row("b", 1_200, isl=700, hashes=None),
    ]
    w = load_workload(write_jsonl(tmp_path / "t.jsonl", rows))
    out = write_dynamo(w, tmp_path / "out.jsonl.gz")
    back = load_workload(out)
    _same(w, back)
    assert back.recorded_total_ms[0] == 250.0 and back.recorded_ttft_ms[0] == 40.5
    assert np.isnan(back.recorded_total_ms[1])
    first = orjson.loads(gzip.decompress(out.read_bytes()).splitlines()[0])
    assert first["event_time_unix_ms"] == 1_250  # received + total
    assert first["request"]["request_received_ms"] == 1_000


def test_dynamo_writer_takes_simulated_latencies(tmp_path):
    w = synthesize(
        SynthSpec(duration_s=30, rate_rps=2, isl=LengthSpec.fixed(900), osl=LengthSpec.fixed(10)),
        seed=1,
    )
    total = np.arange(len(w), dtype=float) * 10 + 100
    ttft = np.full(len(w), np.nan)
    back = load_workload(
        write_dynamo(w, tmp_path / "s.jsonl.gz", total_ms=total, ttft_ms=ttft, epoch_ms=1_000_000)
    )
    assert back.recorded_total_ms.tolist() == total.tolist()
    assert np.isnan(back.recorded_ttft_ms).all()
    # Arrivals are rounded to whole ms by the format.
    assert np.allclose(back.arrival_ms, np.round(w.arrival_ms + 1_000_000))


def test_dynamo_writer_uses_one_gzip_member_per_ten_thousand_rows(tmp_path):
    w = synthesize(
        SynthSpec(duration_s=60, rate_rps=400, isl=LengthSpec.fixed(10), osl=LengthSpec.fixed(1)),
        seed=2,
    )
    out = write_dynamo(w, tmp_path / "big.jsonl.gz")
    assert out.read_bytes().count(b"\x1f\x8b\x08") >= -(-len(w) // 10_000)
    assert len(load_workload(out)) == len(w)


def test_mooncake_round_trip(tmp_path):
    rows = [mooncake_row(0, 1_000, 5, [10, 11]), mooncake_row(30, 600, 9, [10, 12])]
    w = load_workload(write_jsonl(tmp_path / "m.jsonl", rows))
    back = load_workload(write_mooncake(w, tmp_path / "out.jsonl"))
    _same(w, back)


def test_mooncake_timestamps_start_at_zero(tmp_path):
    rows = [dynamo_row("a", 5_000), dynamo_row("b", 5_250)]
    w = load_workload(write_jsonl(tmp_path / "t.jsonl", rows))
    out = write_mooncake(w, tmp_path / "m.jsonl")
    stamps = [orjson.loads(line)["timestamp"] for line in out.read_bytes().splitlines()]
    assert stamps == [0, 250]
    assert not list(tmp_path.glob(".*.tmp"))


def test_a_written_simulated_workload_can_be_cut_into_windows(tmp_path):
    from plansim.traces.windows import read_window

    w = synthesize(
        SynthSpec(duration_s=60, rate_rps=5, isl=LengthSpec.fixed(600), osl=LengthSpec.fixed(20)),
        seed=4,
    )
    total = np.full(len(w), 2_000.0)  # every request takes 2 s
    path = write_dynamo(w, tmp_path / "sim.jsonl.gz", total_ms=total, epoch_ms=1_000_000)
    # Window [10 s, 20 s) cut at 21 s: arrivals after 19 s complete after the cutoff.
    win = read_window(path, start_ms=1_010_000, end_ms=1_020_000, cutoff_ms=1_021_000)
    received = np.round(w.arrival_ms + 1_000_000)
    in_window = (received >= 1_010_000) & (received < 1_020_000)
    late = in_window & (received + 2_000 > 1_021_000)
    assert len(win.workload) == int((in_window & ~late).sum())
    assert win.counts["censored"] == int(late.sum()) > 0


def _graph_edges(w):
    g = w.graph
    ids = w.request_id.tolist()
    return sorted(
        (ids[g.dep_source[e]], ids[i], int(g.dep_trigger[e]), float(g.dep_delay_ms[e]))
        for i in range(len(w))
        for e in range(g.dep_offsets[i], g.dep_offsets[i + 1])
    )


def test_mooncake_session_form_round_trips(tmp_path):
    spec = SynthSpec(
        duration_s=300, rate_rps=0.3, turns_per_session=3, inter_turn_delay_s=7, closed_loop=True
    )
    w = synthesize(spec, seed=3)
    back = load_workload(write_mooncake(w, tmp_path / "s.jsonl"))
    rows = [orjson.loads(x) for x in (tmp_path / "s.jsonl").read_bytes().splitlines()]
    assert all(("delay" in r) == ("timestamp" not in r) for r in rows)
    assert _graph_edges(back) == _graph_edges(w)
    assert np.allclose(back.arrival_ms - back.arrival_ms[0], w.arrival_ms - w.arrival_ms[0])


def test_agentic_mooncake_round_trips_any_graph(tmp_path):
    from plansim.traces.writers import write_agentic_mooncake

    rows = [
        dynamo_row("src", 0, total_ms=100.0),
        dynamo_row("k1", 150, total_ms=100.0),
        dynamo_row("cons", 500, total_ms=100.0),
    ]
    for r, ctx in zip(
        rows,
        [{"session_id": "p"}, {"session_id": "k", "parent_session_id": "p"}, {"session_id": "p"}],
        strict=True,
    ):
        r["agent_context"] = ctx
    w = load_workload(write_jsonl(tmp_path / "t.jsonl", rows))
    back = load_workload(write_agentic_mooncake(w, tmp_path / "a.jsonl"))
    assert _graph_edges(back) == _graph_edges(w)
    assert back.graph.session_ids.tolist() == w.graph.session_ids.tolist()


def test_closed_loop_workload_is_refused_where_the_format_cannot_hold_it(tmp_path):
    import pytest

    from plansim.errors import InputError

    spec = SynthSpec(duration_s=300, rate_rps=0.3, turns_per_session=2, closed_loop=True)
    with pytest.raises(InputError):
        write_dynamo(synthesize(spec, seed=1), tmp_path / "d.jsonl.gz")
