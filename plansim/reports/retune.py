"""The retune report (``retune_report.html``): headline cards (decisions by outcome, the best
gain), the charts (``PANELS``, one ``Panel`` record per chart), then the decision table and the
run's inputs.

A decision record (``retune_events.json``, one dict per window) is read tolerantly: the window
index and bounds, launch and decision times, ``outcome`` and ``reason``, ``candidates`` (each
with ``point``, ``status``, ``score``, ``error`` and a current-point flag), current and best
score, improvement in percent, ``router_parameters`` and ``planner_changes`` applied, and
``predictor_presweep`` (``candidates``, ``losses``, ``winner``). Absent fields leave the matching
chart out with a note.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from plansim.errors import InputError
from plansim.reports.folder_tables import FolderOutput, FolderReport, FolderTables, read_json
from plansim.reports.format import number, plain_value
from plansim.reports.headline import Reference, baseline_reference, before_after_cards
from plansim.reports.page import Card, Page, plain
from plansim.reports.panels import Drawn, Panel, PanelOutput, draw_panels
from plansim.reports.style import base_layout, palette_map
from plansim.reports.tables import find_value, finite_number
from plansim.schema import (
    BASELINE_JSON,
    DEFAULT_MIN_IMPROVEMENT_PERCENTAGE,
    PRESWEEP_LOSS_SENTENCE,
    RETUNE_EVENTS_JSON,
    RETUNE_OUTCOMES,
    RETUNE_REPORT,
    is_minimized,
    objective_unit,
    sla_text,
)

OUTCOME_COLOURS = {
    "applied": "#2ca02c",
    "advisory": "#1f77b4",
    "no_improvement": "#8c8c8c",
    "failed": "#d62728",
    "timeout": "#ff7f0e",
}
OUTCOME_ORDER = RETUNE_OUTCOMES
MAX_PARAMETER_PANELS = 8


def _get(record: Mapping[str, Any], *keys: str) -> Any:
    """The first present, non-null value among ``keys`` (a dotted key reads a nested dict)."""
    for key in keys:
        value: Any = record
        for part in key.split("."):
            value = value.get(part) if isinstance(value, Mapping) else None
        if value is not None:
            return value
    return None


@dataclass(frozen=True, slots=True)
class _Window:
    """One decision record, normalised."""

    index: int
    start_s: float | None
    end_s: float | None
    decision_s: float | None
    outcome: str
    reason: str
    scores: tuple[float | None, ...]
    statuses: tuple[str, ...]
    labels: tuple[str, ...]
    points: tuple[Mapping[str, Any], ...]
    current: int | None
    best: int | None
    current_score: float | None
    best_score: float | None
    improvement_pct: float | None
    threshold_pct: float | None
    changes: Mapping[str, Any]
    presweep: Mapping[str, Any] | None
    wall_s: float | None


def _normalise(
    k: int, rec: Mapping[str, Any], maximize: bool, default_threshold: float | None
) -> _Window:
    window = rec.get("window")
    index = (
        finite_number(_get(rec, "window_index", "index", "window.index"))
        if isinstance(window, Mapping)
        else finite_number(window)
    )
    if index is None:
        index = finite_number(_get(rec, "window_index", "index"))
    candidates = rec.get("candidates") if isinstance(rec.get("candidates"), list) else []
    scores, statuses, labels, points, current = [], [], [], [], None
    for j, cand in enumerate(candidates):
        cand = cand if isinstance(cand, Mapping) else {}
        scores.append(finite_number(cand.get("score")))
        statuses.append(
            str(cand.get("status", "ok" if cand.get("score") is not None else "failed"))
        )
        point = _flatten(cand.get("point")) if isinstance(cand.get("point"), Mapping) else {}
        points.append(point)
        label = cand.get("label") or ", ".join(
            f"{key}={plain_value(value)}" for key, value in point.items()
        )
        labels.append(str(label or f"candidate {j}"))
        if cand.get("is_current") or cand.get("current"):
            current = j
    if current is None:
        current_index = finite_number(_get(rec, "current_index"))
        current = int(current_index) if current_index is not None else None
    best_index = finite_number(_get(rec, "best_index", "winner_index"))
    best_point = _flatten(rec["best"]) if isinstance(rec.get("best"), Mapping) else None
    if best_index is not None:
        best: int | None = int(best_index)
    elif best_point is not None and best_point in points:
        best = points.index(best_point)
    else:
        best = _best(scores, maximize)
    changes = _flatten(rec["changes"]) if isinstance(rec.get("changes"), Mapping) else {}
    if not changes:
        for key in ("router_parameters", "planner_changes"):
            value = rec.get(key)
            if isinstance(value, Mapping) and value:
                changes.update(_flatten(value, key))
    presweep = rec.get("predictor_presweep")
    return _Window(
        index=int(index) if index is not None else k,
        start_s=finite_number(_get(rec, "window_start_s", "start_s", "window.start_s")),
        end_s=finite_number(_get(rec, "window_end_s", "end_s", "window.end_s")),
        decision_s=finite_number(
            _get(rec, "decision_s", "decided_at_s", "decision_at_s", "decision_tick_s")
        ),
        outcome=str(rec.get("outcome", "unknown")),
        reason=str(rec.get("reason") or ""),
        scores=tuple(scores),
        statuses=tuple(statuses),
        labels=tuple(labels),
        points=tuple(points),
        current=current,
        best=best,
        current_score=finite_number(_get(rec, "current_score")),
        best_score=finite_number(_get(rec, "best_score")),
        improvement_pct=finite_number(_get(rec, "improvement_percentage", "improvement_pct")),
        threshold_pct=finite_number(_get(rec, "min_improvement_percentage")) or default_threshold,
        changes=changes,
        presweep=presweep if isinstance(presweep, Mapping) else None,
        wall_s=finite_number(_get(rec, "sweep_wall_s", "sweep_wall_time_s", "wall_time_s")),
    )


def _flatten(value: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"router": {"a": 1}}`` -> ``{"router.a": 1}`` (a point or a change set, one level per
    group)."""
    out: dict[str, Any] = {}
    for key, inner in value.items():
        name = f"{prefix}.{key}" if prefix else str(key)
        if isinstance(inner, Mapping):
            out.update(_flatten(inner, name))
        else:
            out[name] = inner
    return out


