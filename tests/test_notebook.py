"""plansim.replay, for notebooks: one call, a result with the tables and summary that shows
its headline cards in Jupyter and writes its report."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import plansim
from plansim.errors import InputError

ROOT = Path(__file__).resolve().parents[1]
MICRO = ROOT / "tests" / "sim" / "reference" / "micro" / "M7-round-robin.jsonl"


def _replay(**options):
    return plansim.replay(
        MICRO,
        {"num_workers": 3, "sla": {"ttft_ms": 1000, "tpot_ms": 50}},
        trace_format="mooncake",
        trace_block_size=512,
        **options,
    )


def test_one_call_replays_as_the_command_does(tmp_path, run_cli):
    run = _replay()
    code, _, err = run_cli(
        "replay",
        "run",
        str(MICRO),
        "--format",
        "mooncake",
        "--trace-block-size",
        "512",
        "--num-workers",
        "3",
        "--sla-ttft-ms",
        "1000",
        "--sla-tpot-ms",
        "50",
        "--out",
        str(tmp_path / "cli"),
        "--no-report",
    )
    assert code == 0, err
    assert run.summary == json.loads((tmp_path / "cli" / "summary.json").read_text())
    assert len(run.requests) == 6 and run.ticks is None and run.scaling_events == []
    assert repr(run) == (
        f"<plansim Replay: 6 requests, goodput 100.0%, {run.summary['gpu_hours']:.4f} GPU-hours>"
    )


def test_in_jupyter_it_shows_the_report_s_headline_cards():
    html = _replay()._repr_html_()
    assert html.startswith('<div class="plansim"><style>.plansim .cards{')
    for card in ("goodput", "gpu_hours", "p90_ttft", "p90_tpot"):
        assert f'data-card="{card}"' in html
    assert "Goodput scored against TTFT ≤ 1000 ms and TPOT ≤ 50 ms." in html


def test_report_writes_the_output_folder_and_refuses_to_mix_runs(tmp_path):
    run = _replay(overrides={"num_workers": 2})
    page = run.report(tmp_path / "out")
    assert page == tmp_path / "out" / "report.html" and page.is_file()
    assert json.loads((tmp_path / "out" / "summary.json").read_text()) == run.summary
    assert (
        json.loads((tmp_path / "out" / "inputs.json").read_text())["deployment"]["num_workers"] == 2
    )
    with pytest.raises(InputError, match="already holds a run"):
        run.report(tmp_path / "out")
    assert run.report(tmp_path / "out", force=True) == page
