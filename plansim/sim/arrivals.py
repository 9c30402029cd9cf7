"""Where the replay's requests come from: when each one is *released* (becomes eligible) and
when it *enters* the cluster.

Three sources share one seam; the host builds one with ``arrival_source`` and then only calls
``start()``, ``on_terminal(rid, completed)`` and ``arrived_by(now_ms)``:

- ``OpenLoop``: every request enters at its trace arrival (first arrival at 0, gaps divided by
  ``arrival_speedup_ratio``). The host's fastest path: one clock process walks the sorted
  arrivals, nothing is tracked per request.
- ``ClosedLoop`` (a workload with a ``RequestGraph``): a request is released when all its
  dependency edges have fired and its ``not_before_ms`` has passed (both on the virtual clock:
  trace time from the graph's origin, divided by ``arrival_speedup_ratio``, as are delays). A
  ``dispatch`` edge fires when its source enters the cluster, a ``completion`` edge when it
  completes, a ``terminal`` edge when it completes or is rejected; a completion edge of a
  rejected source never fires, so its target and everything downstream is never released.
- ``ConcurrencyCap`` (``max_concurrency`` N) sits between release and entry of either source:
  at most N requests are in flight (entered, not yet completed or rejected); a released request
  waits in release order until one finishes. Release times remain the earliest start.

A request released at the instant another one finishes enters after that instant's pass ends,
exactly like an arrival at that time.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from plansim.sim.clock import Clock
from plansim.traces.graph import COMPLETION, DISPATCH, TERMINAL, RequestGraph


class ArrivalHost(Protocol):
    """What a source needs from the replay host."""

    clock: Clock

    def call_at(self, delay_ms: float, fn: Callable[[], None]) -> None:
        """Run ``fn`` ``delay_ms`` from now, after the passes ending then."""

    def enter(self, rid: int) -> None:
        """Request ``rid`` enters the cluster now (its arrival)."""

    def released(self, rid: int) -> None:
        """Request ``rid`` became eligible now."""

    def never_released(self, rid: int, waits_on: int) -> None:
        """Request ``rid`` can no longer be released: it waits (perhaps through others) on
        the completion of request ``waits_on``, which was rejected."""


def arrival_source(
    host: ArrivalHost, workload: Any, *, arrival_speedup_ratio: float, max_concurrency: int | None
) -> OpenLoop | ClosedLoop:
    """The source for ``workload``: closed-loop when it has a graph, capped when asked."""
    cap = ConcurrencyCap(host, max_concurrency) if max_concurrency is not None else None
    graph = workload.graph
    if graph is not None:
        return ClosedLoop(host, graph, arrival_speedup_ratio, cap)
    return OpenLoop(host, open_loop_arrivals(workload.arrival_ms, arrival_speedup_ratio), cap)


def open_loop_arrivals(arrival_ms: np.ndarray, speedup: float) -> np.ndarray:
    """Trace arrivals on the virtual clock: first at 0, gaps divided by ``speedup``."""
    arrivals = np.asarray(arrival_ms, dtype=np.float64)
    if arrivals.size:
        arrivals = (arrivals - arrivals.min()) / speedup
    return arrivals


def _walk(clock: Clock, times: np.ndarray, rows: np.ndarray | None, emit: Callable[[int], None]):
    """A clock process calling ``emit(row)`` at each of the sorted ``times`` (rows: the row of
    each time, or the position itself when ``None``)."""
    # Walked element by element: as lists (a numpy scalar costs more to index and compare).
    times = times.tolist()
    rows = None if rows is None else rows.tolist()
    n = len(times)
    i = 0
    while i < n:
        at = times[i]
        if at > clock.now:
            yield at - clock.now
        j = i
        while j < n and times[j] == at:
            emit(j if rows is None else rows[j])
            j += 1
        i = j


class ConcurrencyCap:
    """At most ``limit`` requests in flight; released requests queue in release order."""

    def __init__(self, host: ArrivalHost, limit: int) -> None:
        self.host = host
        self.limit = int(limit)
        self.in_flight = 0
        self.queue: deque[int] = deque()

    def release(self, rid: int) -> None:
        if self.in_flight < self.limit:
            self.in_flight += 1
            self.host.enter(rid)
        else:
            self.queue.append(rid)

    def finished(self) -> None:
        """A request in flight completed or was rejected: the next one in line enters."""
        self.in_flight -= 1
        if self.queue:
            rid = self.queue.popleft()
            self.in_flight += 1  # its slot is taken now; it enters after this instant's passes
            self.host.call_at(0.0, lambda: self.host.enter(rid))


class OpenLoop:
    """Requests enter at their trace arrivals (``arrival_ms``: virtual ms, sorted)."""

    def __init__(
        self, host: ArrivalHost, arrival_ms: np.ndarray, cap: ConcurrencyCap | None = None
    ) -> None:
        self.host = host
        self.arrival_ms = arrival_ms
        self.cap = cap
        self._entered = 0

    @property
    def last_release_ms(self) -> float:
        return float(self.arrival_ms[-1]) if self.arrival_ms.size else 0.0

    def span_ms(self, workload: Any) -> float:
        """Virtual span of the arrivals (the replay's span if service took no time)."""
        return self.last_release_ms

    def start(self) -> None:
        if self.arrival_ms.size:
            emit = self.host.enter if self.cap is None else self._release
            self.host.clock.process(_walk(self.host.clock, self.arrival_ms, None, emit))

    def _release(self, rid: int) -> None:
        self.host.released(rid)
        self.cap.release(rid)

    def on_enter(self, rid: int) -> None:
        self._entered += 1

    def on_terminal(self, rid: int, completed: bool) -> None:
        if self.cap is not None:
            self.cap.finished()

    def arrived_by(self, now_ms: float) -> int:
        """Requests that entered the cluster at or before ``now_ms``."""
        if self.cap is not None:
            return self._entered
        return int(np.searchsorted(self.arrival_ms, now_ms, side="right"))


class ClosedLoop:
    """Requests released by their dependencies (see the module docstring)."""

    def __init__(
        self,
        host: ArrivalHost,
        graph: RequestGraph,
        speedup: float,
        cap: ConcurrencyCap | None = None,
    ) -> None:
        self.host = host
        self.cap = cap
        n = len(graph)
        self._origin_ms, self._speedup = graph.origin_ms, speedup
        bound = (graph.not_before_ms - graph.origin_ms) / speedup
        bound = np.where(np.isnan(bound), -np.inf, bound)
        waiting = np.diff(graph.dep_offsets).astype(np.int64)
        roots = np.flatnonzero(waiting == 0)
        self._roots = roots[np.argsort(bound[roots], kind="stable")]
        self._root_ms = np.maximum(bound[self._roots], 0.0)
        finite = bound[np.isfinite(bound)]
        self._last_bound_ms = float(finite.max()) if finite.size else 0.0
        # Read and written a few times per request as the replay runs: Python lists (a numpy
        # scalar costs more to index, and more again to compute with); the same values.
        out_offsets, by_source = graph.out_edges()
        self.bound: list[float] = bound.tolist()
        self.waiting: list[int] = waiting.tolist()
        self.out_offsets: list[int] = out_offsets.tolist()
        self.out_target: list[int] = graph.targets()[by_source].tolist()
        self.out_delay_ms: list[float] = (graph.dep_delay_ms[by_source] / speedup).tolist()
        self.out_trigger: list[int] = graph.dep_trigger[by_source].tolist()
        self.blocked = [False] * n
        self._entered = 0

    @property
    def last_release_ms(self) -> float:
        """Latest release bound known up front (the last first turn): for progress only."""
        return self._last_bound_ms

    def span_ms(self, workload: Any) -> float:
        """Virtual span of the open-loop estimate (the replay's span if service took no
        time): the workload's arrivals hold it for closed-loop rows."""
        speedup = self._speedup
        return (float(np.max(workload.arrival_ms)) - self._origin_ms) / speedup

    def start(self) -> None:
        if self._roots.size:
            self.host.clock.process(
                _walk(self.host.clock, self._root_ms, self._roots, self._release)
            )

    def _release(self, rid: int) -> None:
        self.host.released(rid)
        if self.cap is None:
            self.host.enter(rid)
        else:
            self.cap.release(rid)

    def on_enter(self, rid: int) -> None:
        self._entered += 1
        now = self.host.clock.now
        triggers = self.out_trigger
        for e in range(self.out_offsets[rid], self.out_offsets[rid + 1]):
            if triggers[e] == DISPATCH:
                self._fire(self.out_target[e], now + self.out_delay_ms[e], now)

    def on_terminal(self, rid: int, completed: bool) -> None:
        if self.cap is not None:
            self.cap.finished()
        now = self.host.clock.now
        for e in range(self.out_offsets[rid], self.out_offsets[rid + 1]):
            trigger = self.out_trigger[e]
            target = self.out_target[e]
            if trigger == TERMINAL or (trigger == COMPLETION and completed):
                self._fire(target, now + self.out_delay_ms[e], now)
            elif trigger == COMPLETION:
                self._block(target, rid)

    def arrived_by(self, now_ms: float) -> int:
        return self._entered

    def _fire(self, target: int, at_ms: float, now_ms: float) -> None:
        bound = self.bound
        if at_ms > bound[target]:
            bound[target] = at_ms
        self.waiting[target] -= 1
        if self.waiting[target] == 0 and not self.blocked[target]:
            at = max(bound[target], now_ms)
            self.host.call_at(at - now_ms, lambda: self._release(target))

    def _block(self, target: int, rejected: int) -> None:
        """``target`` and everything downstream of it can never be released."""
        stack = [target]
        while stack:
            rid = stack.pop()
            if self.blocked[rid]:
                continue
            self.blocked[rid] = True
            self.host.never_released(rid, rejected)
            stack.extend(self.out_target[self.out_offsets[rid] : self.out_offsets[rid + 1]])
