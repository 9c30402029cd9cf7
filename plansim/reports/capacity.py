"""The capacity report (``capacity_report.html``) from ``capacity.json`` and ``points.parquet``.

Headline: the recommended deployment (or that none meets the target), its goodput against the
target with the 90% interval, its cost, the hindsight lower bound and how far below the static
cost it is, the best planner policy's gap to the bound, and the replays it took. Charts
(``PANELS``): goodput against cost for every static point replayed, with the Pareto front, the
target line, the planner policies and the lower bound; the capacity each segment requires in
the bound's schedule against the trace's request rate, beside the cheapest static deployment,
the schedule replayed and each policy's provisioned GPUs. Details: the ranked static
deployments, the policies, the schedule per segment and the run's inputs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from plansim.reports.folder_tables import result_reader, result_report
from plansim.reports.format import number, percent, percent_against
from plansim.reports.page import Card, Page, plain
from plansim.reports.panels import Panel, draw_panels
from plansim.reports.replay import inputs_details
from plansim.reports.style import SLA_COLOUR, base_layout, palette_map
from plansim.reports.tables import finite_number, pareto_front
from plansim.schema import CAPACITY_JSON, CAPACITY_REPORT

BOUND_COLOUR = "#2ca02c"
POLICY_SYMBOLS = ("diamond", "square", "triangle-up", "cross", "x", "pentagon")


@dataclass(frozen=True, slots=True)
class CapacityData:
    """What the panels draw from: the ``capacity.json`` mapping and the static rows of the
    points table (or of ``capacity.json`` when the table is absent)."""

    report: Mapping[str, Any]
    static: pd.DataFrame

    @property
    def unit(self) -> str:
        return str(self.report["objective"]["unit"])


def _workers(point: Mapping[str, Any]) -> str:
    if "num_workers" in point:
        return f"{point['num_workers']} workers"
    return f"{point['num_prefill_workers']} prefill + {point['num_decode_workers']} decode"


def headline_text(report: Mapping[str, Any]) -> str:
    """One sentence: the recommendation and what the bound says about scaling."""
    unit = report["objective"]["unit"]
    target = report["target"]
    best = report.get("cheapest_static")
    oracle = report.get("oracle") or {}
    if best is None:
        text = (
            f"No deployment within {report['max_gpu_budget']} GPUs meets the "
            f"{percent(target)} goodput target."
        )
        bad = report.get("best_infeasible")
        if bad is not None:
            text += (
                f" Closest: {_workers(bad)} ({bad['variant']}), "
                f"{percent_against(bad['goodput_ratio'], target)} goodput."
            )
        return text
    text = (
        f"Recommended: {_workers(best)} ({best['variant']}), "
        f"{percent_against(best['goodput_ratio'], target)} "
        f"goodput against a {percent(target)} target, {number(best['cost'])} {unit}."
    )
    if oracle.get("cost"):
        saving = 1 - oracle["cost"] / best["cost"] if best["cost"] else 0.0
        text += (
            f" A perfect autoscaler could spend {number(oracle['cost'])} {unit} "
            f"({percent(saving)} less)."
        )
    return text


def capacity_cards(report: Mapping[str, Any]) -> list[Card]:
    """The recommendation, its goodput and cost, the lower bound, the best policy, replays."""
    unit = report["objective"]["unit"]
    target = report["target"]
    best = report.get("cheapest_static")
    cards = []
    if best is None:
        bad = report.get("best_infeasible")
        detail = (
            f"closest: {_workers(bad)}, {percent_against(bad['goodput_ratio'], target)} goodput"
            if bad
            else "nothing replayed within the budget"
        )
        cards.append(Card("recommended", "Recommended", "none", detail, "bad"))
    else:
        cards.append(
            Card(
                "recommended",
                "Recommended",
                _workers(best),
                f"{best['variant']}, {best['gpus']} GPUs",
                "good",
            )
        )
        interval = best.get("interval")
        detail = f"target {percent(target)}"
        if interval:
            detail += (
                f"; 90% interval {percent(interval['low'])}-{percent(interval['high'])} "
                f"({interval['verdict']})"
            )
        tone = "good" if not interval or interval["verdict"] == "above" else "neutral"
        cards.append(
            Card("goodput", "Goodput", percent_against(best["goodput_ratio"], target), detail, tone)
        )
        cards.append(
            Card(
                "cost",
                "Cost",
                f"{number(best['cost'])} {unit}",
                "the cheapest static deployment meeting the target",
            )
        )
    oracle = report.get("oracle") or {}
    if oracle.get("cost") is not None:
        detail = "the least any scaling policy could spend"
        if best is not None and best["cost"]:
            detail = f"{percent(1 - oracle['cost'] / best['cost'])} below the cheapest static"
        cards.append(Card("lower_bound", "Lower bound", f"{number(oracle['cost'])} {unit}", detail))
    policies = [p for p in report.get("policies") or () if p.get("meets_target")]
    if policies:
        top = min(policies, key=lambda p: p["cost"])
        gap = top.get("gap_to_oracle_pct")
        saving, share = top.get("saving_vs_static_pct"), top.get("share_of_hindsight_saving")
        detail, tone = f"{number(top['cost'])} {unit} at {percent(top['goodput_ratio'])}", "neutral"
        if saving is not None and best is not None:
            # Against the static pick: a scaling policy is worth running only when it is cheaper.
            side = "less" if saving >= 0 else "more"
            detail += (
                f", {abs(saving):.0f}% {side} than the recommended static deployment "
                f"({number(best['cost'])} {unit})"
            )
            tone = "good" if saving > 0 else "bad"
        if share is not None:
            detail += f", {percent(share)} of the hindsight saving"
        if gap is not None:
            detail += f"; {gap:+.1f}% over the bound"
        cards.append(Card("best_policy", "Best policy", str(top["name"]), detail, tone))
    elif report.get("policies"):
        cards.append(
            Card("best_policy", "Best policy", "none", "no planner policy met the target", "bad")
        )
    cards.append(replays_card(report))
    return cards


def replays_card(report: Mapping[str, Any]) -> Card:
    """The replays a run took, by kind, and its rounds (``report["replays"]``)."""
    replays = report.get("replays") or {}
    kinds = ", ".join(f"{n} {k}" for k, n in replays.items() if k not in ("total", "rounds"))
    return Card(
        "replays",
        "Replays",
        f"{replays.get('total', 0):,}",
        f"{kinds}; {replays.get('rounds', 0)} rounds",
    )


def render_capacity(
    report: Mapping[str, Any],
    points: pd.DataFrame | None = None,
    inputs: Mapping[str, Any] | None = None,
    *,
    plotly_src: str | None = None,
) -> str:
    """The capacity report (HTML str) of a ``capacity.json`` mapping, its points table and
    the run's inputs; ``plotly_src`` as in ``Page.render``."""
    page = Page("plansim capacity report", headline_text(report))
    page.headline(capacity_cards(report), _legend(report))
    for note in report.get("notes") or ():
        page.note("Note", note)
    page.part("Charts")
    draw_panels(page, PANELS, CapacityData(report, _static_points(report, points)))
    page.part("Details")
    _static_table(page, report)
    _policy_table(page, report)
    _tuning_table(page, report)
    _segment_table(page, report)
    inputs_details(page, dict(inputs or {}))
    return page.render(plotly_src)


