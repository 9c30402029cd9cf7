"""Driving a planner from the replay's virtual clock.

The host calls ``planner.initial_tick(0.0)``, then ``planner.tick(TickInput)`` at each
``effects.next_tick.at_s`` (virtual seconds; the simulator runs in ms). A tick sees:

- ``traffic``: requests offered (arrived) since the last traffic read and averages over the
  requests completed in it (ISL, OSL, TTFT, ITL, KV hit rate), windows merged across ticks with
  count-weighted means until a tick that ``need_traffic_metrics`` reads them;
- ``fpm``: per role, each ready worker rank's per-pass means over the passes it completed since
  the previous FPM read (when ``need_worker_fpm``; the read resets the rank's pass window);
- ``worker_counts``: ready, starting and draining workers per role (agg reports as decode).

The planner host sees the replay only through a ``ClusterView`` (and the completions the host
reports). Effects: ``scale_to`` targets are applied through the view (new workers ready after
the engine's ``startup_time``, removed ones drain newest first; a pool keeps at least one worker
so queued requests can finish; a scaling event notes ``granted_count`` when the replay's worker
supply refused some) unless the planner is advisory, in which case they are only recorded;
``router_parameters`` (per worker type ``prefill``/``decode``;
agg uses ``decode``) are applied where they differ; ``retune_decisions``' ``planner_changes`` go to
``planner.apply_planner_changes`` when it exists. Ticking stops when the planner returns no next
tick or the replay has nothing left to do. Ticks run at ``Priority.NORMAL`` (``plansim.sim.clock``:
in scheduling order with the arrivals and pass starts of their instant).
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import numpy as np

from plansim.limits import MAX_BUCKETS, check_count
from plansim.planner_core.observations import (
    CompletedRequests,
    PlannerEffects,
    TickInput,
    TrafficObservation,
)
from plansim.sim.clock import Priority
from plansim.sim.cluster_view import ClusterView
from plansim.sim.recorder import Completion
from plansim.traces.stats import reusable_prefix_tokens

if TYPE_CHECKING:
    import pandas as pd


class TrafficWindow:
    """Traffic since the last read: offered requests, sums over completions, and each completed
    request's (isl, output tokens, cached tokens, reusable tokens, TTFT ms, mean gap ms) row."""

    __slots__ = (
        "completed",
        "hit",
        "isl",
        "itl",
        "n_hit",
        "n_itl",
        "n_shape",
        "n_ttft",
        "num_req",
        "osl",
        "start_s",
        "ttft",
    )

    def __init__(self, start_s: float) -> None:
        self.start_s = start_s
        self.num_req = 0
        self.n_shape = self.n_ttft = self.n_itl = self.n_hit = 0
        self.isl = self.osl = self.ttft = self.itl = self.hit = 0.0
        self.completed: list[tuple[float, float, float, float, float, float]] = []

    def observation(self, now_s: float) -> TrafficObservation:
        def avg(total: float, n: int) -> float | None:
            return total / n if n else None

        rows = np.asarray(self.completed, dtype=np.float64).reshape(-1, 6)
        requests = CompletedRequests(
            isl_tokens=rows[:, 0].astype(np.int64),
            osl_tokens=rows[:, 1].astype(np.int64),
            cached_tokens=rows[:, 2].astype(np.int64),
            reusable_tokens=rows[:, 3].astype(np.int64),
            ttft_ms=rows[:, 4],
            itl_ms=rows[:, 5],
        )
        return TrafficObservation(
            duration_s=max(now_s - self.start_s, 0.0),
            num_req=float(self.num_req),
            isl=avg(self.isl, self.n_shape),
            osl=avg(self.osl, self.n_shape),
            ttft_ms=avg(self.ttft, self.n_ttft),
            itl_ms=avg(self.itl, self.n_itl),
            kv_hit_rate=avg(self.hit, self.n_hit),
            accept_length=None,
            requests=requests,
        )


