"""One HTML report page: a headline row of cards, then charts, then details (tables, grouped
figures, the run's inputs as a nested table).

Every piece of text that reaches the page goes through ``html.escape`` (headings, cards, tables,
notes) or ``plain`` (text Plotly draws: trace names, titles, hover text), so text from input
files shows as text and never becomes markup; values go through ``format.plain_value``, so no
Python repr (``None``, ``True``, ``{'``) reaches the page.

plotly.js is loaded from ``plotly_src`` (a path relative to the page; ``assets`` writes the file
once per output folder) or, with ``plotly_src=None``, embedded in the page, which then opens
offline as a single file.

The page exposes ``window.__plansim = {expected, rendered, errors}`` so a browser check can wait
until every chart has rendered and read the JavaScript errors raised on the way.
"""

from __future__ import annotations

import html
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import plotly.graph_objects as go

from plansim.reports.format import NOT_SET, key_value, plain_value

# The headline cards' rules (``cards_fragment`` scopes them to its fragment).
_CARD_CSS = """
.cards{display:flex;flex-wrap:wrap;gap:12px;margin:12px 0 4px}
.card{box-sizing:border-box;flex:1 1 150px;max-width:300px;background:#fff;border:1px solid #e1e4ea;
border-top:4px solid #9aa3b5;border-radius:8px;padding:10px 14px}
.card.good{border-top-color:#2ca02c}.card.bad{border-top-color:#d62728}
.card .label{font-size:.78rem;color:#4a5366;font-weight:600;text-transform:uppercase;
letter-spacing:.03em}
.card .value{font-size:1.55rem;font-weight:650;margin:2px 0;font-variant-numeric:tabular-nums;
white-space:nowrap}
.card .value.long{font-size:1.1rem;white-space:normal;overflow-wrap:anywhere}
.card .detail{font-size:.8rem;color:#4a5366}
p.muted{color:#6b7385;font-size:.8rem;margin:4px 0 0}
"""
# A rule's selectors: what stands before its "{" (the rules hold no other braces).
_SELECTORS = re.compile(r"(^|\})\s*([^{}]+)\{")

_CSS = (
    """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;margin:0;
background:#f6f7f9;color:#1d2330}
main{max-width:1280px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:1.5rem;margin:8px 0 4px}
h2{font-size:1.15rem;margin:28px 0 4px}
h2.part{font-size:.85rem;text-transform:uppercase;letter-spacing:.06em;color:#5b6478;
margin:30px 0 0;font-weight:600}
section h2{margin-top:4px}
p.lede{color:#4a5366;margin:0 0 12px}
section{background:#fff;border:1px solid #e1e4ea;border-radius:8px;padding:12px 16px;
margin:14px 0}
p.how{color:#4a5366;font-size:.9rem;margin:2px 0 6px}
p.note{color:#8a5a00;background:#fff8e6;border-left:3px solid #e0a800;padding:6px 10px;
font-size:.9rem}
"""
    + _CARD_CSS
    + """
.tablewrap{max-height:520px;overflow:auto;max-width:100%}
table{border-collapse:collapse;font-size:.85rem;margin:6px 0}
th,td{border-bottom:1px solid #e6e8ee;padding:3px 10px;text-align:left;vertical-align:top;
overflow-wrap:break-word}
thead th{background:#f1f3f7;font-weight:600;position:sticky;top:0;z-index:1}
tbody th{font-weight:600;background:#f8f9fb;white-space:nowrap}
td.num,th.num{text-align:right;font-variant-numeric:tabular-nums}
td.num{white-space:nowrap}
thead th{max-width:11em}
.blocks{display:flex;flex-wrap:wrap;gap:14px;align-items:flex-start}
.blocks>section{margin:0;flex:1 1 380px;max-width:100%}
tr.sub th{padding-left:24px}tr.sub2 th{padding-left:40px}tr.sub3 th{padding-left:56px}
tr.group th{background:#eef1f6}
code{font-size:.82rem}
.chart{width:100%}
.grid{display:grid;grid-template-columns:minmax(0,1fr) minmax(0,1fr);gap:6px 22px}
h3{font-size:1rem;margin:10px 0 0;text-align:center;font-weight:600}
p.cellhow{text-align:center;font-size:.8rem;margin:0}
#plotly-missing{display:none}
"""
)

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
    "if(typeof Plotly==='undefined'){"
    "if(divs.length){document.getElementById('plotly-missing').style.display='block';"
    "window.__plansim.errors.push('plotly.js did not load');}return;}"
    "divs.forEach(function(div){"
    "var fig=JSON.parse(document.getElementById(div.dataset.figure).textContent);"
    "Plotly.newPlot(div,fig.data,fig.layout,{responsive:true,displaylogo:false})"
    ".then(function(){window.__plansim.rendered+=1;})"
    ".catch(function(e){window.__plansim.errors.push(div.dataset.chart+': '+String(e));});"
    "});})();"
)

