"""``RequestGraph``: the closed-loop structure of a workload, in columns.

A request of a closed-loop trace is *released* (becomes eligible to be sent) when every one of
its dependencies has fired, and not before its ``not_before_ms``:

- ``not_before_ms`` (float64, per request, trace time ms): the earliest release; NaN for a
  request released by its dependencies alone (a later turn that carries only a ``delay``).
- dependency edges in CSR form over the *target* request: request i waits for the edges
  ``dep_offsets[i]:dep_offsets[i + 1]``; edge e names its source request ``dep_source[e]`` (a
  row of the same workload), a ``dep_delay_ms[e] >= 0`` (trace ms after the source's event)
  and a ``dep_trigger[e]``:

  - ``DISPATCH``: fires when the source is dispatched (sent to the cluster);
  - ``COMPLETION``: fires when the source completes (its last token); a rejected source never
    fires it, so the target and everything that waits on it is never released;
  - ``TERMINAL``: fires when the source completes or is rejected (a Mooncake session's next
    turn follows its previous turn whatever became of it, as in the reference replay).

- sessions: ``session`` (int64, per request: ordinal into ``session_ids``, -1 for a request of
  no session), ``session_ids`` (str, one per session, in order of first appearance) and
  ``turn_index`` (int64: position of the request in its session, -1 outside one).

The replay normalises trace time to the ``origin_ms`` (the smallest ``not_before_ms``) and
divides both ``not_before_ms`` and delays by ``arrival_speedup_ratio``.

``build_graph`` validates what a reader collected (file-order rows) and returns the graph;
``RequestGraph.reordered`` follows the workload's sort by arrival. ``estimated_arrival_ms`` is
each request's arrival if every request took no time at all: the open-loop arrival used to sort
the workload, for rates and buckets, and for an ``--open-loop`` replay.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from plansim.errors import TraceError
from plansim.traces.csr import csr_take

DISPATCH, COMPLETION, TERMINAL = 0, 1, 2
TRIGGER_NAMES = {DISPATCH: "dispatch", COMPLETION: "completion", TERMINAL: "terminal"}


@dataclass(frozen=True, slots=True)
class RequestGraph:
    not_before_ms: np.ndarray
    dep_offsets: np.ndarray
    dep_source: np.ndarray
    dep_delay_ms: np.ndarray
    dep_trigger: np.ndarray
    session: np.ndarray
    session_ids: np.ndarray
    turn_index: np.ndarray

    def __len__(self) -> int:
        return int(self.not_before_ms.shape[0])

    @property
    def num_edges(self) -> int:
        return int(self.dep_source.shape[0])

    @property
    def num_sessions(self) -> int:
        return int(self.session_ids.shape[0])

    def targets(self) -> np.ndarray:
        """The target row of each edge (int64, in edge order)."""
        return np.repeat(np.arange(len(self), dtype=np.int64), np.diff(self.dep_offsets))

    def out_edges(self) -> tuple[np.ndarray, np.ndarray]:
        """Edges grouped by source: ``(offsets, edges)``, the edges of source row i being
        ``edges[offsets[i]:offsets[i + 1]]`` (indices into the edge arrays)."""
        edges = np.argsort(self.dep_source, kind="stable")
        offsets = np.zeros(len(self) + 1, dtype=np.int64)
        np.cumsum(np.bincount(self.dep_source, minlength=len(self)), out=offsets[1:])
        return offsets, edges

    @property
    def origin_ms(self) -> float:
        """Trace time that the replay's virtual clock starts at (the earliest release bound)."""
        return float(np.nanmin(self.not_before_ms))

    def reordered(self, order: np.ndarray) -> RequestGraph:
        """The graph of the workload rows ``order`` (a permutation of all rows)."""
        inverse = np.empty_like(order)
        inverse[order] = np.arange(order.size, dtype=order.dtype)
        offsets, edges = csr_take(self.dep_offsets, order)
        return RequestGraph(
            not_before_ms=self.not_before_ms[order],
            dep_offsets=offsets,
            dep_source=inverse[self.dep_source[edges]],
            dep_delay_ms=self.dep_delay_ms[edges],
            dep_trigger=self.dep_trigger[edges],
            session=self.session[order],
            session_ids=self.session_ids,
            turn_index=self.turn_index[order],
        )


@dataclass(frozen=True, slots=True)
class Edges:
    """Dependency edges as a reader found them: parallel arrays, any order."""

    target: np.ndarray  # int64 row
    source: np.ndarray  # int64 row
    delay_ms: np.ndarray  # float64
    trigger: np.ndarray  # int8

    @staticmethod
    def empty() -> Edges:
        z = np.zeros(0, dtype=np.int64)
        return Edges(z, z, np.zeros(0, dtype=np.float64), np.zeros(0, dtype=np.int8))

    @staticmethod
    def concat(parts: list[Edges]) -> Edges:
        if not parts:
            return Edges.empty()
        return Edges(
            *(
                np.concatenate([getattr(p, f) for p in parts])
                for f in ("target", "source", "delay_ms", "trigger")
            )
        )