def _best(scores: Sequence[float | None], maximize: bool) -> int | None:
    """Index of the best score, earliest on ties; None when every candidate failed."""
    sign = -1.0 if maximize else 1.0
    ok = [(sign * s, j) for j, s in enumerate(scores) if s is not None]
    return min(ok)[1] if ok else None


@dataclass(frozen=True, slots=True)
class RetuneData:
    """What the retune panels draw from: the normalised windows (by index), the objective and
    whether a higher score is better."""

    windows: list[_Window]
    objective: str | None
    maximize: bool


def render_retune(
    events: Sequence[Mapping[str, Any]],
    *,
    objective: str | None = None,
    min_improvement_percentage: float | None = None,
    inputs: Mapping[str, Any] | None = None,
    summary: Mapping[str, Any] | None = None,
    baseline: Reference | None = None,
    plotly_src: str | None = None,
) -> str:
    """The retune report (HTML str) for the decision records ``events``. ``objective`` decides
    whether a higher score is better (TTFT and E2ELatency are minimised); with the run's
    ``summary`` and a ``baseline`` (the same replay without retune), the page opens with
    goodput and GPU-hours before and after; ``plotly_src`` as in ``Page.render``."""
    objective = objective or next((str(e["objective"]) for e in events if e.get("objective")), None)
    maximize = not is_minimized(objective)
    windows = sorted(
        (_normalise(k, rec, maximize, min_improvement_percentage) for k, rec in enumerate(events)),
        key=lambda w: w.index,
    )
    data = RetuneData(windows, objective, maximize)
    page = Page(
        "plansim retune report",
        "One decision per retune window: which candidates were scored, what was decided, "
        "and which router and planner parameters were in force.",
    )
    sentence = _score_sentence(objective, maximize)
    sla = (inputs or {}).get("scoring_sla")
    if isinstance(sla, Mapping) and sla_text(dict(sla)):
        sentence += f" Goodput counts the requests that met {sla_text(dict(sla))}."
    page.headline(
        before_after_cards(summary, baseline) + retune_cards(data, min_improvement_percentage),
        sentence,
    )
    if not windows:
        page.note("Candidate scores per window", "Not shown: retune_events.json holds no decision.")
    else:
        page.part("Charts")
        draw_panels(page, PANELS, data)
        page.part("Details")
        _decision_table(page, windows)
    rows = [
        (key, inputs[key])
        for key in ("command", "config", "traces", "trace_files")
        if inputs and key in inputs
    ]
    if rows:
        page.key_values("Retune run", rows)
    return page.render(plotly_src)


