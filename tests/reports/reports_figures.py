"""Reading a rendered report back: chart names and the figures' data, for assertions."""

from __future__ import annotations

import base64
import json
import re
from typing import Any

import numpy as np

_CHART = re.compile(r'<div class="chart" data-chart="([a-z_]+)" data-figure="(fig-\d+)"')
_DTYPES = {
    "f8": np.float64,
    "f4": np.float32,
    "i1": np.int8,
    "i2": np.int16,
    "i4": np.int32,
    "u1": np.uint8,
    "u2": np.uint16,
    "u4": np.uint32,
    "i8": np.int64,
    "u8": np.uint64,
}


def chart_names(html: str) -> list[str]:
    return [m.group(1) for m in _CHART.finditer(html)]


def figures(html: str) -> dict[str, dict[str, Any]]:
    """Chart name -> its Plotly figure (data + layout) as embedded in the page."""
    out = {}
    for name, fig_id in _CHART.findall(html):
        match = re.search(
            rf'<script type="application/json" id="{fig_id}">(.*?)</script>', html, re.S
        )
        assert match is not None, fig_id
        out[name] = json.loads(match.group(1))
    return out


def values(array: Any) -> np.ndarray | list[Any]:
    """A trace array: plain JSON list, or Plotly's typed-array form ``{dtype, bdata}``."""
    if isinstance(array, dict) and "bdata" in array:
        return np.frombuffer(base64.b64decode(array["bdata"]), dtype=_DTYPES[array["dtype"]])
    return array if array is not None else []


def trace(fig: dict[str, Any], name: str) -> dict[str, Any]:
    matches = [t for t in fig["data"] if t.get("name") == name]
    assert matches, f"no trace {name!r} in {[t.get('name') for t in fig['data']]}"
    return matches[0]
