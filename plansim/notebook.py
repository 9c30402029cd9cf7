"""A replay in one call, for notebooks: ``plansim.replay(trace, config)``.

``replay`` loads the traces, the deployment (a file, a mapping, or the defaults) with dotted-key
overrides and an optional planner config, replays it as ``plansim replay run`` does and returns
a ``Replay``: its ``summary`` (the keys of ``summary.json``), its tables as DataFrames
(``requests``, ``timeseries``, ``workers``, ``sessions`` and, with a planner, ``ticks``), its
``scaling_events``; in Jupyter it shows itself as the report's headline cards
(``_repr_html_``), and ``report(folder)`` writes the output folder ``plansim replay run``
writes, reports included.

    import plansim
    run = plansim.replay("trace.jsonl.gz", "deploy.yaml", overrides={"num_workers": 8})
    run                       # the headline cards
    run.requests.describe()
    run.report("out/run8")    # summary.json, the tables, report.html
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from plansim import api
from plansim.commands.output import OutputFolder, replay_inputs, write_replay_outputs
from plansim.sim.deployment import build_deployment, load_deployment, with_overrides
from plansim.sim.summary import without_host_keys


@dataclass(frozen=True, slots=True)
class Replay:
    """A finished replay (see the module docstring); ``result`` is the ``ReplayResult``."""

    result: Any
    deployment: Any
    inputs: dict[str, Any]

    @property
    def summary(self) -> dict[str, Any]:
        """The replay's figures, with the keys of ``summary.json`` (no wall-clock figures)."""
        return without_host_keys(self.result.summary)

    @property
    def requests(self) -> pd.DataFrame:
        return self.result.requests

    @property
    def timeseries(self) -> pd.DataFrame:
        return self.result.timeseries

    @property
    def workers(self) -> pd.DataFrame:
        return self.result.workers

    @property
    def sessions(self) -> pd.DataFrame | None:
        return self.result.sessions if "sessions" in self.result.tables else None

    @property
    def ticks(self) -> pd.DataFrame | None:
        """One row per planner tick; None without a planner."""
        return self.result.ticks

    @property
    def scaling_events(self) -> list[dict[str, Any]]:
        return list(self.result.scaling_events)

    def _repr_html_(self) -> str:
        from plansim.reports.headline import replay_cards, scaling_cards
        from plansim.reports.page import cards_fragment
        from plansim.schema import sla_text

        sla = self.deployment.sla.model_dump(exclude_none=True)
        cards = replay_cards(self.summary, sla, self.timeseries)
        if self.ticks is not None:
            cards += scaling_cards(self.scaling_events)
        scored = sla_text(sla)
        return cards_fragment(cards, f"Goodput scored against {scored}." if scored else "")

    def __repr__(self) -> str:
        s = self.summary
        good = s.get("goodput_completed_requests")
        share = (
            f"{good / s['num_requests']:.1%}"
            if good is not None and s["num_requests"]
            else "not scored"
        )
        return (
            f"<plansim Replay: {s['num_requests']} requests, goodput {share}, "
            f"{s['gpu_hours']:.4f} GPU-hours>"
        )

    def report(
        self, folder: str | Path, *, force: bool = False, self_contained: bool = False
    ) -> Path:
        """Write the output folder of this replay (``summary.json``, ``inputs.json``, the
        tables, ``report.html`` and, with a planner, ``planner_report.html``), as ``plansim
        replay run --out folder`` does: a folder holding another run is refused unless
        ``force``. Returns the path of ``report.html``."""
        from plansim.reports import render_dir
        from plansim.schema import REPLAY_REPORT

        claimed = OutputFolder.claim(
            Path(folder), "replay", "plansim.replay", force=force, option="folder"
        )
        with claimed.writing() as out_dir:
            write_replay_outputs(out_dir, self.result, self.inputs)
            render_dir(out_dir, self_contained=self_contained)
        return out_dir / REPLAY_REPORT


def replay(
    trace: str | Path | Sequence[str | Path],
    config: str | Path | Mapping[str, Any] | None = None,
    *,
    planner: str | Path | Mapping[str, Any] | None = None,
    overrides: Mapping[str, Any] | None = None,
    trace_format: str = "auto",
    trace_block_size: int | None = None,
) -> Replay:
    """Replay ``trace`` (files, folders or globs, as ``plansim replay run`` takes them) against
    ``config`` (a deployment file, a deployment mapping, or None for the defaults), with the
    dotted-key ``overrides`` on top (``{"num_workers": 8, "router.mode": "kv_router"}``) and the
    ``planner`` config (a file or a mapping; default: the deployment's ``planner:`` block).
    Mistakes raise ``plansim.errors.InputError`` naming the file and key."""
    from plansim.traces import load_workload

    overrides = dict(overrides or {})
    if isinstance(config, Mapping):
        deployment = build_deployment(dict(config))
        if overrides:
            deployment = with_overrides(deployment, overrides)
    else:
        deployment = load_deployment(config, overrides)
    planner_raw: Mapping[str, Any] | None = deployment.planner
    source = str(config) if config is not None and not isinstance(config, Mapping) else ""
    if isinstance(planner, (str, Path)):
        from plansim.planner_io import read_planner_mapping

        planner_raw, source = read_planner_mapping(planner), str(planner)
    elif planner is not None:
        planner_raw = planner
    setup = api.setup(deployment, planner_raw, source=source)
    paths = [trace] if isinstance(trace, (str, Path)) else list(trace)
    workload = load_workload(paths, format=trace_format, trace_block_size=trace_block_size)
    result = api.replay(workload, setup, trace_paths=[str(p) for p in paths])
    inputs = replay_inputs(
        "plansim.replay",
        None,
        paths,
        workload,
        deployment,
        planner_raw,
        trace_format,
        trace_block_size,
    )
    return Replay(result, deployment, {**inputs, **result.inputs})