def retune_cards(data: RetuneData, threshold_pct: float | None = None) -> list[Card]:
    """Decisions by outcome, the best gain over the current point, and the objective."""
    windows = data.windows
    counts = {o: sum(w.outcome == o for w in windows) for o in OUTCOME_ORDER}
    counts.update({w.outcome: sum(v.outcome == w.outcome for v in windows) for w in windows})
    tally = ", ".join(f"{n} {o.replace('_', ' ')}" for o, n in counts.items() if n)
    cards = [Card("decisions", "Decisions", f"{len(windows):,}", tally or "no window decided")]
    applied = counts.get("applied", 0) + counts.get("advisory", 0)
    cards.append(
        Card(
            "applied",
            "Applied" if not counts.get("advisory") else "Applied or advised",
            f"{applied:,}",
            f"of {len(windows):,} windows beat the current point by more than the threshold"
            + (f" ({threshold_pct:g}%)" if threshold_pct is not None else ""),
            "good" if applied else "neutral",
        )
    )
    gains = [w for w in windows if w.improvement_pct is not None]
    if gains:
        best = max(gains, key=lambda w: w.improvement_pct)
        what = plain_value(dict(best.changes)) if best.changes else "no change"
        cards.append(
            Card(
                "best_gain",
                "Best gain",
                f"{best.improvement_pct:+.1f}%",
                f"window {best.index}: {what} ({best.outcome.replace('_', ' ')})",
            )
        )
    else:
        cards.append(Card("best_gain", "Best gain", "n/a", "no window has a scored current point"))
    unit = objective_unit(data.objective)
    scored = [w.best_score for w in windows if w.best_score is not None]
    cards.append(
        Card(
            "objective",
            "Objective",
            data.objective or "not recorded",
            (unit + "; " if unit else "")
            + f"{'higher' if data.maximize else 'lower'} is better"
            + (f"; best scores {number(min(scored))} to {number(max(scored))}" if scored else ""),
        )
    )
    return cards


def _scores_chart(d: RetuneData) -> PanelOutput:
    windows, maximize = d.windows, d.maximize
    how = (
        "Each column is one window; grey dots are candidates (failed ones are left out), the blue "
        "ring is the current point, the gold star the best candidate. The shaded band runs from "
        "the current score to the threshold a candidate must pass to be applied. "
        + _score_sentence(d.objective, maximize)
    )
    if not any(s is not None for w in windows for s in w.scores):
        return "Not shown: no window has a scored candidate."
    fig = go.Figure()
    band_x: list[float | None] = []
    band_y: list[float | None] = []
    dots: dict[str, list[tuple[float, float, str]]] = {"all": [], "current": [], "best": []}
    for w in windows:
        n = len(w.scores)
        for j, (score, label) in enumerate(zip(w.scores, w.labels, strict=True)):
            if score is None:
                continue
            # Spread a window's candidates across its column, in canonical order.
            dot = (w.index + (j / max(n - 1, 1) - 0.5) * 0.6, score, plain(label))
            dots["all"].append(dot)
            if j == w.current:
                dots["current"].append(dot)
            if j == w.best:
                dots["best"].append(dot)
        current = (
            w.current_score
            if w.current_score is not None
            else (
                w.scores[w.current] if w.current is not None and w.current < len(w.scores) else None
            )
        )
        if current is not None and w.threshold_pct is not None:
            edge = (
                current * (1 + w.threshold_pct / 100.0)
                if maximize
                else current * (1 - w.threshold_pct / 100.0)
            )
            x0, x1 = w.index - 0.4, w.index + 0.4
            band_x += [x0, x1, x1, x0, x0, None]
            band_y += [current, current, edge, edge, current, None]
    if band_x:
        fig.add_trace(
            go.Scatter(
                x=band_x,
                y=band_y,
                fill="toself",
                mode="lines",
                line={"width": 0},
                fillcolor="rgba(31,119,180,0.15)",
                name="threshold band",
                hoverinfo="skip",
            )
        )
    styles = {
        "all": ("candidates", {"color": "#9a9a9a", "size": 6}),
        "current": (
            "current point",
            {"symbol": "circle-open", "size": 13, "color": "#1f77b4", "line": {"width": 2.5}},
        ),
        "best": (
            "best candidate",
            {
                "symbol": "star",
                "size": 14,
                "color": "#e0a800",
                "line": {"width": 1, "color": "#7a5c00"},
            },
        ),
    }
    for key, (name, marker) in styles.items():
        x, y, text = (list(v) for v in zip(*dots[key], strict=True)) if dots[key] else ([], [], [])
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="markers",
                name=name,
                text=text,
                marker=marker,
                hovertemplate=f"{name}: %{{text}}<br>score %{{y:.4g}}<extra></extra>",
            )
        )
    fig.update_xaxes(title_text="Window (index)", dtick=1 if len(windows) <= 30 else None)
    unit = objective_unit(d.objective)
    fig.update_yaxes(title_text=f"Score ({unit})" if unit else "Score (objective units)")
    return Drawn(_closest(fig, height=440), how)


