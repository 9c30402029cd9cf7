"""The fleet report (``fleet_report.html``) from ``fleet.json`` and ``points.parquet``.

Headline: whether the fleet fits, its cost per hour against the budget and against the models'
cheapest answers on their own, the solver that proved it, the binding constraint when it does
not fit, and the autoscaled fleet's refused scale-ups. Charts (``PANELS``): the cost per hour
by model and GPU type; each model's goodput against its target (the fleet's choice, and with
planners the autoscaled fleet and each model autoscaled alone); the cost-goodput front of every
model; the GPUs each model held over time in the autoscaled fleet. Details: the models' choices,
the inventory, the bindings, the autoscaled fleet and the run's inputs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from plansim.reports.capacity import replays_card
from plansim.reports.folder_tables import result_reader, result_report
from plansim.reports.format import number, percent, percent_against
from plansim.reports.page import Card, Page, plain
from plansim.reports.panels import Panel, draw_panels
from plansim.reports.replay import inputs_details
from plansim.reports.style import PALETTE, SLA_COLOUR, base_layout
from plansim.schema import FLEET_JSON, FLEET_REPORT

CHOICE_COLOUR = "#f0b400"


@dataclass(frozen=True, slots=True)
class FleetData:
    """What the panels draw from: the ``fleet.json`` mapping and the points table (None when
    absent: the fronts come from ``fleet.json`` alone)."""

    report: Mapping[str, Any]
    points: pd.DataFrame | None


def _workers(point: Mapping[str, Any]) -> str:
    if "num_workers" in point:
        return f"{point['num_workers']} workers"
    return f"{point['num_prefill_workers']} prefill + {point['num_decode_workers']} decode"


def headline_text(report: Mapping[str, Any]) -> str:
    models = report["models"]
    if report["feasible"]:
        moved = [m["name"] for m in models if m["choice"]["moved"]]
        text = (
            f"The cheapest fleet of {len(models)} models costs "
            f"{number(report['cost_per_hour'])} per hour and meets every target."
        )
        if moved:
            text += f" The inventory moves {', '.join(moved)} off its cheapest answer on its own."
        return text
    binds = "; ".join(b["sentence"] for b in report["bindings"])
    return f"No fleet meets every target within the inventory and budget: {binds}."


def fleet_cards(report: Mapping[str, Any]) -> list[Card]:
    cards = []
    budget = report["budget_per_hour"]
    if report["feasible"]:
        cards.append(
            Card(
                "fleet",
                "Fleet",
                "fits",
                f"{len(report['models'])} models, every target met",
                "good",
            )
        )
    else:
        first = report["bindings"][0] if report["bindings"] else None
        cards.append(
            Card("fleet", "Fleet", "does not fit", first["sentence"] if first else "", "bad")
        )
    cards.append(
        Card(
            "cost",
            "Cost",
            f"{number(report['cost_per_hour'])} per hour",
            f"budget {number(budget)} per hour"
            if budget is not None
            else f"{number(report['cost'])} over the traces",
        )
    )
    independent = report["independent"]
    if independent["cost_per_hour"] is not None:
        fits = "they fit together" if independent["fits"] else "together they do not fit"
        cards.append(
            Card(
                "alone",
                "Cheapest alone",
                f"{number(independent['cost_per_hour'])} per hour",
                f"each model's own cheapest answer; {fits}",
            )
        )
    solver = report["solver"]
    cards.append(
        Card(
            "solver",
            "Solver",
            "optimal" if solver["proved_optimal"] else solver["status"],
            solver["name"],
            "good" if solver["proved_optimal"] else "neutral",
        )
    )
    auto = report.get("autoscaled")
    if auto is not None:
        cards.append(
            Card(
                "refused",
                "Refused scale-ups",
                str(auto["refused_scale_ups"]),
                f"{auto['sla_cost_good_requests']} good requests lost to them",
                "good" if not auto["refused_scale_ups"] else "neutral",
            )
        )
    cards.append(replays_card(report))
    return cards


def render_fleet(
    report: Mapping[str, Any],
    points: pd.DataFrame | None = None,
    inputs: Mapping[str, Any] | None = None,
    *,
    plotly_src: str | None = None,
) -> str:
    """The fleet report (HTML str) of a ``fleet.json`` mapping, its points table and the
    run's inputs; ``plotly_src`` as in ``Page.render``."""
    page = Page("plansim fleet report", headline_text(report))
    page.headline(
        fleet_cards(report),
        "Costs are per hour (GPUs x price per GPU-hour) unless "
        "said otherwise; goodput ratio: requests meeting the model's SLA over all "
        "its requests.",
    )
    for note in report.get("notes") or ():
        page.note("Note", note)
    page.part("Charts")
    draw_panels(page, PANELS, FleetData(report, points))
    page.part("Details")
    _models_table(page, report)
    _inventory_table(page, report)
    _autoscaled_table(page, report)
    inputs_details(page, dict(inputs or {}))
    return page.render(plotly_src)


