"""One self-contained HTML page: escaped header tables, notes and Plotly charts.

plotly.js is embedded once per page, so a report opens offline from a single file. Every piece
of text that reaches the page goes through ``html.escape`` (header, tables, notes) or
``plain`` (text Plotly draws: trace names, titles, hover text), so text from input files shows as
text and never becomes markup.

The page exposes ``window.__plansim = {expected, rendered, errors}`` so a browser check can wait
until every chart has rendered and read the JavaScript errors raised on the way.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from functools import lru_cache
from typing import Any

import plotly.graph_objects as go

_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;
background:#f6f7f9;color:#1d2330}
main{max-width:1280px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:1.5rem;margin:8px 0 4px}
h2{font-size:1.15rem;margin:28px 0 4px}
section h2{margin-top:4px}
p.lede{color:#4a5366;margin:0 0 12px}
section{background:#fff;border:1px solid #e1e4ea;border-radius:8px;padding:12px 16px;
margin:14px 0;overflow-x:auto}
p.how{color:#4a5366;font-size:.9rem;margin:2px 0 6px}
p.note{color:#8a5a00;background:#fff8e6;border-left:3px solid #e0a800;padding:6px 10px;
font-size:.9rem}
table{border-collapse:collapse;font-size:.85rem;margin:6px 0}
th,td{border-bottom:1px solid #e6e8ee;padding:3px 10px;text-align:left;vertical-align:top}
th{background:#f1f3f7;font-weight:600}
td.num{text-align:right;font-variant-numeric:tabular-nums}
pre{margin:0;font-size:.8rem;white-space:pre-wrap;word-break:break-word}
.tables{display:flex;flex-wrap:wrap;gap:24px}
.chart{width:100%}
section.kv{display:inline-block;vertical-align:top;margin-right:14px;max-width:calc(50% - 50px)}
summary{cursor:pointer;color:#2a4d8f}
.grid{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:6px 22px}
h3{font-size:1rem;margin:10px 0 0;text-align:center;font-weight:600}
"""

# Installed before plotly.js so that errors raised while loading or plotting are recorded.
_BOOT = (
    "window.__plansim={expected:0,rendered:0,errors:[]};"
    "window.addEventListener('error',function(e){window.__plansim.errors.push(String(e.message));});"
    "window.addEventListener('unhandledrejection',function(e){"
    "window.__plansim.errors.push('unhandled rejection: '+String(e.reason));});"
)

_PLOT = (
    "(function(){var divs=document.querySelectorAll('div.chart');"
    "window.__plansim.expected=divs.length;"
    "divs.forEach(function(div){"
    "var fig=JSON.parse(document.getElementById(div.dataset.figure).textContent);"
    "Plotly.newPlot(div,fig.data,fig.layout,{responsive:true,displaylogo:false})"
    ".then(function(){window.__plansim.rendered+=1;})"
    ".catch(function(e){window.__plansim.errors.push(div.dataset.chart+': '+String(e));});"
    "});})();"
)


def plain(text: Any) -> str:
    """Text for Plotly to draw literally: Plotly reads a subset of HTML in labels, so markup
    characters are escaped (``&`` ``<`` ``>``) and shown as typed."""
    return html.escape(str(text), quote=False)