def _legend(report: Mapping[str, Any]) -> str:
    sla = report.get("sla") or {}
    bounds = ", ".join(f"{k.removesuffix('_ms').upper()} <= {number(v)} ms" for k, v in sla.items())
    return (
        f"Goodput ratio: requests meeting {bounds or 'the SLA'} over all requests; cost in "
        f"{report['objective']['unit']}; GPU budget {report['max_gpu_budget']}."
    )


def _static_points(report: Mapping[str, Any], points: pd.DataFrame | None) -> pd.DataFrame:
    if points is not None and len(points) and {"kind", "cost", "goodput_ratio"} <= set(points):
        return points[points["kind"] == "static"]
    rows = [v for v in report.get("static", []) if "cost" in v]
    return pd.DataFrame(rows)


def _pareto_chart(data: CapacityData) -> go.Figure | str:
    report, unit, static = data.report, data.unit, data.static
    if not len(static):
        return "Not shown: no static point was replayed."
    fig = go.Figure()
    colours = palette_map(static["variant"])
    for variant, group in static.groupby("variant", sort=True):
        inside = (
            group["within_budget"].astype(bool)
            if "within_budget" in group
            else (pd.Series(True, index=group.index))
        )
        labels = [plain(_label(r)) for r in group.to_dict("records")]
        fig.add_trace(
            go.Scatter(
                x=group["cost"],
                y=group["goodput_ratio"],
                mode="markers",
                name=plain(variant),
                text=labels,
                hovertemplate="%{text}<br>goodput %{y:.2%}<br>%{x:.3f} " + unit + "<extra></extra>",
                marker={
                    "color": colours[variant],
                    "size": 10,
                    "symbol": ["circle" if i else "circle-open" for i in inside],
                },
            )
        )
    front = _pareto(static)
    if len(front) > 1:
        fig.add_trace(
            go.Scatter(
                x=front["cost"],
                y=front["goodput_ratio"],
                mode="lines",
                name="Pareto front",
                line={"color": "#555", "dash": "dot"},
                hoverinfo="skip",
            )
        )
    best = report.get("cheapest_static")
    if best is not None:
        fig.add_trace(
            go.Scatter(
                x=[best["cost"]],
                y=[best["goodput_ratio"]],
                mode="markers",
                name="recommended",
                marker={
                    "symbol": "star",
                    "size": 18,
                    "color": "#f0b400",
                    "line": {"color": "#333", "width": 1},
                },
                hovertemplate="recommended<extra></extra>",
            )
        )
    for k, policy in enumerate(report.get("policies") or ()):
        fig.add_trace(
            go.Scatter(
                x=[policy["cost"]],
                y=[policy["goodput_ratio"]],
                mode="markers",
                name=plain(f"policy {policy['name']}"),
                marker={
                    "symbol": POLICY_SYMBOLS[k % len(POLICY_SYMBOLS)],
                    "size": 13,
                    "color": "#8172b3",
                },
                hovertemplate=plain(policy["name"])
                + "<br>goodput %{y:.2%}<br>%{x:.3f} "
                + unit
                + f"<br>{policy['scaling_events']} scaling events<extra></extra>",
            )
        )
    oracle = report.get("oracle") or {}
    replayed = oracle.get("schedule_replay")
    if replayed is not None:
        fig.add_trace(
            go.Scatter(
                x=[replayed["cost"]],
                y=[replayed["goodput_ratio"]],
                mode="markers",
                name="hindsight schedule, replayed",
                marker={
                    "symbol": "circle-x-open",
                    "size": 13,
                    "color": BOUND_COLOUR,
                    "line": {"width": 2},
                },
                hovertemplate="the bound's schedule replayed<br>goodput "
                "%{y:.2%}<br>%{x:.3f} " + unit + "<extra></extra>",
            )
        )
    if finite_number(oracle.get("cost")) is not None:
        fig.add_vline(
            x=oracle["cost"],
            line={"color": BOUND_COLOUR, "dash": "dash"},
            annotation_text="lower bound",
            annotation_position="bottom right",
        )
        fig.add_trace(
            go.Scatter(
                x=[oracle["cost"]],
                y=[oracle.get("goodput_ratio")],
                mode="markers",
                name="lower bound",
                marker={"symbol": "star-triangle-up", "size": 14, "color": BOUND_COLOUR},
                hovertemplate="hindsight lower bound<br>%{x:.3f} " + unit + "<extra></extra>",
            )
        )
    fig.add_hline(
        y=report["target"],
        line={"color": SLA_COLOUR, "dash": "dash"},
        annotation_text=f"target {report['target']:.1%}",
        annotation_position="top left",
    )
    base_layout(fig, height=480)
    fig.update_layout(
        hovermode="closest", xaxis_title=unit, yaxis_title="goodput ratio", yaxis_tickformat=".0%"
    )
    return fig


