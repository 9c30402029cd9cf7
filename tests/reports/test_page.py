"""Page assembly: input text shows as text, plotly.js is embedded once, nothing is fetched."""

from __future__ import annotations

import plotly.graph_objects as go
from plotly.offline import get_plotlyjs
from reports_figures import chart_names, figures

from plansim.reports.page import Card, Page, plain

XSS = "<script>alert(1)</script>"
ESCAPED = "&lt;script&gt;alert(1)&lt;/script&gt;"


def _page_with_input_text() -> str:
    page = Page(f"title {XSS}", f"lede {XSS}")
    page.key_values(
        "inputs", [("model", XSS), ("deployment", {"model": XSS}), ("files", [XSS, "b"])]
    )
    page.table("requests", ["request_id", "e2e_ms"], [[XSS, 1.5]], how_to_read=XSS)
    page.note("skipped", XSS)
    page.chart("one", "chart", "how", go.Figure(go.Scatter(x=[1, 2], y=[3, 4], name=plain(XSS))))
    page.chart("two", "chart", "how", go.Figure(go.Bar(x=[plain(XSS)], y=[1])))
    return page.render()


def test_input_text_never_becomes_markup():
    html = _page_with_input_text()
    assert XSS not in html
    assert "alert(1)</script>" not in html
    assert html.count(ESCAPED) >= 6  # title, lede, 3 table cells, how-to line, note


def test_plotly_labels_carry_escaped_text():
    fig = figures(_page_with_input_text())["one"]
    # Plotly draws "&lt;" as "<": the name shows the typed characters and is not parsed as a tag.
    assert fig["data"][0]["name"] == ESCAPED


def test_raw_text_in_a_figure_cannot_close_the_script_tag():
    page = Page("t")
    page.chart(
        "raw", "c", "h", go.Figure(layout={"title": {"text": "</script><script>alert(1)</script>"}})
    )
    html = page.render()
    assert "</script><script>alert(1)" not in html
    assert figures(html)["raw"]["layout"]["title"]["text"] == "</script><script>alert(1)</script>"


def test_plotly_js_is_embedded_once_and_nothing_is_fetched():
    html = _page_with_input_text()
    assert html.count(get_plotlyjs()[:500]) == 1
    assert "<script src" not in html and "<link" not in html


def test_chart_names_are_listed_in_order():
    assert chart_names(_page_with_input_text()) == ["one", "two"]


def test_headline_cards_come_first_with_their_names():
    page = Page("t")
    page.chart("one", "chart", "how", go.Figure(go.Scatter(x=[1], y=[1])))
    page.headline([Card("goodput", "Goodput", "57.1%", f"met {XSS}", "bad")])
    html = page.render()
    assert 'data-card="goodput"' in html and 'class="card bad"' in html
    assert ESCAPED in html and XSS not in html


def test_a_shared_plotly_js_is_loaded_by_its_relative_path():
    html = _page_with_input_text_src("../plotly.min.js")
    assert '<script src="../plotly.min.js"' in html
    assert get_plotlyjs()[:500] not in html
    # a page opened without the file says how to fix it instead of staying blank
    assert "plotly.js did not load" in html and 'id="plotly-missing"' in html


def _page_with_input_text_src(src: str) -> str:
    page = Page("t")
    page.chart("one", "chart", "how", go.Figure(go.Scatter(x=[1], y=[1])))
    return page.render(src)


def test_nested_inputs_show_units_and_list_unset_keys_once():
    page = Page("t")
    page.nested(
        "Run inputs",
        {"seed": 7, "deployment": {"sla": {"ttft_ms": 500.0, "e2e_ms": None}, "enable": True}},
    )
    html = page.render()
    assert "500 ms" in html and "<td>yes</td>" in html
    assert "not set: sla.e2e_ms" in html
    assert "None" not in html.split("<main>")[1] and "True" not in html.split("<main>")[1]
