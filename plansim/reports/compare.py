"""Runs side by side: ``read_runs(folders)`` reads the output folders of replays (``replay run``,
``replay synth``, ``retune sweep``) and capacity runs, ``render_compare(runs)`` draws them as one
page, as ``vllm bench sweep plot_pareto`` does for benchmark sweeps.

A replay folder is one run; a capacity folder is one run per static deployment and per planner
policy it replayed. Each run has a label (its folder's name, plus the deployment within a
capacity folder), what differs between the runs' options (``--max-concurrency 16``), its
goodput (good requests over all requests, None when no SLA scored it), GPU-hours, latency
percentiles and throughput. The page opens with the runs on the Pareto front (no other run
has at least their goodput for at most their GPU-hours, one of the two strictly better), then
goodput against GPU-hours with that front, the latency CDFs of the replays (from their
requests tables), and the table.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from plansim.errors import InputError
from plansim.reports.folder_tables import (
    FolderOutput,
    FolderReport,
    FolderTables,
    read_json,
    read_parquet,
)
from plansim.reports.format import number, percent
from plansim.reports.page import Card, Page, plain
from plansim.reports.panels import Panel, PanelOutput, draw_panels
from plansim.reports.sampling import quantile_cdf
from plansim.reports.style import base_layout, palette_map
from plansim.reports.tables import finite_number, floats, pareto_front
from plansim.schema import (
    CAPACITY_JSON,
    COMPARE_JSON,
    COMPARE_REPORT,
    INPUTS_JSON,
    POINTS_TABLE,
    REQUESTS_TABLE,
    SUMMARY_JSON,
    sla_text,
)

# The latency percentiles of a run (summary keys), as the table and compare.json show them.
LATENCY_KEYS = ("p50_ttft_ms", "p90_ttft_ms", "p90_tpot_ms", "p90_itl_ms", "p90_e2e_latency_ms")
_SUMMARY_OF = {"p50_ttft_ms": "median_ttft_ms"}  # the summary's name for a percentile
# The CDF panels: label, requests-table column.
_CDFS = (("TTFT", "ttft_ms"), ("TPOT", "tpot_ms"), ("E2E", "e2e_latency_ms"))
# Options that say how a run was written, never what ran (commands.output.WRITING_OPTIONS).
_NOT_COMPARED = frozenset(
    {
        "out",
        "force",
        "no_report",
        "self_contained",
        "quiet",
        "json_output",
        "trace_events",
        "config",
        "planner_config",
    }
)


@dataclass(frozen=True, slots=True)
class Run:
    """One run of the comparison (see the module docstring)."""

    label: str
    folder: str
    kind: str  # replay | capacity static | capacity policy
    goodput: float | None
    gpu_hours: float | None
    latency_ms: dict[str, float | None]
    output_tok_s: float | None = None
    options: dict[str, Any] = field(default_factory=dict)
    sla: str = ""
    requests: pd.DataFrame | None = field(default=None, repr=False)

    def row(self, differs: Sequence[str], front: bool) -> dict[str, Any]:
        """The run as a row of ``compare.json``."""
        return {
            "label": self.label,
            "folder": self.folder,
            "kind": self.kind,
            "differs": {k: self.options.get(k) for k in differs},
            "goodput_ratio": self.goodput,
            "gpu_hours": self.gpu_hours,
            **self.latency_ms,
            "output_throughput_tok_s": self.output_tok_s,
            "sla": self.sla,
            "pareto": front,
        }


def read_runs(folders: Sequence[str | Path]) -> list[Run]:
    """The runs of output ``folders``, in order; ``InputError`` naming a folder that holds no
    replay or capacity run."""
    labels = _labels([Path(f) for f in folders])
    runs: list[Run] = []
    for folder, label in zip(folders, labels, strict=True):
        path = Path(folder)
        if (path / CAPACITY_JSON).is_file():
            runs += _capacity_runs(path, label)
        elif (path / SUMMARY_JSON).is_file() and (path / REQUESTS_TABLE).is_file():
            runs.append(_replay_run(path, label))
        else:
            raise InputError(
                "not a replay, retune sweep or capacity output folder (no "
                f"{SUMMARY_JSON} with {REQUESTS_TABLE}, no {CAPACITY_JSON})",
                source=str(path),
            )
    return runs


def _labels(folders: Sequence[Path]) -> list[str]:
    """Each folder's name, with its parent's where two names repeat."""
    names = [f.resolve().name for f in folders]
    return [
        f"{f.resolve().parent.name}/{n}" if names.count(n) > 1 else n
        for f, n in zip(folders, names, strict=True)
    ]


def _replay_run(folder: Path, label: str) -> Run:
    summary = read_json(folder / SUMMARY_JSON)
    inputs = read_json(folder / INPUTS_JSON) or {}
    if not isinstance(summary, Mapping) or "num_requests" not in summary:
        raise InputError(
            "not a replay summary (no num_requests)", source=str(folder / SUMMARY_JSON)
        )
    good, n = summary.get("goodput_completed_requests"), summary.get("num_requests") or 0
    requests = read_parquet(folder / REQUESTS_TABLE)
    if "status" in requests:
        requests = requests[requests["status"].astype(str) == "completed"]
    options = inputs.get("options") if isinstance(inputs, Mapping) else None
    sla = inputs.get("sla") if isinstance(inputs, Mapping) else None
    return Run(
        label,
        str(folder.resolve()),
        "replay",
        good / n if good is not None and n else None,
        finite_number(summary.get("gpu_hours")),
        {k: finite_number(summary.get(_SUMMARY_OF.get(k, k))) for k in LATENCY_KEYS},
        finite_number(summary.get("output_throughput_tok_s")),
        {k: v for k, v in (options or {}).items() if k not in _NOT_COMPARED},
        sla_text(dict(sla)) if isinstance(sla, Mapping) else "",
        requests,
    )


def _capacity_runs(folder: Path, label: str) -> list[Run]:
    report = read_json(folder / CAPACITY_JSON)
    if not isinstance(report, Mapping) or "static" not in report:
        raise InputError(
            "not a plansim capacity result (no static)", source=str(folder / CAPACITY_JSON)
        )
    sla = sla_text(dict(report.get("sla") or {}))
    points = read_parquet(folder / POINTS_TABLE)
    if points is not None:
        points = points[points["kind"] == "static"].drop_duplicates(
            ["variant", "num_workers", "num_prefill_workers", "num_decode_workers"]
        )
    rows = (
        points.to_dict("records")
        if points is not None
        else [v for v in report["static"] if "goodput_ratio" in v]
    )
    runs = []
    for row in rows:
        counts = (
            f"{row['num_workers']} workers"
            if pd.notna(row.get("num_workers", pd.NA))
            else f"{row['num_prefill_workers']}P+{row['num_decode_workers']}D"
        )
        runs.append(
            Run(
                f"{label}: {row['variant']} {counts}",
                str(folder.resolve()),
                "capacity static",
                finite_number(row.get("goodput_ratio")),
                finite_number(row.get("gpu_hours")),
                {k: finite_number(row.get(_SUMMARY_OF.get(k, k))) for k in LATENCY_KEYS},
                options={"variant": row["variant"], "workers": counts},
                sla=sla,
            )
        )
    for policy in report.get("policies") or ():
        runs.append(
            Run(
                f"{label}: policy {policy['name']}",
                str(folder.resolve()),
                "capacity policy",
                finite_number(policy.get("goodput_ratio")),
                finite_number(policy.get("gpu_hours")),
                dict.fromkeys(LATENCY_KEYS),
                options={"policy": policy["name"]},
                sla=sla,
            )
        )
    return runs


def differing_options(runs: Sequence[Run]) -> list[str]:
    """The option names given to at least two runs with different values among them (what a
    sweep varies; options only one run has say nothing its label does not)."""
    names = sorted({k for r in runs for k in r.options})
    out = []
    for k in names:
        values = [
            orjson.dumps(r.options[k], option=orjson.OPT_SORT_KEYS) for r in runs if k in r.options
        ]
        if len(values) > 1 and len(set(values)) > 1:
            out.append(k)
    return out


def front(runs: Sequence[Run]) -> list[int]:
    """Indices of the runs on the Pareto front of goodput against GPU-hours."""
    scored = [i for i, r in enumerate(runs) if r.goodput is not None and r.gpu_hours is not None]
    keep = pareto_front([runs[i].gpu_hours for i in scored], [runs[i].goodput for i in scored])
    return [scored[k] for k in keep]


def comparison(runs: Sequence[Run]) -> dict[str, Any]:
    """``compare.json``: the runs' rows, the options that differ, the Pareto front's labels."""
    differs = differing_options(runs)
    on_front = set(front(runs))
    return {
        "kind": "comparison",
        "differs": differs,
        "pareto_front": [runs[i].label for i in sorted(on_front)],
        "runs": [r.row(differs, i in on_front) for i, r in enumerate(runs)],
    }


def sla_groups(runs: Sequence[Run]) -> dict[str, list[str]]:
    """The labels of the runs scored against each SLA (runs without one left out)."""
    groups: dict[str, list[str]] = {}
    for r in runs:
        if r.sla:
            groups.setdefault(r.sla, []).append(r.label)
    return groups


def sla_list(groups: Mapping[str, Sequence[str]]) -> str:
    """``sla_groups`` in one line: ``a, c: <SLA>; b: <SLA>``."""
    return "; ".join(f"{', '.join(labels)}: {sla}" for sla, labels in groups.items())


def render_compare(runs: Sequence[Run], *, plotly_src: str | None = None) -> str:
    """The comparison page (HTML str); ``plotly_src`` as in ``Page.render``."""
    data = comparison(runs)
    page = Page(
        "plansim comparison",
        "Runs side by side: goodput (requests that met the SLA over all requests) "
        "against GPU-hours, latency distributions and the figures of each run.",
    )
    groups = sla_groups(runs)
    note = (
        f"Goodput is scored against {next(iter(groups))} in every run."
        if len(groups) == 1
        else "The runs score goodput against different SLAs: " + sla_list(groups)
        if groups
        else "No run scored goodput (no SLA)."
    )
    page.headline(_cards(runs, data), note)
    page.part("Charts")
    draw_panels(page, PANELS, CompareData(list(runs), data))
    page.part("Details")
    _table(page, runs, data)
    return page.render(plotly_src)


@dataclass(frozen=True, slots=True)
class CompareData:
    runs: list[Run]
    summary: dict[str, Any]


def _cards(runs: Sequence[Run], data: Mapping[str, Any]) -> list[Card]:
    cards = [
        Card("runs", "Runs", f"{len(runs):,}", ", ".join(data["differs"]) or "the same options")
    ]
    on_front = data["pareto_front"]
    cards.append(
        Card(
            "pareto",
            "Pareto front",
            f"{len(on_front):,}",
            "; ".join(on_front) or "no run scored both goodput and GPU-hours",
        )
    )
    scored = [r for r in runs if r.goodput is not None and r.gpu_hours is not None]
    if scored:
        best = max(scored, key=lambda r: (r.goodput, -r.gpu_hours))
        cheap = min(scored, key=lambda r: (r.gpu_hours, -r.goodput))
        cards.append(
            Card(
                "best_goodput",
                "Highest goodput",
                percent(best.goodput),
                f"{best.label}, {number(best.gpu_hours)} GPU-hours",
            )
        )
        cards.append(
            Card(
                "fewest_gpu_hours",
                "Fewest GPU-hours",
                number(cheap.gpu_hours),
                f"{cheap.label}, goodput {percent(cheap.goodput)}",
            )
        )
    return cards


def _table(page: Page, runs: Sequence[Run], data: Mapping[str, Any]) -> None:
    differs = data["differs"]
    on_front = {row["label"] for row in data["runs"] if row["pareto"]}
    page.table(
        "Runs",
        [
            "run",
            *differs,
            "goodput",
            "GPU-hours",
            "p50 TTFT",
            "p90 TTFT",
            "p90 TPOT",
            "p90 ITL",
            "p90 E2E",
            "output tok/s",
            "front",
        ],
        [
            [
                r.label,
                *(_text(r.options.get(k)) for k in differs),
                percent(r.goodput) if r.goodput is not None else "n/a",
                _num(r.gpu_hours),
                *(_num(r.latency_ms[k]) for k in LATENCY_KEYS),
                _num(r.output_tok_s),
                "yes" if r.label in on_front else "",
            ]
            for r in runs
        ],
        "Latencies in ms: TPOT is each request's mean token gap (what an SLA's TPOT bound "
        "checks), ITL every token gap; front: on the Pareto front of goodput against GPU-hours. "
        "A capacity run has one row per deployment and policy it replayed.",
    )


def _num(value: float | None) -> str:
    return number(value) if value is not None else "n/a"


def _text(value: Any) -> str:
    return (
        ""
        if value is None
        else plain(value if isinstance(value, str) else orjson.dumps(value).decode())
    )


def _pareto_chart(d: CompareData) -> PanelOutput:
    runs = d.runs
    scored = [r for r in runs if r.goodput is not None and r.gpu_hours is not None]
    if not scored:
        return "Not shown: no run has both a goodput (an SLA) and GPU-hours."
    fig = go.Figure()
    colours = palette_map(r.folder for r in scored)
    for folder in dict.fromkeys(r.folder for r in scored):
        mine = [r for r in scored if r.folder == folder]
        fig.add_trace(
            go.Scatter(
                x=[r.gpu_hours for r in mine],
                y=[r.goodput for r in mine],
                mode="markers",
                name=plain(Path(folder).name),
                text=[plain(r.label) for r in mine],
                hovertemplate="%{text}<br>goodput %{y:.2%}<br>%{x:.3f} GPU-hours<extra></extra>",
                marker={"color": colours[folder], "size": 11},
            )
        )
    on_front = [runs[i] for i in front(runs)]
    fig.add_trace(
        go.Scatter(
            x=[r.gpu_hours for r in on_front],
            y=[r.goodput for r in on_front],
            mode="lines+markers",
            name="Pareto front",
            text=[plain(r.label) for r in on_front],
            line={"color": "#555", "dash": "dot"},
            marker={"symbol": "circle-open", "size": 17, "color": "#555", "line": {"width": 2}},
            hovertemplate="%{text} (on the front)<extra></extra>",
        )
    )
    base_layout(fig, height=480)
    fig.update_layout(
        hovermode="closest", xaxis_title="GPU-hours", yaxis_title="goodput", yaxis_tickformat=".0%"
    )
    return fig


def _latency_cdfs(d: CompareData) -> PanelOutput:
    replays = [r for r in d.runs if r.requests is not None and len(r.requests)]
    if not replays:
        return (
            "Not shown: no replay run with completed requests (a capacity run keeps no "
            "per-request table)."
        )
    fig = make_subplots(
        rows=1, cols=len(_CDFS), horizontal_spacing=0.07, subplot_titles=[name for name, _ in _CDFS]
    )
    colours = palette_map(r.label for r in replays)
    for col, (name, column) in enumerate(_CDFS, start=1):
        for r in replays:
            if column not in r.requests:
                continue
            x, p = quantile_cdf(floats(r.requests, column))
            fig.add_trace(
                go.Scatter(
                    x=x,
                    y=p * 100.0,
                    mode="lines",
                    name=plain(r.label),
                    legendgroup=r.label,
                    showlegend=col == 1,
                    line={"color": colours[r.label]},
                    hovertemplate="%{x:.1f} ms: %{y:.1f}%<extra>" + plain(r.label) + "</extra>",
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(title_text=f"{name} (ms, log scale)", type="log", row=1, col=col)
    fig.update_yaxes(title_text="Requests at or below (%)", range=[0, 101], row=1, col=1)
    layout = base_layout(fig, height=460, legend_below=True)
    layout.update_layout(hovermode="closest", margin={"t": 70})
    return layout


PANELS: tuple[Panel, ...] = (
    Panel(
        "compare_pareto",
        "Goodput against GPU-hours, with the Pareto front",
        "One marker per run (a capacity run: one per deployment and policy), coloured by "
        "folder; the dotted line joins the runs no other run beats on both (at least their "
        "goodput for at most their GPU-hours). Up and to the left is better.",
        ("summary.goodput_completed_requests", "summary.gpu_hours", "points.goodput_ratio"),
        _pareto_chart,
    ),
    Panel(
        "compare_latency_cdf",
        "Latency distributions per replay (CDF)",
        "The share of a replay's completed requests (y) at or below a latency (x, log scale), "
        "one line per replay; a curve further left is faster.",
        ("requests.ttft_ms", "requests.tpot_ms", "requests.e2e_latency_ms"),
        _latency_cdfs,
    ),
)


def _compared_runs(path: Path) -> list[Run] | None:
    """The runs a ``compare.json`` names, read again from their folders; None without one."""
    data = read_json(path)
    if data is None:
        return None
    runs = data.get("runs") if isinstance(data, Mapping) else None
    if not isinstance(runs, list) or not all(
        isinstance(r, Mapping) and "folder" in r for r in runs
    ):
        raise InputError(
            "not a plansim comparison (needs runs with their folders)", source=str(path)
        )
    return read_runs(list(dict.fromkeys(str(r["folder"]) for r in runs)))


def _read_folder(tables: FolderTables) -> bool:
    return tables.read(COMPARE_JSON, _compared_runs) is not None


def _write_folder(tables: FolderTables, out: FolderOutput) -> list[Path]:
    runs = tables.read(COMPARE_JSON, _compared_runs)
    return [out.write_html(COMPARE_REPORT, lambda src: render_compare(runs, plotly_src=src))]


# ``compare_report.html``: the folder has a ``compare.json`` (the compared folders are read
# again, for their requests tables).
FOLDER_REPORT = FolderReport((COMPARE_JSON,), _read_folder, _write_folder)