def _label(row: Mapping[str, Any]) -> str:
    # A disaggregated row sizes its prefill pool; an aggregated one leaves it empty.
    if pd.notna(row.get("num_prefill_workers", pd.NA)):
        counts = f"{row.get('num_prefill_workers')}P+{row.get('num_decode_workers')}D"
    else:
        counts = f"{row.get('num_workers')} workers"
    return f"{row.get('variant')}: {counts}"


def _pareto(static: pd.DataFrame) -> pd.DataFrame:
    """Points within budget that no cheaper point beats on goodput, by cost."""
    inside = static
    if "within_budget" in static:
        inside = static[static["within_budget"].astype(bool)]
    keep = pareto_front(inside["cost"].tolist(), inside["goodput_ratio"].tolist())
    return inside.iloc[keep]


def _segments_chart(data: CapacityData) -> go.Figure | str:
    report = data.report
    oracle = report.get("oracle") or {}
    segments = oracle.get("segments") or []
    if not segments:
        return "Not shown: no hindsight schedule (no schedule within the budget meets the target)."
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    traffic = report.get("traffic") or {}
    arrivals = traffic.get("arrivals") or []
    interval_s = float(traffic.get("interval_s") or 60.0)
    if arrivals:
        fig.add_trace(
            go.Bar(
                x=[(k + 0.5) * interval_s / 60.0 for k in range(len(arrivals))],
                y=[a / interval_s for a in arrivals],
                name="request rate (req/s)",
                marker={"color": "#c9d3e6"},
                opacity=0.8,
                hovertemplate="%{y:.2f} req/s<extra></extra>",
            ),
            secondary_y=False,
        )
    xs, ys = [], []
    for seg in segments:
        xs += [seg["start_s"] / 60.0, seg["end_s"] / 60.0]
        ys += [seg["gpus"], seg["gpus"]]
    fig.add_trace(
        go.Scatter(
            x=xs,
            y=ys,
            mode="lines",
            name="hindsight schedule (GPUs)",
            line={"color": BOUND_COLOUR, "width": 3},
            hovertemplate="%{y} GPUs<extra></extra>",
        ),
        secondary_y=True,
    )
    best = report.get("cheapest_static")
    if best is not None:
        fig.add_trace(
            go.Scatter(
                x=[0, segments[-1]["end_s"] / 60.0],
                y=[best["gpus"]] * 2,
                mode="lines",
                name="cheapest static (GPUs)",
                line={"color": "#8c8c8c", "dash": "dash"},
            ),
            secondary_y=True,
        )
    gpw = oracle.get("gpus_per_worker") or []
    replayed = oracle.get("schedule_replay") or {}
    lines = [
        (
            "schedule replayed (GPUs provisioned)",
            replayed.get("workers") or [],
            {"color": BOUND_COLOUR, "dash": "dot", "width": 1.5},
        )
    ]
    for k, policy in enumerate(report.get("policies") or ()):
        lines.append(
            (
                f"policy {policy['name']} (GPUs)",
                policy.get("workers") or [],
                {"color": "#8172b3", "dash": ("solid", "dot", "dashdot")[k % 3]},
            )
        )
    for name, series, line in lines:
        if not series or not gpw:
            continue
        fig.add_trace(
            go.Scatter(
                x=[row[0] / 60.0 for row in series],
                y=[sum(n * g for n, g in zip(row[1:], gpw)) for row in series],
                mode="lines",
                line={"shape": "hv", **line},
                name=plain(name),
            ),
            secondary_y=True,
        )
    base_layout(fig, height=440, legend_below=True)
    fig.update_xaxes(title_text="replay time (min)")
    # The request rate sits on the primary axis (right) so that the GPU lines, on the overlaying
    # axis (left), are drawn above its bars.
    fig.update_yaxes(
        title_text="requests / s",
        rangemode="tozero",
        showgrid=False,
        side="right",
        secondary_y=False,
    )
    fig.update_yaxes(
        title_text="GPUs",
        rangemode="tozero",
        side="left",
        tickmode="auto",
        showgrid=True,
        secondary_y=True,
    )
    return fig


