"""Arrival sources on a fake cluster where every request takes a fixed time: release on
dependencies, triggers, rejection, the concurrency cap, speedup of delays."""

from __future__ import annotations

import numpy as np

from plansim.sim.arrivals import arrival_source
from plansim.sim.clock import Clock
from plansim.traces.graph import COMPLETION, DISPATCH, TERMINAL, Edges, build_graph
from plansim.traces.workload import Workload

NAN = float("nan")


class FakeCluster:
    """Each request finishes ``service_ms`` after it enters; ``reject`` ones are rejected."""

    def __init__(self, service_ms: float = 10.0, reject=()):
        self.clock = Clock()
        self.service_ms = service_ms
        self.reject = set(reject)
        self.entered: dict[int, float] = {}
        self.release: dict[int, float] = {}
        self.blocked: dict[int, int] = {}
        self.source = None

    def call_at(self, delay_ms, fn):
        self.clock.call_at(delay_ms, fn)

    def enter(self, rid):
        self.entered[rid] = self.clock.now
        self.source.on_enter(rid)
        self.call_at(
            0.0 if rid in self.reject else self.service_ms,
            lambda: self.source.on_terminal(rid, rid not in self.reject),
        )

    def released(self, rid):
        self.release[rid] = self.clock.now

    def never_released(self, rid, waits_on):
        self.blocked[rid] = waits_on

    def run(self, workload, speedup=1.0, cap=None):
        self.source = arrival_source(
            self, workload, arrival_speedup_ratio=speedup, max_concurrency=cap
        )
        self.source.start()
        self.clock.run()
        return self


def _workload(arrivals, edges=(), not_before=None):
    n = len(arrivals)
    w = Workload(
        arrival_ms=np.array(arrivals, dtype=float),
        isl_tokens=np.ones(n, np.int64),
        osl_tokens=np.ones(n, np.int64),
        request_id=np.array([f"r{i}" for i in range(n)]),
        hash_offsets=np.zeros(n + 1, np.int64),
        hash_ids=np.zeros(0, np.int64),
        trace_block_size=512,
    )
    if not edges and not_before is None:
        return w
    t, s, d, k = (np.array(x) for x in zip(*edges, strict=True))
    graph = build_graph(
        n,
        np.array(not_before if not_before is not None else arrivals, float),
        Edges(t, s, d.astype(float), k.astype(np.int8)),
        np.full(n, -1),
        np.zeros(0, dtype=object),
        request_id=w.request_id,
        locate=lambda r: ("t", r + 1),
    )
    return Workload(
        **{f: getattr(w, f) for f in w.__dataclass_fields__ if f != "graph"}, graph=graph
    )


def test_open_loop_enters_at_the_trace_arrivals_from_zero():
    c = FakeCluster().run(_workload([100, 100, 350]), speedup=2.0)
    assert c.entered == {0: 0.0, 1: 0.0, 2: 125.0}


def test_a_turn_follows_the_previous_ones_end_plus_delay():
    # r1 waits for r0 (enters 0, ends 10) + 25; r2 for r1 (ends 45) + 0.
    w = _workload(
        [0, NAN, NAN], [(1, 0, 25, TERMINAL), (2, 1, 0, TERMINAL)], not_before=[0, NAN, NAN]
    )
    c = FakeCluster().run(w)
    assert c.entered == {0: 0.0, 1: 35.0, 2: 45.0}
    assert c.release == c.entered


def test_delays_and_release_bounds_are_divided_by_the_speedup():
    w = _workload([40, NAN, 100], [(1, 0, 50, TERMINAL)], not_before=[40, NAN, 100])
    c = FakeCluster().run(w, speedup=2.0)
    # Origin 40: r0 at 0, ends 10; r1 at 10 + 25; r2 at (100 - 40) / 2.
    assert c.entered == {0: 0.0, 1: 35.0, 2: 30.0}


def test_dispatch_fires_on_entry_and_a_join_waits_for_both():
    # r1 spawns 5 after r0 enters; r2 joins r0 (+20) and r1 (+1): max(10 + 20, 15 + 1).
    w = _workload(
        [0, NAN, NAN],
        [(1, 0, 5, DISPATCH), (2, 0, 20, COMPLETION), (2, 1, 1, COMPLETION)],
        not_before=[0, NAN, NAN],
    )
    assert FakeCluster().run(w).entered == {0: 0.0, 1: 5.0, 2: 30.0}


def test_not_before_holds_a_request_whose_dependencies_fired_early():
    w = _workload([0, 300], [(1, 0, 1, COMPLETION)], not_before=[0, 300])
    assert FakeCluster().run(w).entered == {0: 0.0, 1: 300.0}


def test_a_rejected_source_releases_a_terminal_edge_but_blocks_a_completion_edge():
    w = _workload(
        [0, NAN, NAN, NAN],
        [(1, 0, 5, TERMINAL), (2, 0, 5, COMPLETION), (3, 2, 0, DISPATCH)],
        not_before=[0, NAN, NAN, NAN],
    )
    c = FakeCluster(reject={0}).run(w)
    assert c.entered == {0: 0.0, 1: 5.0}
    assert c.blocked == {2: 0, 3: 0}


def test_cap_of_one_serialises_with_trace_times_as_earliest_start():
    c = FakeCluster().run(_workload([0, 2, 50, 51]), cap=1)
    assert c.entered == {0: 0.0, 1: 10.0, 2: 50.0, 3: 60.0}
    assert c.release == {0: 0.0, 1: 2.0, 2: 50.0, 3: 51.0}


def test_cap_counts_requests_in_flight():
    c = FakeCluster().run(_workload([0, 0, 0, 0, 0]), cap=2)
    assert sorted(c.entered.values()) == [0.0, 0.0, 10.0, 10.0, 20.0]