def _outcome_chart(d: RetuneData) -> PanelOutput:
    windows = d.windows
    fig = go.Figure()
    present = [o for o in OUTCOME_ORDER if any(w.outcome == o for w in windows)]
    present += sorted({w.outcome for w in windows} - set(present))
    use_time = all(w.decision_s is not None or w.end_s is not None for w in windows)
    for outcome in present:
        ws = [w for w in windows if w.outcome == outcome]
        x = [
            (w.decision_s if w.decision_s is not None else w.end_s) / 60.0 if use_time else w.index
            for w in ws
        ]
        fig.add_trace(
            go.Scatter(
                x=x,
                y=[plain(outcome)] * len(ws),
                mode="markers",
                name=plain(outcome),
                marker={
                    "size": 12,
                    "color": OUTCOME_COLOURS.get(outcome, "#8172b3"),
                    "symbol": "square",
                },
                text=[
                    plain(
                        f"window {w.index}: {w.reason or outcome}; improvement "
                        f"{'n/a' if w.improvement_pct is None else f'{w.improvement_pct:.2f}%'}"
                    )
                    for w in ws
                ],
                hovertemplate="%{text}<extra></extra>",
            )
        )
    fig.update_xaxes(title_text="Decision time (planner min)" if use_time else "Window (index)")
    fig.update_yaxes(
        title_text="Outcome",
        type="category",
        categoryorder="array",
        categoryarray=[plain(o) for o in reversed(present)],
    )
    return _closest(fig, height=300)


_PARAMETERS_HOW = (
    "One panel per searched parameter: its value at the current point of each window, i.e. "
    "what was in force while the window ran. Changes between windows are applied decisions."
)


def _parameters_chart(d: RetuneData) -> PanelOutput:
    windows, how = d.windows, _PARAMETERS_HOW
    keys: list[str] = []
    for w in windows:
        if w.current is not None and w.current < len(w.points):
            keys += [k for k in w.points[w.current] if k not in keys]
    if not keys:
        return "Not shown: the decision records name no current point."
    shown = keys[:MAX_PARAMETER_PANELS]
    if len(keys) > len(shown):
        how += f" The first {len(shown)} of {len(keys)} parameters are shown."
    fig = make_subplots(
        rows=len(shown),
        cols=1,
        shared_xaxes=True,
        # 55 px between panels for the next panel's title, whatever the number of panels
        vertical_spacing=55 / (170 * len(shown) + 20) if len(shown) > 1 else 0.0,
        subplot_titles=[plain(k) for k in shown],
    )
    colours = palette_map(shown)
    for row, key in enumerate(shown, start=1):
        x, y = [], []
        for w in windows:
            if w.current is None or w.current >= len(w.points) or key not in w.points[w.current]:
                continue
            value = w.points[w.current][key]
            x.append(w.index)
            y.append(value if finite_number(value) is not None else plain(value))
        fig.add_trace(
            go.Scatter(
                x=x,
                y=y,
                mode="lines+markers",
                name=plain(key),
                showlegend=False,
                line={"shape": "hv", "color": colours[key]},
            ),
            row=row,
            col=1,
        )
    fig.update_xaxes(dtick=1 if len(windows) <= 30 else None)
    fig.update_xaxes(title_text="Window (index)", row=len(shown), col=1)
    layout = base_layout(fig, height=170 * len(shown) + 120)
    return Drawn(layout, how)