def _static_table(page: Page, report: Mapping[str, Any]) -> None:
    unit = report["objective"]["unit"]
    rows = sorted(
        report.get("static") or [],
        key=lambda v: (
            not v["feasible"],
            v.get("cost", 0.0) if v["feasible"] else -v.get("goodput_ratio", 0.0),
        ),
    )
    table = []
    for rank, v in enumerate(rows, start=1):
        table.append(
            [
                rank if v["feasible"] else "-",
                v["variant"],
                _workers(v) if "gpus" in v else "-",
                v.get("gpus"),
                _fmt_pct(v.get("goodput_ratio"), report["target"]),
                _fmt_cost(v.get("cost")),
                "yes" if v["feasible"] else "no",
                ", ".join(_count_text(c) for c in v.get("replayed", [])),
            ]
        )
    page.table(
        "Static deployments, cheapest first",
        [
            "rank",
            "deployment",
            "workers",
            "GPUs",
            "goodput",
            unit,
            "meets target",
            "counts replayed",
        ],
        table,
        "One row per searched deployment: its cheapest count meeting the target (or, when "
        "none does, its best count), and every count the search replayed, in order.",
        numeric=[True, False, False, True, True, True, False, False],
    )


def _policy_table(page: Page, report: Mapping[str, Any]) -> None:
    policies = report.get("policies") or []
    if not policies:
        return
    unit = report["objective"]["unit"]

    def saving(p: Mapping[str, Any]) -> list[str]:
        # A policy under target shows no saving: its lower cost is paid in missed requests.
        if not p["meets_target"]:
            return ["misses the target", "-"]
        s, share = p.get("saving_vs_static_pct"), p.get("share_of_hindsight_saving")
        return ["-" if s is None else f"{s:+.1f}%", "-" if share is None else percent(share)]

    table = [
        [
            p["name"],
            p["source"],
            _fmt_pct(p["goodput_ratio"], report["target"]),
            _fmt_cost(p["cost"]),
            *saving(p),
            p["scaling_events"],
            "yes" if p["meets_target"] else "no",
            "-" if p["gap_to_oracle_pct"] is None else f"{p['gap_to_oracle_pct']:+.1f}%",
            _interval_text(p.get("interval")),
        ]
        for p in policies
    ]
    page.table(
        "Planner policies",
        [
            "policy",
            "config",
            "goodput",
            unit,
            "saving vs static",
            "share of hindsight saving",
            "scaling events",
            "meets target",
            "gap to bound",
            "90% interval",
        ],
        table,
        "Each policy replayed on the whole trace from the deployment file's worker "
        "counts (with --planner-start static, the cheapest static deployment's; within "
        "the GPU budget, and at least the planner's min endpoints). "
        "Saving: (static - policy) / static; share of the hindsight saving: (static - "
        "policy) / (static - bound); neither is shown for a policy under the target. "
        "The gap is its cost above the hindsight lower bound.",
        numeric=[False, False, True, True, True, True, True, False, True, False],
    )