def _colours(keys: list[str]) -> dict[str, str]:
    return {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(keys)}


def _breakdown_chart(data: FleetData) -> go.Figure | str:
    rows = data.report.get("breakdown") or []
    if not rows:
        return "Not shown: the fleet holds no GPUs."
    frame = pd.DataFrame(rows)
    frame["type"] = frame["system"] + (" " + frame["tier"]).where(frame["tier"] != "on_demand", "")
    colours = _colours(sorted(frame["type"].unique()))
    fig = go.Figure()
    for kind, group in frame.groupby("type", sort=True):
        fig.add_trace(
            go.Bar(
                x=group["model"],
                y=group["cost_per_hour"],
                name=plain(kind),
                marker={"color": colours[kind]},
                text=group["gpus"],
                hovertemplate="%{x}: %{text} GPUs, %{y:.3f} per hour<extra>"
                + plain(kind)
                + "</extra>",
            )
        )
    budget = data.report.get("budget_per_hour")
    base_layout(fig, height=380)
    fig.update_layout(barmode="stack", xaxis_title="model", yaxis_title="cost per hour")
    if budget is not None:
        fig.add_annotation(
            text=f"fleet {number(data.report['cost_per_hour'])} of a "
            f"{number(budget)} budget per hour",
            xref="paper",
            yref="paper",
            x=1,
            y=1.08,
            showarrow=False,
        )
    return fig


def _goodput_chart(data: FleetData) -> go.Figure:
    report = data.report
    models = report["models"]
    names = [m["name"] for m in models]
    fig = go.Figure()
    fig.add_trace(
        go.Bar(
            x=names,
            y=[m["choice"]["goodput_ratio"] for m in models],
            name="fleet's choice",
            marker={"color": PALETTE[0]},
            hovertemplate="%{x}: %{y:.2%}<extra>fleet's choice</extra>",
        )
    )
    auto = report.get("autoscaled")
    if auto is not None:
        fig.add_trace(
            go.Bar(
                x=names,
                y=[m["goodput_ratio"] for m in auto["models"]],
                name="autoscaled fleet",
                marker={"color": PALETTE[2]},
                hovertemplate="%{x}: %{y:.2%}<extra>autoscaled fleet</extra>",
            )
        )
        fig.add_trace(
            go.Bar(
                x=names,
                y=[m.get("alone", {}).get("goodput_ratio") for m in auto["models"]],
                name="autoscaled alone",
                marker={"color": PALETTE[4]},
                hovertemplate="%{x}: %{y:.2%}<extra>autoscaled alone</extra>",
            )
        )
    fig.add_trace(
        go.Scatter(
            x=names,
            y=[m["target"] for m in models],
            mode="markers",
            name="target",
            marker={
                "symbol": "line-ew-open",
                "size": 40,
                "color": SLA_COLOUR,
                "line": {"width": 3},
            },
            hovertemplate="%{x}: target %{y:.1%}<extra></extra>",
        )
    )
    base_layout(fig, height=380)
    fig.update_layout(
        barmode="group", xaxis_title="model", yaxis_title="goodput ratio", yaxis_tickformat=".0%"
    )
    return fig


def _front_points(data: FleetData, name: str, model: Mapping[str, Any]) -> pd.DataFrame:
    points = data.points
    if points is not None and len(points) and {"model", "kind", "cost_per_hour"} <= set(points):
        rows = points[
            (points["model"] == name)
            & points["kind"].isin(["static", "spot"])
            & points["within_budget"].astype(bool)
        ]
        return rows[["variant", "tier", "cost_per_hour", "goodput_ratio", "gpus"]]
    return pd.DataFrame(
        [
            {k: c[k] for k in ("variant", "tier", "cost_per_hour", "goodput_ratio")}
            | {"gpus": sum(c["gpus"].values())}
            for c in model["front"]
        ]
    )