TONES = ("neutral", "good", "bad")


@dataclass(frozen=True, slots=True)
class Card:
    """One headline figure: ``name`` (stable id ``[a-z0-9_]+``, what tests look for), ``label``
    (what it is), ``value`` (the figure with its unit), ``detail`` (one line of context: the
    bound, the SLA, the denominator) and ``tone``: ``good``/``bad`` against a stated bound,
    ``neutral`` when there is none."""

    name: str
    label: str
    value: str
    detail: str = ""
    tone: str = "neutral"

    def __post_init__(self) -> None:
        if self.tone not in TONES:
            raise ValueError(f"tone must be one of {TONES}, got {self.tone!r}")


@dataclass(frozen=True, slots=True)
class Cell:
    """One chart of a grid: ``name`` (stable id), heading, reading guide, and the figure or the
    note text shown when there is nothing to draw."""

    name: str
    title: str
    how: str
    content: go.Figure | str


def plain(text: Any) -> str:
    """Text for Plotly to draw literally: Plotly reads a subset of HTML in labels, so markup
    characters are escaped (``&`` ``<`` ``>``) and shown as typed."""
    return html.escape(str(text), quote=False)


@lru_cache(maxsize=1)
def plotly_js() -> str:
    """The plotly.js bundle that ships with the plotly package (offline, no CDN)."""
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def _is_num(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


class Page:
    """Accumulates sections in order, then renders one HTML document."""

    def __init__(self, title: str, lede: str = "") -> None:
        self._title = title
        self._lede = lede
        self._blocks: list[str] = []
        self._figures = 0

    # ------------------------------------------------------------ headline and structure

    def headline(self, cards: Sequence[Card], note: str = "") -> None:
        """The row of cards that answers what the run was for; goes first."""
        self._blocks.append(_cards_markup(cards, note))

    def part(self, title: str) -> None:
        """A divider between the parts of the page (charts, details)."""
        self._blocks.append(f'<h2 class="part">{html.escape(title)}</h2>')

    # ------------------------------------------------------------ tables

    def key_values(self, caption: str, rows: Iterable[tuple[str, Any]], how: str = "") -> None:
        """A two-column table of labels and values (values as reader text)."""
        body = "".join(f"<tr><th>{html.escape(str(k))}</th>{_cell(v)}</tr>" for k, v in rows)
        self._blocks.append(
            f'<section class="kv"><h2>{html.escape(caption)}</h2>{_how(how)}'
            f"<table><tbody>{body}</tbody></table></section>"
        )

    def grouped(
        self, caption: str, groups: Sequence[tuple[str, Sequence[tuple[str, str]]]], how: str = ""
    ) -> None:
        """Labelled values in titled groups, side by side: ``[(group title, [(label, text)])]``;
        the texts are already formatted with their units."""
        blocks = []
        for title, rows in groups:
            if not rows:
                continue
            body = "".join(
                f'<tr><th>{html.escape(label)}</th><td class="num">{html.escape(text)}</td></tr>'
                for label, text in rows
            )
            blocks.append(
                f"<section><h2>{html.escape(title)}</h2><table><tbody>{body}</tbody></table>"
                "</section>"
            )
        self._blocks.append(
            f"<section><h2>{html.escape(caption)}</h2>{_how(how)}"
            f'<div class="blocks">{"".join(blocks)}</div></section>'
        )

    def nested(self, caption: str, values: Mapping[str, Any], how: str = "") -> None:
        """A run's inputs as nested tables: top-level scalars in one block, each top-level
        mapping in its own block with its inner mappings indented below their key. Values show
        the unit their key names; keys that are not set are listed once per block."""
        scalars = {k: v for k, v in values.items() if not isinstance(v, Mapping)}
        blocks = [("run", scalars)] if scalars else []
        blocks += [(k, v) for k, v in values.items() if isinstance(v, Mapping) and v]
        parts = []
        for title, block in blocks:
            rows: list[str] = []
            unset = _nested_rows(block, 0, rows)
            tail = (
                f'<p class="muted">{NOT_SET}: {html.escape(", ".join(unset))}</p>' if unset else ""
            )
            parts.append(
                f"<section><h2><code>{html.escape(str(title))}</code></h2>"
                f"<table><tbody>{''.join(rows)}</tbody></table>{tail}</section>"
            )
        self._blocks.append(
            f"<section><h2>{html.escape(caption)}</h2>{_how(how)}"
            f'<div class="blocks">{"".join(parts)}</div></section>'
        )

    def table(
        self,
        caption: str,
        columns: Sequence[str],
        rows: Iterable[Sequence[Any]],
        how_to_read: str = "",
        numeric: Sequence[bool] | None = None,
    ) -> None:
        """A table that fits its card: long text wraps, and a long table scrolls inside the
        card with its header fixed. ``numeric`` marks the right-aligned columns (default: the
        columns of numbers), for columns of numbers already formatted as text."""
        rows = [list(r) for r in rows]
        if numeric is None:
            numeric = [
                bool(rows)
                and all(_is_num(r[i]) or r[i] in ("", None) for r in rows)
                and any(_is_num(r[i]) for r in rows)
                for i in range(len(columns))
            ]
        head = "".join(
            f"<th{' class=num' if numeric[i] else ''}>{html.escape(str(c))}</th>"
            for i, c in enumerate(columns)
        )
        body = "".join(
            "<tr>" + "".join(_cell(v, numeric[i]) for i, v in enumerate(row)) + "</tr>"
            for row in rows
        )
        self._blocks.append(
            f"<section><h2>{html.escape(caption)}</h2>{_how(how_to_read)}"
            f'<div class="tablewrap"><table><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table></div></section>"
        )

    # ------------------------------------------------------------ charts and notes

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
            f"<section><h2>{html.escape(title)}</h2>{_how(how_to_read)}"
            f"{self._figure(name, fig)}</section>"
        )

    def chart_grid(self, title: str, how_to_read: str, cells: Sequence[Cell]) -> None:
        """Charts two to a row, each with its own heading, one-line guide and legend; a cell
        whose content is text shows it as a note."""
        parts = []
        for cell in cells:
            body = (
                f'<p class="note">{html.escape(cell.content)}</p>'
                if isinstance(cell.content, str)
                else self._figure(cell.name, cell.content)
            )
            guide = f'<p class="how cellhow">{html.escape(cell.how)}</p>' if cell.how else ""
            parts.append(f'<div class="cell"><h3>{html.escape(cell.title)}</h3>{guide}{body}</div>')
        self._blocks.append(
            f"<section><h2>{html.escape(title)}</h2>{_how(how_to_read)}"
            f'<div class="grid">{"".join(parts)}</div></section>'
        )

    def note(self, title: str, text: str) -> None:
        """Stands in for a chart that cannot be drawn from the tables at hand."""
        self._blocks.append(
            f"<section><h2>{html.escape(title)}</h2>"
            f'<p class="note">{html.escape(text)}</p></section>'
        )

    def render(self, plotly_src: str | None = None) -> str:
        """The HTML document. ``plotly_src``: where the page loads plotly.js from (relative to
        the page); ``None`` embeds it, for a single self-contained file."""
        lede = f'<p class="lede">{html.escape(self._lede)}</p>' if self._lede else ""
        if plotly_src is None:
            script = f'<script type="text/javascript">{plotly_js()}</script>'
        else:
            script = f'<script src="{html.escape(plotly_src)}" charset="utf-8"></script>'
        missing = (
            '<p class="note" id="plotly-missing">The charts need '
            f"{html.escape(plotly_src or 'plotly.js')} beside this file: copy the whole output "
            "folder, or re-render it with <code>plansim report DIR</code> (add "
            "<code>--self-contained</code> for a single file).</p>"
        )
        return (
            '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{html.escape(self._title)}</title><style>{_CSS}</style>"
            f"<script>{_BOOT}</script>{script}</head>"
            f"<body><main><h1>{html.escape(self._title)}</h1>{lede}{missing}"
            + "".join(self._blocks)
            + f"</main><script>{_PLOT}</script></body></html>\n"
        )