def _tuning_table(page: Page, report: Mapping[str, Any]) -> None:
    tuning = report.get("planner_tuning")
    if not tuning:
        return
    answer = tuning.get("answer")
    table = [
        [
            ", ".join(f"{k}={v}" for k, v in t["setting"].items()),
            _fmt_pct(t["goodput_ratio"], report["target"]),
            _fmt_cost(t["cost"]),
            "yes" if t["meets_target"] else "no",
            "recommended" if answer is not None and t["setting"] == answer else "",
        ]
        for t in tuning["trials"]
    ]
    knobs = ", ".join(
        f"{k['key']} ({'monotone' if k['monotone'] else 'one at a time'})" for k in tuning["knobs"]
    )
    page.table(
        "Planner tuning",
        ["setting", "goodput", report["objective"]["unit"], "meets target", ""],
        table,
        f"Every setting of the dynamo policy's knobs replayed, in order: {knobs}. The "
        "cheapest that meets the target is recommended_planner.yaml.",
        numeric=[False, True, True, False, False],
    )


def _segment_table(page: Page, report: Mapping[str, Any]) -> None:
    oracle = report.get("oracle") or {}
    segments = oracle.get("segments") or []
    if not segments:
        return
    table = [
        [
            s["segment"],
            f"{s['start_s'] / 60:.1f}-{s['end_s'] / 60:.1f}",
            s["requests"],
            _workers(s),
            s["gpus"],
            _fmt_pct(s.get("goodput_ratio")),
            "yes" if s["replayed"] else "optimistic",
        ]
        for s in segments
    ]
    unit = report["objective"]["unit"]
    replayed = oracle.get("schedule_replay")
    also = ""
    if replayed:
        also = (
            f" Replayed on the whole trace, the schedule costs {_fmt_cost(replayed['cost'])} "
            f"{unit} at {_fmt_pct(replayed['goodput_ratio'], report['target'])} goodput "
            f"({'meets' if replayed['meets_target'] else 'misses'} the target)."
        )
    page.table(
        "Hindsight schedule per segment",
        ["segment", "minutes", "requests", "workers", "GPUs", "goodput", "value replayed"],
        table,
        f"The cheapest schedule meeting the target overall: {_fmt_cost(oracle['cost'])} "
        f"{unit}, {_fmt_cost(oracle['startup_cost'])} of it start-ups. 'optimistic' marks "
        "a segment value not replayed (the best monotonicity allows)." + also,
        numeric=[True, False, True, False, True, True, False],
    )


