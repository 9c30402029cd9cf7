"""The retune windows report (``retune_windows_report.html``): many windows scored from the
startup point (``plansim retune windows``, or one window with ``plansim retune window``).

Reads the folder's ``windows/<k>.json`` records (bounds, outcome, scores, the ranked table of
candidates), its ``summary.json`` (per candidate: wins, failures, score distribution; the reader's
counts) and ``inputs.json``. Headline: windows and outcomes, the most frequent winner, how the
current point fared and the best gain; charts (``PANELS``): scores per window and candidate,
win counts, and the spread of each candidate's gain over the current point; details: the
candidates over all windows, every window's ranking, the reader's counts and the inputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import plotly.graph_objects as go

from plansim.errors import InputError
from plansim.reports.folder_tables import FolderOutput, FolderReport, FolderTables, read_json
from plansim.reports.format import number, plain_value
from plansim.reports.page import Card, Page, plain
from plansim.reports.panels import Panel, PanelOutput, draw_panels
from plansim.reports.replay import inputs_details
from plansim.reports.style import base_layout, palette_map
from plansim.reports.tables import finite_number
from plansim.schema import (
    WINDOW_RECORDS_DIR,
    WINDOWS_REPORT,
    WINDOWS_TABLE,
    is_minimized,
    objective_unit,
    sla_text,
)

MAX_CANDIDATE_LINES = 8  # candidates drawn as their own line (most wins first); the rest grey
MAX_RANKING_ROWS = 2000
_OTHERS = "other candidates"


@dataclass(frozen=True, slots=True)
class WindowsData:
    """What the windows panels draw from: the window records (by index), the per-candidate
    summary rows (most wins first), the objective, the candidates drawn in colour."""

    records: list[Mapping[str, Any]]
    candidates: list[Mapping[str, Any]]
    objective: str | None
    maximize: bool
    shown: list[str]
    colours: dict[str, str]


def render_windows(
    records: Sequence[Mapping[str, Any]],
    summary: Mapping[str, Any] | None = None,
    inputs: Mapping[str, Any] | None = None,
    *,
    plotly_src: str | None = None,
) -> str:
    """The retune windows report (HTML str); ``plotly_src`` as in ``Page.render``."""
    summary, inputs = summary or {}, inputs or {}
    ordered = sorted(records, key=lambda r: finite_number(r.get("window")) or 0.0)
    objective = summary.get("objective") or next(
        (r.get("objective") for r in ordered if r.get("objective")), None
    )
    candidates = [c for c in summary.get("candidates") or [] if isinstance(c, Mapping)]
    candidates = sorted(candidates, key=lambda c: -(finite_number(c.get("wins")) or 0))
    current = [str(c.get("label")) for c in candidates if c.get("is_current")]
    shown = list(dict.fromkeys(current + [str(c.get("label")) for c in candidates]))
    shown = shown[:MAX_CANDIDATE_LINES]
    data = WindowsData(
        records=ordered,
        candidates=candidates,
        objective=objective,
        maximize=not is_minimized(objective),
        shown=shown,
        colours=palette_map(shown),
    )
    page = Page(
        "plansim retune windows report",
        "Every window's candidates replayed from the startup point and ranked on the "
        "objective: which candidate wins how often, and by how much.",
    )
    page.headline(windows_cards(data), _legend(data, inputs))
    if not ordered:
        page.note("Scores per window", "Not shown: the folder has no window record.")
        return page.render(plotly_src)
    page.part("Charts")
    draw_panels(page, PANELS, data)
    page.part("Details")
    _candidates_table(page, data)
    _rankings_table(page, data)
    reader = summary.get("reader_counts")
    if isinstance(reader, Mapping) and any(reader.values()):
        page.key_values(
            "Requests read",
            [(str(k).replace("_", " "), v) for k, v in reader.items() if v],
            "The trace reader's counts summed over the windows (history: requests before a "
            "window that warm its replay; censored: requests that had not finished by the "
            "window's cutoff).",
        )
    inputs_details(page, inputs)
    return page.render(plotly_src)


def _legend(data: WindowsData, inputs: Mapping[str, Any]) -> str:
    unit = objective_unit(data.objective)
    text = (
        f"A score is a candidate's replay of the window on {data.objective or 'the objective'}"
        + (f", in {unit}" if unit else "")
        + f" ({'higher' if data.maximize else 'lower'} is better)."
    )
    sla = inputs.get("scoring_sla")
    if isinstance(sla, Mapping) and sla_text(dict(sla)):
        text += f" Goodput counts the requests that met {sla_text(dict(sla))}."
    return text


def windows_cards(data: WindowsData) -> list[Card]:
    """Windows and outcomes, the most frequent winner, the current point, the best gain."""
    records = data.records
    outcomes: dict[str, int] = {}
    for r in records:
        outcomes[str(r.get("outcome"))] = outcomes.get(str(r.get("outcome")), 0) + 1
    span = ""
    if records:
        span = f"windows {records[0].get('window')} to {records[-1].get('window')}; "
    cards = [
        Card(
            "windows",
            "Windows scored",
            f"{len(records):,}",
            span + ", ".join(f"{n} {o.replace('_', ' ')}" for o, n in sorted(outcomes.items())),
        )
    ]
    ranked = sum(int(finite_number(c.get("wins")) or 0) for c in data.candidates)
    if data.candidates and ranked:
        top = data.candidates[0]
        cards.append(
            Card(
                "winner",
                "Most frequent winner",
                str(top.get("label")),
                f"best in {int(top.get('wins') or 0)} of {ranked} windows",
            )
        )
    current = next((c for c in data.candidates if c.get("is_current")), None)
    if current is not None:
        wins = int(current.get("wins") or 0)
        cards.append(
            Card(
                "current",
                "Current point",
                f"{wins} of {ranked} wins",
                str(current.get("label")),
                "good" if ranked and wins * 2 >= ranked else "neutral",
            )
        )
    gains = [
        (finite_number(r.get("improvement_percentage")), r)
        for r in records
        if finite_number(r.get("improvement_percentage")) is not None
    ]
    if gains:
        median = float(np.median([g for g, _ in gains]))
        best, record = max(gains, key=lambda g: g[0])
        cards.append(
            Card(
                "best_gain",
                "Best gain over the current point",
                f"{best:+.1f}%",
                f"window {record.get('window')}; median over windows {median:+.1f}%",
            )
        )
    return cards


def _score_of(record: Mapping[str, Any], label: str) -> float | None:
    for row in record.get("ranked") or []:
        if str(row.get("label")) == label:
            return finite_number(row.get("score"))
    return None


def _scores_chart(d: WindowsData) -> PanelOutput:
    fig = go.Figure()
    x = [finite_number(r.get("window")) for r in d.records]
    others_x, others_y = [], []
    for r, wx in zip(d.records, x, strict=True):
        for row in r.get("ranked") or []:
            score = finite_number(row.get("score"))
            if score is not None and str(row.get("label")) not in d.shown:
                others_x.append(wx)
                others_y.append(score)
    if others_x:
        fig.add_trace(
            go.Scatter(
                x=others_x,
                y=others_y,
                mode="markers",
                name=_OTHERS,
                marker={"color": "#b9bec9", "size": 5},
                hoverinfo="skip",
            )
        )
    current = {str(c.get("label")) for c in d.candidates if c.get("is_current")}
    for label in d.shown:
        y = [_score_of(r, label) for r in d.records]
        is_current = label in current
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[np.nan if v is None else v for v in y],
                mode="lines+markers",
                name=plain(label + (" (current)" if is_current else "")),
                line={
                    "color": "#222222" if is_current else d.colours[label],
                    "width": 3 if is_current else 1.5,
                    "dash": "dash" if is_current else "solid",
                },
                marker={"size": 6},
            )
        )
    if not fig.data:
        return "Not shown: no window has a scored candidate."
    unit = objective_unit(d.objective)
    fig.update_xaxes(title_text="Window (index)", dtick=1 if len(x) <= 30 else None)
    fig.update_yaxes(title_text=f"Score ({unit})" if unit else "Score")
    layout = base_layout(fig, height=460, legend_below=True)
    layout.update_layout(hovermode="closest")
    return layout


def _wins_chart(d: WindowsData) -> PanelOutput:
    rows = [c for c in d.candidates if finite_number(c.get("wins")) is not None]
    if not rows:
        return "Not shown: summary.json has no per-candidate wins."
    rows = rows[::-1]  # most wins at the top
    labels = [
        plain(str(c.get("label")) + (" (current)" if c.get("is_current") else "")) for c in rows
    ]
    fig = go.Figure(
        go.Bar(
            x=[finite_number(c.get("wins")) for c in rows],
            y=labels,
            orientation="h",
            marker={"color": [d.colours.get(str(c.get("label")), "#b9bec9") for c in rows]},
            hovertemplate="%{y}: %{x} wins<extra></extra>",
        )
    )
    fig.update_xaxes(
        title_text="Windows won (best score)",
        rangemode="tozero",
        dtick=1 if len(d.records) <= 20 else None,
    )
    fig.update_yaxes(type="category", automargin=True)
    layout = base_layout(fig, height=max(260, 26 * len(rows) + 120))
    layout.update_layout(hovermode="closest", showlegend=False)
    return layout


def _spread_chart(d: WindowsData) -> PanelOutput:
    fig = go.Figure()
    for c in d.candidates:
        label = str(c.get("label"))
        gains = [
            finite_number(row.get("vs_current_pct"))
            for r in d.records
            for row in r.get("ranked") or []
            if str(row.get("label")) == label
        ]
        gains = [g for g in gains if g is not None]
        if not gains or c.get("is_current"):
            continue
        fig.add_trace(
            go.Box(
                x=gains,
                name=plain(label),
                marker={"color": d.colours.get(label, "#8c8c8c")},
                boxpoints="all",
                jitter=0.3,
                orientation="h",
            )
        )
    if not fig.data:
        return "Not shown: no candidate has a gain over a scored current point."
    fig.add_vline(x=0, line={"color": "#222222", "dash": "dot"})
    fig.update_xaxes(title_text="Gain over the current point per window (%)")
    fig.update_yaxes(type="category", automargin=True, autorange="reversed")
    layout = base_layout(fig, height=max(260, 30 * len(fig.data) + 120))
    layout.update_layout(hovermode="closest", showlegend=False)
    return layout


def _candidates_table(page: Page, d: WindowsData) -> None:
    unit = objective_unit(d.objective)
    stats = ("mean", "p25", "median", "p75", "min", "max")
    rows = []
    for c in d.candidates:
        score = c.get("score") if isinstance(c.get("score"), Mapping) else {}
        share = finite_number(c.get("win_share"))
        rows.append(
            [
                str(c.get("label")) + (" (current)" if c.get("is_current") else ""),
                int(c.get("wins") or 0),
                "n/a" if share is None else f"{share * 100:.0f}%",
                int(c.get("failed") or 0),
                *(
                    number(v) if (v := finite_number(score.get(s))) is not None else "n/a"
                    for s in stats
                ),
            ]
        )
    page.table(
        "Candidates over all windows",
        ["candidate", "wins", "win share", "failed", *(f"{s} score" for s in stats)],
        rows,
        "Wins: windows where the candidate ranked best (ties go to the current point); the "
        "score columns are its scores' distribution over the windows"
        f"{f' ({unit})' if unit else ''}.",
        numeric=[False] + [True] * (3 + len(stats)),
    )


def _rankings_table(page: Page, d: WindowsData) -> None:
    rows = []
    for r in d.records:
        for row in r.get("ranked") or []:
            gain = finite_number(row.get("vs_current_pct"))
            rows.append(
                [
                    plain_value(r.get("window")),
                    "failed" if row.get("rank") is None else plain_value(row.get("rank")),
                    str(row.get("label")) + (" (current)" if row.get("is_current") else ""),
                    number(s) if (s := finite_number(row.get("score"))) is not None else "n/a",
                    "" if gain is None else f"{gain:+.1f}%",
                    str(row.get("status") or ""),
                    str(row.get("error") or ""),
                ]
            )
    how = (
        "Each window's candidates, best first; gain: the score's improvement over the current "
        "point in percent (positive is better)."
    )
    if len(rows) > MAX_RANKING_ROWS:
        how += f" The first {MAX_RANKING_ROWS} of {len(rows)} rows; windows.parquet has all."
        rows = rows[:MAX_RANKING_ROWS]
    page.table(
        "Per-window rankings",
        ["window", "rank", "candidate", "score", "gain vs current", "status", "error"],
        rows,
        how,
        numeric=[True, True, False, True, True, False, False],
    )


PANELS: tuple[Panel, ...] = (
    Panel(
        "windows_scores",
        "Scores per window and candidate",
        "One line per candidate across the windows (the current point dashed black; candidates "
        f"beyond the {MAX_CANDIDATE_LINES} with the most wins are grey dots). Where lines cross, "
        "the ranking changes with the traffic.",
        ("windows.ranked.score", "windows.ranked.label"),
        _scores_chart,
    ),
    Panel(
        "windows_wins",
        "How often each candidate wins",
        "Windows in which each candidate ranked best.",
        ("summary.candidates.wins",),
        _wins_chart,
    ),
    Panel(
        "windows_spread",
        "Gain over the current point, per candidate",
        "Each dot is one window: how much better (right of the dotted line) or worse than the "
        "current point the candidate scored, in percent; the box spans the middle half.",
        ("windows.ranked.vs_current_pct",),
        _spread_chart,
    ),
)


def read_window_records(folder: Path) -> list[Mapping[str, Any]] | None:
    """The ``windows/<k>.json`` records of a retune windows run, by window; None without."""
    if not (folder.is_dir() and any(folder.glob("*.json"))):
        return None
    records = []
    for path in sorted(folder.glob("*.json")):
        record = read_json(path)
        if not isinstance(record, Mapping) or "window" not in record:
            raise InputError("expected a window record (a dict with a window)", source=str(path))
        records.append(record)
    return records


def _read_folder(tables: FolderTables) -> bool:
    return tables.read(WINDOW_RECORDS_DIR, read_window_records) is not None


def _write_folder(tables: FolderTables, out: FolderOutput) -> list[Path]:
    summary = tables.summary if isinstance(tables.summary, Mapping) else {}
    return [
        out.write_html(
            WINDOWS_REPORT,
            lambda src: render_windows(
                tables.read(WINDOW_RECORDS_DIR, read_window_records),
                summary,
                tables.inputs,
                plotly_src=src,
            ),
        )
    ]


# ``retune_windows_report.html``: the folder has ``windows/<k>.json`` records (a windows table
# alone makes the folder renderable, but the report draws from the records).
FOLDER_REPORT = FolderReport(
    (WINDOWS_TABLE, f"{WINDOW_RECORDS_DIR}/*.json"), _read_folder, _write_folder
)