class PlannerHost:
    """Ticks ``planner`` over ``cluster`` for a replay of ``workload`` whose last request is
    released at ``last_release_ms``; see the module docstring."""

    def __init__(
        self, cluster: ClusterView, planner: Any, workload: Any, last_release_ms: float
    ) -> None:
        self.cluster = cluster
        self.planner = planner
        self.advisory = bool(getattr(planner, "advisory", False))
        self.last_release_ms = last_release_ms
        self.window = TrafficWindow(0.0)
        self.rows: list[dict[str, Any]] = []
        self.scaling_events: list[dict[str, Any]] = []
        self._arrived_seen = 0
        interval_s = getattr(getattr(planner, "config", None), "scale_interval_s", None)
        if interval_s:
            check_count(
                last_release_ms / 1000.0 / interval_s,
                MAX_BUCKETS,
                what=f"the planner's ticks over the replay (one per {interval_s:g} s)",
                field="scheduling.scale_interval_seconds",
                hint="raise the planner's intervals",
            )
        self._reusable = reusable_prefix_tokens(workload)

    # ---------------------------------------------------------------- clock

    def start(self) -> None:
        effects = self.planner.initial_tick(0.0)
        self._apply(0.0, effects)

    def _schedule(self, effects: PlannerEffects) -> None:
        nxt = effects.next_tick
        if nxt is None:
            return
        clock = self.cluster.clock
        delay = max(nxt.at_s * 1000.0 - clock.now, 0.0)
        clock.call_at(delay, lambda: self._tick(nxt), Priority.NORMAL)

    def _tick(self, scheduled: Any) -> None:
        if self.cluster.done():
            return
        now_s = scheduled.at_s
        self._absorb_arrivals()
        traffic = None
        if scheduled.need_traffic_metrics:
            traffic = self.window.observation(now_s)
            self.window = TrafficWindow(now_s)
        fpm = self.cluster.take_fpms() if scheduled.need_worker_fpm else {}
        tick_input = TickInput(
            now_s=now_s, worker_counts=self.cluster.worker_counts(), traffic=traffic, fpm=fpm
        )
        effects = self.planner.tick(tick_input)
        self._apply(now_s, effects)

    # ---------------------------------------------------------------- observations

    def _absorb_arrivals(self) -> None:
        seen = self.cluster.arrived_by(self.cluster.clock.now)
        self.window.num_req += seen - self._arrived_seen
        self._arrived_seen = seen

    def on_complete(self, done: Completion) -> None:
        """A request completed: it joins the traffic window's averages and rows."""
        w = self.window
        isl = float(done.isl_tokens)
        k = done.output_tokens
        w.n_shape += 1
        w.isl += isl
        w.osl += float(k)
        ttft = done.ttft_ms
        if not math.isnan(ttft):  # NaN: the request completed without a first token
            w.n_ttft += 1
            w.ttft += ttft
        itl = done.itl_ms
        if k > 1:
            w.n_itl += 1
            w.itl += itl
        if isl > 0:
            w.n_hit += 1
            w.hit += done.cached_tokens / isl
        w.completed.append(
            (isl, float(k), float(done.cached_tokens), float(self._reusable[done.rid]), ttft, itl)
        )

    # ---------------------------------------------------------------- effects

    def _apply(self, now_s: float, effects: PlannerEffects) -> None:
        row: dict[str, Any] = {"at_s": now_s}
        row.update(_flatten(effects.diagnostics or {}))
        # The router parameters in force before this tick's update (retune patches them).
        for pool, params in self.cluster.router_parameters().items():
            row.update(_flatten(params, f"router.{pool}."))
        self.rows.append(row)
        if effects.scale_to is not None:
            for component, target in self.cluster.targets(effects.scale_to).items():
                if target is None:
                    continue
                target = max(int(target), 1)  # a pool keeps one worker
                before = self.cluster.serving(component)
                if target == before:
                    continue
                granted = target if self.advisory else self.cluster.scale(component, target)
                event = {
                    "at_s": now_s,
                    "component": component.value,
                    "from_count": before,
                    "to_count": int(target),
                    "reason": "scale_up" if target > before else "scale_down",
                    "applied": not self.advisory,
                }
                if granted != target:
                    event["granted_count"] = int(granted)  # the worker supply refused some
                self.scaling_events.append(event)
        for worker_type, params in (effects.router_parameters or {}).items():
            self.cluster.set_router_parameters(worker_type, params)
        apply_changes = getattr(self.planner, "apply_planner_changes", None)
        if apply_changes is not None:
            for decision in effects.retune_decisions or ():
                changes = decision.get("planner_changes") if isinstance(decision, dict) else None
                if changes:
                    # A swapped load predictor is warmed from the decision's observations.
                    apply_changes(changes, decision.get("predictor_warmup"))
        self._schedule(effects)

    def ticks_table(self) -> pd.DataFrame:
        import pandas as pd

        return pd.DataFrame(self.rows)


def _flatten(d: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in d.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flatten(value, f"{name}."))
        elif isinstance(value, (list, tuple)):
            out[name] = str(value)
        elif isinstance(value, float) and math.isnan(value):
            out[name] = None
        else:
            out[name] = value
    return out