PANELS: tuple[Panel, ...] = (
    Panel(
        "capacity_pareto",
        "Goodput against cost",
        "Each dot is a static deployment the search replayed (hollow: over the GPU budget, a "
        "probe that bounds what fewer workers can do); the dotted line is the Pareto front of "
        "those within budget, the star the recommendation. The red line is the target, the green "
        "line the hindsight lower bound on cost; diamonds are the planner policies. Good answers "
        "sit above the red line and far left.",
        (
            "points.kind",
            "points.cost",
            "points.goodput_ratio",
            "capacity.policies",
            "capacity.oracle",
        ),
        _pareto_chart,
    ),
    Panel(
        "capacity_segments",
        "Capacity each segment requires",
        "The green steps are the GPUs of the hindsight schedule: the least each segment needs "
        "for the target to hold overall (dotted: that schedule replayed, start-ups and drains "
        "included). Grey is the cheapest static deployment, purple each policy's provisioned "
        "GPUs over time, and the bars the trace's request rate (right axis).",
        ("capacity.oracle.segments", "capacity.traffic", "capacity.policies.workers"),
        _segments_chart,
    ),
)


def _count_text(counts: Any) -> str:
    return f"{counts[0]}P+{counts[1]}D" if isinstance(counts, Sequence) else str(counts)


def _fmt_pct(value: Any, target: float | None = None) -> str:
    share = finite_number(value)
    if share is None:
        return "-"
    return percent(share) if target is None else percent_against(share, target)


def _fmt_cost(value: Any) -> str:
    cost = finite_number(value)
    return "-" if cost is None else number(cost)


def _interval_text(interval: Mapping[str, Any] | None) -> str:
    if not interval:
        return "-"
    return f"{percent(interval['low'])}-{percent(interval['high'])} ({interval['verdict']})"


# ``capacity.json`` as ``plansim capacity`` writes it: the mapping, None when absent.
read_capacity = result_reader(
    "plansim capacity", ("target", "objective", "static", "max_gpu_budget")
)

# ``capacity_report.html``: the folder has ``capacity.json`` (with ``points.parquet`` when
# present).
FOLDER_REPORT = result_report(CAPACITY_JSON, read_capacity, CAPACITY_REPORT, render_capacity)
