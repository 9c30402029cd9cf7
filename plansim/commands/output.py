"""What every command that writes an output folder shares: the default folder and the reports."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path
from typing import Any

import typer

from plansim.io import atomic_write_json, write_parquet_atomic

OUT_ROOT = Path("plansim-out")


def new_out_dir(kind: str) -> Path:
    """A folder that does not exist yet: ``plansim-out/<kind>-<local time>[-N]``."""
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    candidate = OUT_ROOT / f"{kind}-{stamp}"
    suffix = 2
    while candidate.exists():
        candidate = OUT_ROOT / f"{kind}-{stamp}-{suffix}"
        suffix += 1
    return candidate


def write_reports(out_dir: Path, *, self_contained: bool = False) -> None:
    """Render the folder's HTML reports and list them (``self_contained``: each embeds
    plotly.js instead of sharing the folder's ``plotly.min.js``)."""
    from plansim.reports import render_dir

    for path in render_dir(out_dir, self_contained=self_contained):
        if path.suffix == ".html":
            typer.echo(f"report        {path}")


def write_replay_outputs(out_dir: Path, result: Any, inputs: dict[str, Any]) -> None:
    """The tables of a ``ReplayResult``: ``inputs.json``, ``summary.json`` (without host-speed
    figures, so the same inputs and seed write byte-identical files), the request, time-series
    and worker tables, and, when a planner ran, its ticks, scaling events and retune records."""
    from plansim.sim.summary import without_host_keys

    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(out_dir / "inputs.json", inputs)
    atomic_write_json(out_dir / "summary.json", without_host_keys(result.summary))
    write_parquet_atomic(out_dir / "requests.parquet", result.requests)
    write_parquet_atomic(out_dir / "timeseries.parquet", result.timeseries)
    write_parquet_atomic(out_dir / "workers.parquet", result.workers)
    if result.ticks is not None:
        write_parquet_atomic(out_dir / "ticks.parquet", result.ticks)
        atomic_write_json(out_dir / "scaling_events.json", result.scaling_events)
    if result.retune_events is not None:
        atomic_write_json(out_dir / "retune_events.json", result.retune_events)