@lru_cache(maxsize=1)
def _plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def _fmt(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != value:
            return "n/a"
        if 1000 <= abs(value) < 1e15:
            return f"{value:,.1f}".removesuffix(".0")
        if value == 0 or 0.01 <= abs(value) < 1000:
            return f"{value:,.3f}".rstrip("0").rstrip(".")
        return f"{value:.4g}"
    return str(value)


def _is_num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Page:
    """Accumulates sections in order, then renders one HTML document."""

    def __init__(self, title: str, lede: str = "") -> None:
        self._title = title
        self._lede = lede
        self._blocks: list[str] = []
        self._figures = 0

    def key_values(self, caption: str, rows: Iterable[tuple[str, Any]]) -> None:
        """A two-column table; values that are dicts or long lists are shown preformatted."""
        body = []
        for key, value in rows:
            cell = _cell(value)
            body.append(f"<tr><th>{html.escape(str(key))}</th>{cell}</tr>")
        self._blocks.append(
            f'<section class="kv"><h2>{html.escape(caption)}</h2>'
            f"<table>{''.join(body)}</table></section>"
        )

    def table(
        self,
        caption: str,
        columns: Sequence[str],
        rows: Iterable[Sequence[Any]],
        how_to_read: str = "",
    ) -> None:
        head = "".join(f"<th>{html.escape(str(c))}</th>" for c in columns)
        body = "".join("<tr>" + "".join(_cell(v) for v in row) + "</tr>" for row in rows)
        how = f'<p class="how">{html.escape(how_to_read)}</p>' if how_to_read else ""
        self._blocks.append(
            f"<section><h2>{html.escape(caption)}</h2>{how}"
            f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></section>"
        )

    def _figure(self, name: str, fig: go.Figure) -> str:
        fig_id = f"fig-{self._figures}"
        self._figures += 1
        # "<" never appears raw in the payload, so it cannot close the script tag whichever JSON
        # engine plotly picked (its encoders escape it; this holds for any JSON text).
        payload = fig.to_json().replace("<", "\\u003c")
        height = int(fig.layout.height or 420)
        return (
            f'<div class="chart" data-chart="{html.escape(name)}" data-figure="{fig_id}" '
            f'style="height:{height}px"></div>'
            f'<script type="application/json" id="{fig_id}">{payload}</script>'
        )

    def chart(self, name: str, title: str, how_to_read: str, fig: go.Figure) -> None:
        """A chart with its title and a one-line reading guide. ``name`` is a stable identifier
        (``[a-z_]+``) the browser check looks for."""
        self._blocks.append(
            f"<section><h2>{html.escape(title)}</h2>"
            f'<p class="how">{html.escape(how_to_read)}</p>'
            f"{self._figure(name, fig)}</section>"
        )

    def chart_grid(
        self, title: str, how_to_read: str, cells: Sequence[tuple[str, str, go.Figure | str]]
    ) -> None:
        """Charts two to a row, each with its own heading and legend. A cell is (name, heading,
        figure), or (name, heading, note text) for a panel that has nothing to draw."""
        parts = []
        for name, heading, content in cells:
            body = (
                f'<p class="note">{html.escape(content)}</p>'
                if isinstance(content, str)
                else self._figure(name, content)
            )
            parts.append(f'<div class="cell"><h3>{html.escape(heading)}</h3>{body}</div>')
        self._blocks.append(
            f"<section><h2>{html.escape(title)}</h2>"
            f'<p class="how">{html.escape(how_to_read)}</p>'
            f'<div class="grid">{"".join(parts)}</div></section>'
        )

    def note(self, title: str, text: str) -> None:
        """Stands in for a chart that cannot be drawn from the tables at hand."""
        self._blocks.append(
            f"<section><h2>{html.escape(title)}</h2>"
            f'<p class="note">{html.escape(text)}</p></section>'
        )

    def render(self) -> str:
        lede = f'<p class="lede">{html.escape(self._lede)}</p>' if self._lede else ""
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html.escape(self._title)}</title><style>{_CSS}</style>"
            f"<script>{_BOOT}</script>"
            f'<script type="text/javascript">{_plotly_js()}</script></head>'
            f"<body><main><h1>{html.escape(self._title)}</h1>{lede}"
            + "".join(self._blocks)
            + f"</main><script>{_PLOT}</script></body></html>\n"
        )


def _cell(value: Any) -> str:
    if (
        isinstance(value, dict)
        and value
        and len(value) <= 3
        and not any(isinstance(v, (dict, list, tuple)) for v in value.values())
    ):
        return f"<td>{html.escape(', '.join(f'{k}: {_fmt(v)}' for k, v in value.items()))}</td>"
    if isinstance(value, dict) and value:
        # Long settings blocks fold away; the summary line shows the first plain settings.
        plain_items = [
            f"{k}: {_fmt(v)}"
            for k, v in value.items()
            if not isinstance(v, (dict, list, tuple)) and v is not None
        ]
        head = ", ".join(plain_items[:4]) + (", ..." if len(plain_items) > 4 else "")
        return (
            f"<td><details><summary>{html.escape(head or 'settings')} ({len(value)} keys)</summary>"
            f"<pre>{html.escape(_pretty(value))}</pre></details></td>"
        )
    if isinstance(value, dict) or (isinstance(value, (list, tuple)) and len(value) > 4):
        return f"<td><pre>{html.escape(_pretty(value))}</pre></td>"
    if isinstance(value, (list, tuple)):
        return f"<td>{html.escape(', '.join(_fmt(v) for v in value))}</td>"
    css = ' class="num"' if _is_num(value) else ""
    return f"<td{css}>{html.escape(_fmt(value))}</td>"


def _pretty(value: Any, indent: int = 0) -> str:
    pad = "  " * indent
    if isinstance(value, dict):
        lines = []
        for k, v in value.items():
            if isinstance(v, (dict, list, tuple)) and v:
                lines.append(f"{pad}{k}:\n{_pretty(v, indent + 1)}")
            else:
                lines.append(f"{pad}{k}: {_fmt(v)}")
        return "\n".join(lines)
    if isinstance(value, (list, tuple)):
        return "\n".join(
            f"{pad}- {_fmt(v)}" if not isinstance(v, (dict, list, tuple)) else _pretty(v, indent)
            for v in value
        )
    return f"{pad}{_fmt(value)}"
