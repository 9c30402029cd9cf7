"""Colours and layout shared by every report, so a pool, a percentile or a predictor has the
same colour wherever it appears."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import plotly.graph_objects as go

POOL_COLOURS = {"agg": "#4c72b0", "prefill": "#dd8452", "decode": "#55a868"}
PERCENTILE_COLOURS = {50.0: "#4c72b0", 90.0: "#dd8452", 99.0: "#c44e52"}
STATE_DASH = {"ready": "solid", "starting": "dot", "draining": "dash"}
SLA_COLOUR = "#d62728"
ACTUAL_COLOUR = "#222222"
# Categorical palette (colour-blind friendly order) for predictors, parameters, workers.
PALETTE = (
    "#4c72b0",
    "#dd8452",
    "#55a868",
    "#c44e52",
    "#8172b3",
    "#937860",
    "#da8bc3",
    "#8c8c8c",
    "#ccb974",
    "#64b5cd",
)


# A small white template (the look of plotly_white without its per-trace-type defaults): the
# full template is ~10 kB per figure and slow to validate.
_AXIS = {
    "gridcolor": "#ebf0f8",
    "linecolor": "#ebf0f8",
    "zerolinecolor": "#ebf0f8",
    "ticks": "",
    "automargin": True,
    "title": {"standoff": 12},
}
TEMPLATE = go.layout.Template(
    layout={
        "paper_bgcolor": "white",
        "plot_bgcolor": "white",
        "colorway": list(PALETTE),
        "font": {"color": "#2a3f5f"},
        "xaxis": _AXIS,
        "yaxis": _AXIS,
        "hoverlabel": {"align": "left"},
    }
)


def pool_colour(pool: str) -> str:
    return POOL_COLOURS.get(str(pool), "#8172b3")


def palette_map(names: Iterable[Any]) -> dict[Any, str]:
    """A stable colour per name: names are sorted, so the same set maps the same way."""
    return {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(sorted(set(names), key=str))}


def base_layout(fig: go.Figure, height: int = 420, legend_below: bool = False) -> go.Figure:
    """The common look: white template, readable fonts, legend on the right (or below when a
    chart is wide and has many traces), hover showing all traces at one x."""
    legend: dict[str, Any] = {"font": {"size": 12}}
    top, bottom = 40, (130 if legend_below else 60)
    if legend_below:
        # Just under the x-axis title, whatever the figure height (y is in plot-area fractions).
        legend.update(
            orientation="h", yanchor="top", y=-62 / (height - top - bottom), xanchor="left", x=0
        )
    fig.update_layout(
        template=TEMPLATE,
        height=height,
        margin={"l": 70, "r": 30, "t": top, "b": bottom},
        legend=legend,
        hovermode="x unified",
        font={"size": 12},
    )
    return fig