def _fronts_chart(data: FleetData) -> go.Figure:
    models = data.report["models"]
    fig = make_subplots(
        rows=1,
        cols=len(models),
        subplot_titles=[plain(m["name"]) for m in models],
        shared_yaxes=True,
    )
    for col, model in enumerate(models, start=1):
        rows = _front_points(data, model["name"], model)
        legend = col == 1
        fig.add_trace(
            go.Scatter(
                x=rows["cost_per_hour"],
                y=rows["goodput_ratio"],
                mode="markers",
                name="replayed",
                showlegend=legend,
                legendgroup="replayed",
                text=[
                    plain(f"{v} ({t}), {g} GPUs")
                    for v, t, g in zip(rows["variant"], rows["tier"], rows["gpus"])
                ],
                marker={
                    "color": "#8c8c8c",
                    "size": 8,
                    "symbol": ["diamond" if t == "spot" else "circle" for t in rows["tier"]],
                },
                hovertemplate="%{text}<br>goodput %{y:.2%}<br>%{x:.3f} per hour<extra></extra>",
            ),
            row=1,
            col=col,
        )
        front = model["front"]
        fig.add_trace(
            go.Scatter(
                x=[c["cost_per_hour"] for c in front],
                y=[c["goodput_ratio"] for c in front],
                mode="lines+markers",
                name="front",
                showlegend=legend,
                legendgroup="front",
                line={"color": PALETTE[0], "dash": "dot"},
                marker={"color": PALETTE[0], "size": 9},
                hoverinfo="skip",
            ),
            row=1,
            col=col,
        )
        choice = model["choice"]
        fig.add_trace(
            go.Scatter(
                x=[choice["cost_per_hour"]],
                y=[choice["goodput_ratio"]],
                mode="markers",
                name="fleet's choice",
                showlegend=legend,
                legendgroup="choice",
                marker={
                    "symbol": "star",
                    "size": 17,
                    "color": CHOICE_COLOUR,
                    "line": {"color": "#333", "width": 1},
                },
                hovertemplate=plain(choice["variant"]) + "<extra>fleet's choice</extra>",
            ),
            row=1,
            col=col,
        )
        alone = model.get("cheapest_alone")
        if alone is not None and choice["moved"]:
            fig.add_trace(
                go.Scatter(
                    x=[alone["cost_per_hour"]],
                    y=[alone["goodput_ratio"]],
                    mode="markers",
                    name="cheapest alone",
                    showlegend=legend,
                    legendgroup="alone",
                    marker={"symbol": "star-open", "size": 17, "color": "#333"},
                    hovertemplate=plain(alone["variant"]) + "<extra>cheapest alone</extra>",
                ),
                row=1,
                col=col,
            )
        fig.add_hline(y=model["target"], line={"color": SLA_COLOUR, "dash": "dash"}, row=1, col=col)
        fig.update_xaxes(title_text="cost per hour", row=1, col=col)
    base_layout(fig, height=420, legend_below=True)
    fig.update_layout(hovermode="closest")
    fig.update_yaxes(title_text="goodput ratio", tickformat=".0%", row=1, col=1)
    return fig


def _gpus_chart(data: FleetData) -> go.Figure | str:
    auto = data.report.get("autoscaled")
    if auto is None:
        return (
            "Not shown: no model has a planner (or no fleet fits), so the fleet was not "
            "replayed autoscaled."
        )
    fig = go.Figure()
    colours = _colours([m["name"] for m in auto["models"]])
    for model in auto["models"]:
        series = model.get("gpus") or []
        fig.add_trace(
            go.Scatter(
                x=[row[0] / 60.0 for row in series],
                y=[row[1] for row in series],
                mode="lines",
                stackgroup="gpus",
                name=plain(model["name"]),
                line={"shape": "hv", "color": colours[model["name"]]},
                hovertemplate="%{y} GPUs<extra>" + plain(model["name"]) + "</extra>",
            )
        )
        for refusal in model.get("refusals") or ():
            fig.add_vline(
                x=refusal["at_s"] / 60.0, line={"color": SLA_COLOUR, "width": 1, "dash": "dot"}
            )
    total = sum(entry["count"] for entry in data.report["inventory"].values())
    fig.add_hline(
        y=total,
        line={"color": "#333", "dash": "dash"},
        annotation_text=f"inventory {total} GPUs",
        annotation_position="top left",
    )
    base_layout(fig, height=400, legend_below=True)
    fig.update_layout(xaxis_title="replay time (min)", yaxis_title="GPUs provisioned")
    return fig


PANELS: tuple[Panel, ...] = (
    Panel(
        "fleet_breakdown",
        "Cost per hour by model and GPU type",
        "One bar per model, stacked by the GPU system and tier its deployment holds (hover: "
        "GPUs and cost per hour). Their sum is the fleet's cost per hour.",
        ("fleet.breakdown",),
        _breakdown_chart,
    ),
    Panel(
        "fleet_goodput",
        "Goodput against each model's target",
        "Each model's goodput ratio in the fleet's choice (and, with planners, in the "
        "autoscaled fleet and autoscaled on its own); the red marks are the targets.",
        ("fleet.models", "fleet.autoscaled.models"),
        _goodput_chart,
    ),
    Panel(
        "fleet_fronts",
        "Cost and goodput of every deployment replayed, per model",
        "Grey points are the deployments each model's search replayed (diamonds: on spot "
        "capacity); the blue line is its front (meeting the target, no other cheaper on "
        "every GPU type), the star the fleet's choice and the open star the model's cheapest "
        "answer on its own when the fleet moved it. The red line is the target.",
        ("points.model", "points.cost_per_hour", "points.goodput_ratio", "fleet.models"),
        _fronts_chart,
    ),
    Panel(
        "fleet_gpus",
        "GPUs held in the autoscaled fleet",
        "GPUs each model provisioned over time with every model on one clock and one "
        "inventory (stacked); dotted red lines are scale-ups the inventory or the budget "
        "refused, the dashed line the inventory's GPUs.",
        ("fleet.autoscaled.models.gpus",),
        _gpus_chart,
    ),
)