def _presweep_chart(d: RetuneData) -> PanelOutput:
    windows = d.windows
    series: dict[str, list[tuple[int, float]]] = {}
    winners: list[tuple[int, float, str]] = []
    for w in windows:
        pre = w.presweep
        if not pre:
            continue
        cands = pre.get("candidates") or []
        losses = pre.get("losses") or []
        winner = pre.get("winner")
        for j, (cand, loss) in enumerate(zip(cands, losses, strict=False)):
            label = _candidate_label(cand)
            value = finite_number(loss)
            if value is None:
                continue
            series.setdefault(label, []).append((w.index, value))
            if winner == j or (isinstance(winner, str) and winner == label):
                winners.append((w.index, value, label))
    if not series:
        return "Not shown: no decision record has a predictor pre-sweep."
    fig = go.Figure()
    colours = palette_map(series)
    for label, pts in series.items():
        fig.add_trace(
            go.Scatter(
                x=[p[0] for p in pts],
                y=[p[1] for p in pts],
                mode="lines+markers",
                name=plain(label),
                line={"color": colours[label]},
            )
        )
    if winners:
        fig.add_trace(
            go.Scatter(
                x=[w[0] for w in winners],
                y=[w[1] for w in winners],
                mode="markers",
                name="winner",
                text=[plain(w[2]) for w in winners],
                marker={"symbol": "star", "size": 14, "color": "#e0a800", "line": {"width": 1}},
                hovertemplate="winner %{text}: %{y:.4f}<extra></extra>",
            )
        )
    indices = {w for pts in series.values() for w, _ in pts}
    fig.update_xaxes(title_text="Window (index)", dtick=1 if len(indices) <= 30 else None)
    fig.update_yaxes(title_text="Pre-sweep loss (log1p error, weighted)", rangemode="tozero")
    return _closest(fig, height=400, legend_below=len(series) > 4)


def _candidate_label(cand: Any) -> str:
    if isinstance(cand, Mapping):
        return ", ".join(f"{k}={plain_value(v)}" for k, v in cand.items()) or "(current)"
    return str(cand)


def _decision_table(page: Page, windows: list[_Window]) -> None:
    def fmt_window(w: _Window) -> str:
        if w.start_s is None or w.end_s is None:
            return ""
        return f"{w.start_s:,.0f}-{w.end_s:,.0f}"

    page.table(
        "Decisions",
        [
            "window",
            "bounds (s)",
            "outcome",
            "reason",
            "current score",
            "best score",
            "improvement",
            "threshold",
            "changes (applied or advised)",
            "sweep wall (s)",
        ],
        [
            [
                w.index,
                fmt_window(w),
                w.outcome,
                w.reason,
                _cell(w.current_score),
                _cell(w.best_score),
                "n/a" if w.improvement_pct is None else f"{w.improvement_pct:+.1f}%",
                "n/a" if w.threshold_pct is None else f"{w.threshold_pct:g}%",
                plain_value(dict(w.changes)) if w.changes else "",
                _cell(w.wall_s),
            ]
            for w in windows
        ],
        "Scores are in the objective's units. Improvement is the best candidate's gain over the "
        "current point; a decision applies only above the threshold.",
        numeric=[True, False, False, False, True, True, True, True, False, True],
    )


def _cell(value: float | None) -> Any:
    return "n/a" if value is None else value