def _cards_markup(cards: Sequence[Card], note: str = "") -> str:
    parts = []
    for card in cards:
        detail = f'<div class="detail">{html.escape(card.detail)}</div>' if card.detail else ""
        # a long value (a label, a figure with a long unit) gets a smaller font and may wrap
        size = " long" if len(card.value) > 10 else ""
        parts.append(
            f'<div class="card {card.tone}" data-card="{html.escape(card.name)}">'
            f'<div class="label">{html.escape(card.label)}</div>'
            f'<div class="value{size}">{html.escape(card.value)}</div>{detail}</div>'
        )
    extra = f'<p class="muted">{html.escape(note)}</p>' if note else ""
    return f'<div class="cards" data-headline="{len(cards)}">{"".join(parts)}</div>{extra}'


def cards_fragment(cards: Sequence[Card], note: str = "") -> str:
    """The headline cards as an HTML fragment with their own style, scoped so that it changes
    nothing else of the page it lands in (a notebook's output cell)."""
    scoped = _SELECTORS.sub(
        lambda m: (
            m.group(1) + ",".join(f".plansim {s.strip()}" for s in m.group(2).split(",")) + "{"
        ),
        _CARD_CSS.strip(),
    )
    return f'<div class="plansim"><style>{scoped}</style>{_cards_markup(cards, note)}</div>'


