"""render_dir: which reports an output folder gets, and bad folders as one-line user errors."""

from __future__ import annotations

import pytest
from reports_figures import figures, trace
from reports_synthetic import write_predict_folder, write_replay_folder

from plansim.errors import InputError
from plansim.io import atomic_write_bytes, atomic_write_json
from plansim.reports import render_dir
from plansim.reports.page import plotly_js


def test_a_replay_folder_gets_the_replay_report_only(tmp_path):
    write_replay_folder(tmp_path)
    assert [p.name for p in render_dir(tmp_path)] == ["plotly.min.js", "report.html"]


def test_plotly_js_is_written_once_and_every_report_loads_it_by_a_relative_path(tmp_path):
    write_replay_folder(tmp_path, planner=True, retune=True)
    written = render_dir(tmp_path)
    assert [p.name for p in written].count("plotly.min.js") == 1
    assert (tmp_path / "plotly.min.js").read_text() == plotly_js()
    for page in (p for p in written if p.suffix == ".html"):
        html = page.read_text()
        src = "../plotly.min.js" if page.parent.name == "planner_reports" else "plotly.min.js"
        assert f'<script src="{src}"' in html
        assert plotly_js()[:500] not in html
        assert len(html.encode()) < 1_000_000


def test_self_contained_reports_embed_plotly_js_and_write_no_asset(tmp_path):
    write_replay_folder(tmp_path, planner=True)
    written = render_dir(tmp_path, self_contained=True)
    assert "plotly.min.js" not in [p.name for p in written]
    html = (tmp_path / "report.html").read_text()
    assert html.count(plotly_js()[:500]) == 1 and "<script src" not in html


def test_planner_and_retune_tables_add_their_reports(tmp_path):
    write_replay_folder(tmp_path, planner=True, retune=True)
    written = {str(p.relative_to(tmp_path)) for p in render_dir(tmp_path)}
    # ticks span 0..7170 s: with report_interval_hours 1, two periodic reports
    assert written == {
        "plotly.min.js",
        "report.html",
        "planner_report.html",
        "planner_report.log.jsonl.gz",
        "retune_report.html",
        "planner_reports/planner_report_001.html",
        "planner_reports/planner_report_001.log.jsonl.gz",
        "planner_reports/planner_report_002.html",
        "planner_reports/planner_report_002.log.jsonl.gz",
    }


def test_a_predictor_folder_gets_the_predictor_report(tmp_path):
    write_predict_folder(tmp_path)
    assert [p.name for p in render_dir(tmp_path)] == ["plotly.min.js", "predictor_report.html"]


def test_rendering_twice_gives_identical_files(tmp_path):
    write_replay_folder(tmp_path, planner=True, retune=True)
    first = {p: p.read_bytes() for p in render_dir(tmp_path)}
    second = {p: p.read_bytes() for p in render_dir(tmp_path)}
    assert first == second


def test_no_temporary_files_are_left(tmp_path):
    write_replay_folder(tmp_path, planner=True)
    render_dir(tmp_path)
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]


def test_a_folder_with_nothing_to_render_is_a_user_error(tmp_path):
    atomic_write_json(tmp_path / "summary.json", {})
    with pytest.raises(InputError, match="nothing to render"):
        render_dir(tmp_path)


def test_a_missing_folder_is_a_user_error(tmp_path):
    with pytest.raises(InputError, match="not a folder"):
        render_dir(tmp_path / "absent")


def test_a_damaged_table_names_the_file(tmp_path):
    write_replay_folder(tmp_path)
    atomic_write_bytes(tmp_path / "workers.parquet", b"not parquet")
    with pytest.raises(InputError) as err:
        render_dir(tmp_path)
    assert str(err.value).startswith(
        f"{tmp_path / 'workers.parquet'}: not a readable Parquet table"
    )


def test_damaged_json_names_the_file(tmp_path):
    write_replay_folder(tmp_path)
    atomic_write_bytes(tmp_path / "inputs.json", b"{oops")
    with pytest.raises(InputError, match=r"inputs.json: not valid JSON"):
        render_dir(tmp_path)


def test_retune_threshold_defaults_to_the_retune_config_default(tmp_path):
    write_replay_folder(tmp_path, retune=True)
    render_dir(tmp_path)
    fig = figures((tmp_path / "retune_report.html").read_text())["retune_scores"]
    band = [y for y in trace(fig, "threshold band")["y"] if y is not None]
    assert max(band[:5]) == pytest.approx(103.0 * 1.02)  # window 0: current 103, 2% threshold


def test_a_damaged_table_leaves_the_reports_as_they_were(tmp_path):
    write_replay_folder(tmp_path, planner=True)
    atomic_write_bytes(tmp_path / "ticks.parquet", b"not parquet")
    with pytest.raises(InputError):
        render_dir(tmp_path)
    assert not (tmp_path / "report.html").exists()