def _closest(fig: go.Figure, height: int, legend_below: bool = False) -> go.Figure:
    """``fig`` with the report layout, hover picking the closest point."""
    styled = base_layout(fig, height=height, legend_below=legend_below)
    styled.update_layout(hovermode="closest")
    return styled


def _score_sentence(objective: str | None, maximize: bool) -> str:
    """What a score is, in one sentence."""
    unit = objective_unit(objective)
    what = f"{objective}, in {unit}" if unit else (objective or "the objective (not recorded)")
    return (
        f"A score is the candidate's replay of the window scored on {what} "
        f"({'higher' if maximize else 'lower'} is better)."
    )


PANELS: tuple[Panel, ...] = (
    Panel(
        "retune_scores",
        "Candidate scores per window",
        "Candidates, the current point and the best candidate per window.",
        ("retune_events.candidates", "retune_events.current_score", "retune_events.best_score"),
        _scores_chart,
    ),
    Panel(
        "retune_outcomes",
        "Decision outcomes on a timeline",
        "One marker per window at the time its decision landed (window end when not recorded), "
        "on the row of its outcome; hover for the reason and the improvement over the current "
        "point.",
        ("retune_events.outcome", "retune_events.decision_s", "retune_events.reason"),
        _outcome_chart,
    ),
    Panel(
        "retune_parameters",
        "Router parameters and planner fields in force",
        _PARAMETERS_HOW,
        ("retune_events.candidates",),
        _parameters_chart,
    ),
    Panel(
        "retune_presweep",
        "Load-predictor pre-sweep losses per window",
        "Loss of each predictor candidate on the window; a star marks the window's winner. "
        + PRESWEEP_LOSS_SENTENCE,
        ("retune_events.predictor_presweep",),
        _presweep_chart,
    ),
)


def read_events(path: Path) -> list[Mapping[str, Any]] | None:
    """The retune decision records: a JSON list (or a dict holding it under
    ``retune_events``/``events``); None when the file is absent."""
    events = read_json(path)
    if events is None:
        return None
    if isinstance(events, Mapping):
        events = events.get("retune_events", events.get("events", []))
    if not isinstance(events, list):
        raise InputError("expected a list of decision records", source=str(path))
    for i, event in enumerate(events):
        # The keys every decision record has (retune.record); anything else is not one.
        if not (
            isinstance(event, Mapping)
            and isinstance(event.get("window"), int)
            and event.get("outcome") in RETUNE_OUTCOMES
        ):
            raise InputError(
                f"record {i} is not a retune decision record (it needs an integer "
                "window and an outcome: " + ", ".join(RETUNE_OUTCOMES) + ")",
                source=str(path),
            )
    return events


def _threshold(value: Any) -> float:
    """The retune threshold in percent; the retune config's default when not given."""
    if value is None or isinstance(value, bool):
        return DEFAULT_MIN_IMPROVEMENT_PERCENTAGE
    try:
        return max(float(value), 0.0)
    except (TypeError, ValueError):
        return DEFAULT_MIN_IMPROVEMENT_PERCENTAGE


def _write_folder(tables: FolderTables, out: FolderOutput) -> list[Path]:
    retune = find_value(tables.inputs, "retune")
    retune = retune if isinstance(retune, Mapping) else {}
    return [
        out.write_html(
            RETUNE_REPORT,
            lambda src: render_retune(
                tables.read(RETUNE_EVENTS_JSON, read_events),
                objective=retune.get("objective"),
                min_improvement_percentage=_threshold(retune.get("min_improvement_percentage")),
                inputs=tables.inputs,
                summary=tables.summary if isinstance(tables.summary, Mapping) else None,
                baseline=baseline_reference(tables.json(BASELINE_JSON)),
                plotly_src=src,
            ),
        )
    ]


def _read_folder(tables: FolderTables) -> bool:
    tables.json(BASELINE_JSON)
    return tables.read(RETUNE_EVENTS_JSON, read_events) is not None


# ``retune_report.html``: the folder has retune decision records (with ``baseline.json``, the
# replay without retune, its headline gives goodput and GPU-hours before and after).
FOLDER_REPORT = FolderReport((RETUNE_EVENTS_JSON,), _read_folder, _write_folder)