def _models_table(page: Page, report: Mapping[str, Any]) -> None:
    rows = []
    for m in report["models"]:
        c = m["choice"]
        alone = m["cheapest_alone"]
        rows.append(
            [
                m["name"],
                c["variant"],
                _workers(c),
                c["tier"],
                ", ".join(f"{n} {s}" for s, n in c["gpus"].items()),
                percent_against(c["goodput_ratio"], m["target"]),
                percent(m["target"]),
                number(c["cost_per_hour"]),
                number(c["cost"]),
                "-" if alone is None else number(alone["cost_per_hour"]),
                "yes" if c["moved"] else "no",
            ]
        )
    page.table(
        "Models",
        [
            "model",
            "deployment",
            "workers",
            "tier",
            "GPUs",
            "goodput",
            "target",
            "per hour",
            "over the trace",
            "cheapest alone",
            "moved",
        ],
        rows,
        "Each model's deployment in the fleet and, beside it, the cheapest it could run "
        "on alone; 'moved' marks a model the inventory or budget sent elsewhere.",
        numeric=[False, False, False, False, False, True, True, True, True, True, False],
    )


def _inventory_table(page: Page, report: Mapping[str, Any]) -> None:
    rows = [
        [
            system,
            e["count"],
            e["used"],
            e["used_spot"],
            number(e["price_per_gpu_hour"]),
            "-" if e["spot"] is None else number(e["spot"]["price_per_gpu_hour"]),
            "-" if e["spot"] is None else number(e["spot"]["preemptions_per_hour"]),
        ]
        for system, e in report["inventory"].items()
    ]
    page.table(
        "Inventory",
        [
            "GPU system",
            "count",
            "used",
            "of them spot",
            "price per GPU-hour",
            "spot price",
            "spot preemptions per GPU-hour",
        ],
        rows,
        "What the fleet may hold of each GPU system and what its choice uses.",
        numeric=[False, True, True, True, True, True, True],
    )
    if report["bindings"]:
        page.table(
            "What binds",
            ["constraint", "model", "needs", "has"],
            [
                [b["constraint"], b["model"], number(b["needs"]), number(b["has"])]
                for b in report["bindings"]
            ],
            "The constraints the closest fleet breaks, and the model that binds each.",
            numeric=[False, False, True, True],
        )


def _autoscaled_table(page: Page, report: Mapping[str, Any]) -> None:
    auto = report.get("autoscaled")
    if auto is None:
        return
    rows = []
    for m in auto["models"]:
        alone = m.get("alone")
        rows.append(
            [
                m["name"],
                "yes" if m["planner"] else "no",
                percent(m["goodput_ratio"]),
                "-" if alone is None else percent(alone["goodput_ratio"]),
                number(m["gpu_hours"]),
                number(m["cost"]),
                m["scaling_events"],
                m["refused_scale_ups"],
                "-" if alone is None else m["sla_cost"]["good_requests"],
                m["preemptions"],
                m["migrated_requests"],
            ]
        )
    page.table(
        "Autoscaled fleet",
        [
            "model",
            "planner",
            "goodput",
            "goodput alone",
            "GPU-h",
            "cost",
            "scaling events",
            "refused scale-ups",
            "good requests lost",
            "preempted",
            "requests migrated",
        ],
        rows,
        f"Every model on one clock and one inventory: {number(auto['gpu_hours'])} GPU-h, "
        f"{number(auto['cost'])} over the traces. 'alone': the same planner without the "
        "other models; the good requests lost are its good requests alone minus in the "
        "fleet (what refused scale-ups cost).",
        numeric=[False, False, True, True, True, True, True, True, True, True, True],
    )


# ``fleet.json`` as ``plansim fleet`` writes it: the mapping, None when absent.
read_fleet = result_reader(
    "plansim fleet", ("feasible", "solver", "models", "inventory", "breakdown")
)

# ``fleet_report.html``: the folder has ``fleet.json`` (with ``points.parquet`` when present).
FOLDER_REPORT = result_report(FLEET_JSON, read_fleet, FLEET_REPORT, render_fleet)
