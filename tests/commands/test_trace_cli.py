"""`plansim trace inspect|convert|synth`: output, help, and one-line errors with exit status 2."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import orjson
import pytest

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"
SAMPLE = Path(__file__).resolve().parents[2] / "examples" / "traces" / "sample.dynamo.jsonl.gz"


@pytest.mark.parametrize(
    ("name", "needles"),
    [
        ("AzureLLMInferenceTrace_code.csv.gz", ["requests 8,819", "3,435.9 s", "mean 2.567 req/s"]),
        ("mooncake_synthetic_trace.jsonl.gz", ["requests 3,993", "1,022.0 s", "<= 64.0%"]),
        (
            "mooncake_synthetic.dynamo.jsonl.gz",
            ["requests 3,993", "recorded TTFT", "block size    512"],
        ),
    ],
)
def test_inspect_every_carried_public_trace(name, needles, run_cli):
    code, out, err = run_cli("trace", "inspect", str(TRACES / name))
    assert code == 0, err
    for needle in needles:
        assert needle in out
    assert "peak 1-minute" in out and "p99" in out


def test_inspect_sample_as_json(run_cli):
    code, out, _ = run_cli("trace", "inspect", str(SAMPLE), "--json")
    d = orjson.loads(out)
    assert code == 0 and d["requests"] > 1_000 and d["span_s"] <= 600
    assert SAMPLE.stat().st_size < 1_000_000


def test_bad_trace_is_one_line_naming_file_line_and_field(tmp_path, run_cli):
    row = {
        "schema": "dynamo.request.trace.v1",
        "event_type": "request_end",
        "request": {
            "request_id": "a",
            "request_received_ms": 1,
            "output_tokens": 1,
            "replay": {
                "trace_block_size": 512,
                "input_length": 1600,
                "input_sequence_hashes": [1, 2, 3],
            },
        },
    }
    p = tmp_path / "trace.jsonl.gz"
    p.write_bytes(gzip.compress(orjson.dumps(row) + b"\n"))
    code, out, err = run_cli("trace", "inspect", str(p))
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.strip() == (
        f"plansim: {p}:1: replay.input_sequence_hashes has 3 entries, expected 4 "
        "for input_length 1600 and trace_block_size 512"
    )


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["inspect", "/nonexistent/trace.jsonl"], "no such file"),
        (["inspect", str(TRACES / "SOURCES.md")], "unknown trace format"),
        (["inspect", str(SAMPLE), "--format", "csv"], "--format"),
        (["convert", str(SAMPLE), "x.jsonl", "--to", "parquet"], "--to"),
        (["synth", "--rate", "1", "--duration", "-5", "-o", "x.jsonl.gz"], "--duration"),
        (
            ["synth", "--rate", "1", "--duration", "5", "-o", "x.jsonl.gz", "--step", "oops"],
            "--step",
        ),
    ],
)
def test_user_mistakes_exit_2_with_one_line(monkeypatch, tmp_path, args, needle, run_cli):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli("trace", *args)
    assert code == 2
    assert err.count("\n") == 1 and needle in err


def test_convert_round_trip_keeps_requests(tmp_path, run_cli):
    mc = tmp_path / "s.jsonl"
    back = tmp_path / "s.dynamo.jsonl.gz"
    assert run_cli("trace", "convert", str(SAMPLE), str(mc), "--to", "mooncake")[0] == 0
    assert run_cli("trace", "convert", str(mc), str(back), "--to", "dynamo")[0] == 0
    _, a, _ = run_cli("trace", "inspect", str(SAMPLE), "--json")
    _, b, _ = run_cli("trace", "inspect", str(back), "--json")
    da, db = orjson.loads(a), orjson.loads(b)
    for key in (
        "requests",
        "span_s",
        "isl_tokens",
        "osl_tokens",
        "blocks",
        "prefix_reuse_upper_bound",
    ):
        assert da[key] == db[key]


def test_synth_is_seeded_and_follows_options(tmp_path, run_cli):
    args = [
        "synth",
        "--rate",
        "4",
        "--duration",
        "120",
        "--schedule",
        "diurnal",
        "--isl",
        "fixed",
        "--isl-mean",
        "1000",
        "--osl",
        "fixed",
        "--osl-mean",
        "10",
        "--seed",
        "3",
    ]
    a, b = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    assert run_cli("trace", *args, "-o", str(a))[0] == 0
    assert run_cli("trace", *args, "-o", str(b))[0] == 0
    assert a.read_bytes() == b.read_bytes()
    _, out, _ = run_cli("trace", "inspect", str(a), "--json")
    d = orjson.loads(out)
    assert d["isl_tokens"]["max"] == 1000 and d["osl_tokens"]["mean"] == 10
    assert abs(d["requests"] - 480) < 5 * 480**0.5


@pytest.mark.parametrize("command", ["inspect", "convert", "synth"])
def test_help_explains_every_option(command, run_cli):
    import typer

    from plansim.commands.trace import app

    code, out, _ = run_cli("trace", command, "--help")
    assert code == 0
    params = typer.main.get_command(app).commands[command].params
    assert params
    for param in params:
        assert getattr(param, "help", None), f"{command}: {param.name} has no help"
        assert param.opts[0].lstrip("-").split("-")[0] in out.lower() or param.name.upper() in out


def test_synth_closed_loop_writes_sessions_that_inspect_counts(tmp_path, run_cli):
    out = tmp_path / "s.jsonl"
    code, _, err = run_cli(
        "trace",
        "synth",
        "--rate",
        "2",
        "--duration",
        "60",
        "--turns",
        "3",
        "--inter-turn-delay",
        "5",
        "--closed-loop",
        "--to",
        "mooncake",
        "-o",
        str(out),
    )
    assert code == 0, err
    rows = [json.loads(x) for x in out.read_text().splitlines()]
    later = [r for r in rows if "delay" in r]
    assert later and all(r["delay"] == 5000 and "timestamp" not in r for r in later)
    code, text, _ = run_cli("trace", "inspect", str(out), "--json")
    d = json.loads(text)
    sessions = len({r["session_id"] for r in rows})
    assert d["sessions"] == sessions and d["dependency_edges"] == len(later)
    assert d["turns_per_session"]["max"] == 3.0
    code, _, err = run_cli(
        "trace",
        "synth",
        "--rate",
        "2",
        "--duration",
        "60",
        "--turns",
        "3",
        "--closed-loop",
        "-o",
        str(tmp_path / "d.jsonl.gz"),
    )
    assert code == 2 and "--to" in err