def build_graph(
    n: int,
    not_before_ms: np.ndarray,
    edges: Edges,
    session: np.ndarray,
    session_ids: np.ndarray,
    *,
    request_id: np.ndarray,
    locate: Callable[[int], tuple[str, int]],
) -> RequestGraph:
    """Validate and assemble a graph over ``n`` rows (file order).

    Edges must have finite, non-negative delays (readers check them with the line at hand).
    Raises ``TraceError`` at the line of the first request that can never be released: a
    request in a dependency cycle or waiting on one. ``locate(row)`` gives (file, line).
    """
    target = edges.target.astype(np.int64, copy=False)
    order = np.argsort(target, kind="stable")
    counts = np.bincount(target, minlength=n).astype(np.int64)
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    session = session.astype(np.int64, copy=False)
    graph = RequestGraph(
        not_before_ms=not_before_ms.astype(np.float64, copy=False),
        dep_offsets=offsets,
        dep_source=edges.source[order].astype(np.int64, copy=False),
        dep_delay_ms=edges.delay_ms[order].astype(np.float64, copy=False),
        dep_trigger=edges.trigger[order].astype(np.int8, copy=False),
        session=session,
        session_ids=session_ids,
        turn_index=_turn_index(session),
    )
    stuck = unreleasable(graph)
    if stuck.size:
        raise _cycle_error(graph, stuck, request_id, locate)
    return graph


def _turn_index(session: np.ndarray) -> np.ndarray:
    """Position of each row among its session's rows (row order); -1 outside a session."""
    turn = np.full(session.shape, -1, dtype=np.int64)
    inside = np.flatnonzero(session >= 0)
    if inside.size:
        s = session[inside]
        order = np.argsort(s, kind="stable")
        sorted_s = s[order]
        starts = np.flatnonzero(np.r_[True, sorted_s[1:] != sorted_s[:-1]])
        run = np.arange(sorted_s.size) - np.repeat(starts, np.diff(np.r_[starts, sorted_s.size]))
        turn[inside[order]] = run
    return turn


def topological_levels(graph: RequestGraph) -> list[np.ndarray]:
    """Rows grouped into levels: every dependency of a row lies in an earlier level. Rows that
    can never be released (cycles and what waits on them) are in no level."""
    remaining = np.diff(graph.dep_offsets).copy()
    out_offsets, by_source = graph.out_edges()
    out_targets = graph.targets()[by_source]
    levels = []
    frontier = np.flatnonzero(remaining == 0)
    while frontier.size:
        levels.append(frontier)
        _, edge_idx = csr_take(out_offsets, frontier)
        # return_counts also keeps np.unique from importing numpy.ma (6 ms) for its mask test.
        hit, times = np.unique(out_targets[edge_idx], return_counts=True)
        remaining[hit] -= times
        frontier = hit[remaining[hit] == 0]
    return levels


def unreleasable(graph: RequestGraph) -> np.ndarray:
    """Rows that no release order reaches (sorted)."""
    levels = topological_levels(graph)
    reached = np.zeros(len(graph), dtype=bool)
    for level in levels:
        reached[level] = True
    return np.flatnonzero(~reached)


def _cycle_error(
    graph: RequestGraph,
    stuck: np.ndarray,
    request_id: np.ndarray,
    locate: Callable[[int], tuple[str, int]],
) -> TraceError:
    """A ``TraceError`` naming one cycle among the ``stuck`` rows, at the line of its first
    member in file order."""
    stuck_set = set(stuck.tolist())
    # Every stuck row waits on a stuck row: walk back from the first until a row repeats.
    row, seen, path = int(stuck[0]), {}, []
    while row not in seen:
        seen[row] = len(path)
        path.append(row)
        lo, hi = graph.dep_offsets[row], graph.dep_offsets[row + 1]
        row = next(int(s) for s in graph.dep_source[lo:hi] if int(s) in stuck_set)
    cycle = path[seen[row] :]
    cycle.reverse()  # source -> target order
    first = min(cycle)
    k = cycle.index(first)
    cycle = cycle[k:] + cycle[:k]
    names = " -> ".join(str(request_id[r]) for r in cycle + [first])
    source, line = locate(first)
    waiting = len(stuck) - len(cycle)
    extra = f"; {waiting} more request(s) wait on it" if waiting else ""
    return TraceError(
        f"dependency cycle {names}: these requests can never be released{extra}",
        source=source,
        line=line,
        field="dependencies",
    )


def estimated_arrival_ms(graph: RequestGraph) -> np.ndarray:
    """Each request's release if every request took no time: ``not_before_ms``, or later as
    its dependencies require (source's estimate plus the delay). Trace time ms."""
    est = graph.not_before_ms.copy()
    targets = graph.targets()
    for level in topological_levels(graph)[1:]:
        _, edge_idx = csr_take(graph.dep_offsets, level)
        cand = est[graph.dep_source[edge_idx]] + graph.dep_delay_ms[edge_idx]
        bound = np.full(level.size, -np.inf)
        np.maximum.at(bound, np.searchsorted(level, targets[edge_idx]), cand)
        est[level] = np.fmax(est[level], bound)
    return est