def _how(text: str) -> str:
    return f'<p class="how">{html.escape(text)}</p>' if text else ""


def _cell(value: Any, numeric: bool | None = None) -> str:
    if isinstance(value, Mapping) and len(value) > 4:
        rows: list[str] = []
        _nested_rows(value, 0, rows)
        return f"<td><table><tbody>{''.join(rows)}</tbody></table></td>"
    css = ' class="num"' if (_is_num(value) if numeric is None else numeric) else ""
    return f"<td{css}>{html.escape(plain_value(value))}</td>"


_MAX_LIST = 20


def _nested_rows(block: Mapping[str, Any], depth: int, rows: list[str]) -> list[str]:
    """Appends the rows of ``block`` at ``depth`` to ``rows``; returns the keys (dotted below
    the top) whose value is not set, which the caller lists once instead of row by row."""
    unset: list[str] = []
    level = "" if depth == 0 else ("sub" if depth == 1 else f"sub{min(depth, 3)}")
    css = f' class="{level}"' if level else ""
    group = f' class="{f"group {level}".strip()}"'
    for key, value in block.items():
        name = html.escape(str(key))
        if value is None:
            unset.append(str(key))
        elif isinstance(value, Mapping) and value:
            rows.append(f'<tr{group}><th colspan="2"><code>{name}</code></th></tr>')
            unset += [f"{key}.{k}" for k in _nested_rows(value, depth + 1, rows)]
        elif isinstance(value, (list, tuple)) and any(isinstance(v, Mapping) for v in value):
            for i, item in enumerate(value[:_MAX_LIST]):
                label = f"{key}[{i}]"
                if isinstance(item, Mapping):
                    rows.append(
                        f'<tr{group}><th colspan="2"><code>{html.escape(label)}</code></th></tr>'
                    )
                    _nested_rows(item, depth + 1, rows)
                else:
                    rows.append(_row(label, key, item, css))
            if len(value) > _MAX_LIST:
                rows.append(_row(str(key), key, f"... {len(value) - _MAX_LIST} more", css))
        else:
            if isinstance(value, (list, tuple)) and len(value) > _MAX_LIST:
                value = [*value[:_MAX_LIST], f"... {len(value) - _MAX_LIST} more"]
            rows.append(_row(str(key), key, value, css))
    return unset


def _row(label: str, key: Any, value: Any, css: str) -> str:
    num = ' class="num"' if _is_num(value) else ""
    return (
        f"<tr{css}><th><code>{html.escape(label)}</code></th>"
        f"<td{num}>{html.escape(key_value(str(key), value))}</td></tr>"
    )
