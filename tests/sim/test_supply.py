"""A worker supply (``plansim.sim.supply``): refused workers, spot preemption (the ranks stop
after the pass in flight, their requests migrate with the tokens they emitted, a replacement
pays the start-up time) and several replays on one clock.

The engine here times every pass at 10 ms and runs one request at a time (``max_num_seqs:
1``), so a request of 10 output tokens holds its worker for a prefill pass and nine decode
passes: 100 ms, first token 10 ms after it starts.
"""

from __future__ import annotations

import numpy as np
import pytest

from plansim.capacity.scripted import CountChange, CountSchedule
from plansim.roles import Role
from plansim.sim.deployment import build_deployment
from plansim.sim.host import SharedMember, replay, replay_shared
from plansim.sim.supply import NEVER, Lease
from plansim.traces.request_ids import ordinal_ids
from plansim.traces.workload import Workload

FIXED = {"type": "fixed", "prefill_ms": 10.0, "decode_ms": 10.0}


def workload(arrival_ms, isl: int = 100, osl: int = 10) -> Workload:
    arrival = np.asarray(arrival_ms, dtype=np.float64)
    n = arrival.size
    offsets = np.arange(n + 1, dtype=np.int64) * 2
    return Workload(
        arrival_ms=arrival,
        isl_tokens=np.full(n, isl, dtype=np.int64),
        osl_tokens=np.full(n, osl, dtype=np.int64),
        request_id=ordinal_ids(0, n),
        hash_offsets=offsets,
        hash_ids=np.arange(offsets[-1], dtype=np.int64),
        trace_block_size=64,
    )


def deployment(workers: int = 1, startup_s: float = 0.5):
    return build_deployment(
        {
            "mode": "agg",
            "num_workers": workers,
            "engine": {"max_num_seqs": 1, "timing_model": FIXED, "startup_time": startup_s},
            "router": {"mode": "round_robin"},
            "sla": {"ttft_ms": 500.0},
        }
    )


class Scripted:
    """A supply that grants up to ``limit`` workers at a time, each lease from ``leases`` in
    turn (then on demand, never preempted), and records what the host tells it."""

    def __init__(self, leases=(), limit: int = 1 << 30) -> None:
        self.leases = list(leases)
        self.limit = limit
        self.held = 0
        self.events: list[tuple] = []

    def acquire(self, pool, now_ms):
        if self.held >= self.limit:
            return None
        self.held += 1
        return self.leases.pop(0) if self.leases else Lease()

    def release(self, pool, lease, now_ms):
        self.held -= 1
        self.events.append(("release", now_ms))

    def refused(self, pool, wanted, granted, now_ms):
        self.events.append(("refused", pool, wanted, granted, now_ms))

    def preempted(self, pool, worker_id, now_ms):
        self.events.append(("preempted", worker_id, now_ms))

    def migrated(self, pool, requests, now_ms):
        self.events.append(("migrated", requests, now_ms))


def test_a_preempted_worker_stops_after_its_pass_and_its_requests_migrate():
    # One worker, requests every 50 ms: request k starts at 100 k. At 305 ms request 3 is in
    # its prefill pass (300-310); requests 4-6 wait. The worker is preempted at 305: the pass
    # ends at 310 (request 3's first token), then requests 3-6 go back to the router. The
    # replacement, provisioned at 305, is ready 500 ms later, at 805; request 3 prefills its
    # prompt plus its 1 token (810-815: its second token) and decodes its last 8 (895).
    supply = Scripted([Lease("spot", 305.0)])
    result = replay(workload(np.arange(20) * 50.0), deployment(), supply=supply)
    assert supply.events[:3] == [
        ("release", 305.0),
        ("preempted", 0, 305.0),
        ("migrated", 4, 310.0),
    ]
    requests = result.requests
    first, last = requests["first_token_ms"].to_numpy(), requests["last_token_ms"].to_numpy()
    assert first[:4].tolist() == [10.0, 110.0, 210.0, 310.0]
    assert last[3] == pytest.approx(895.0)
    assert first[4] == pytest.approx(905.0)  # then every request 100 ms after the previous
    assert (requests["status"] == "completed").all()
    assert (requests["output_length"] == 10).all()
    workers = result.workers
    assert workers["removed_at_ms"].iloc[0] == 305.0
    assert workers["ready_at_ms"].iloc[1] == pytest.approx(805.0)
    # Worker-seconds: 0.305 s of the preempted worker, the replacement from 305 ms to the end.
    end_ms = float(requests["last_token_ms"].max())
    assert result.summary["decode_worker_seconds"] == pytest.approx(
        0.305 + (end_ms - 305.0) / 1000.0
    )


def test_a_preempted_idle_worker_hands_back_nothing_and_is_replaced():
    # Request 0 is done at 100 ms; the worker is idle when it is preempted at 150 ms.
    supply = Scripted([Lease("spot", 150.0)])
    result = replay(workload([0.0, 1000.0]), deployment(), supply=supply)
    assert ("preempted", 0, 150.0) in supply.events
    assert not any(e[0] == "migrated" for e in supply.events)
    assert supply.held == 1  # the replacement, still held at the end
    assert result.requests["first_token_ms"].tolist() == [10.0, 1010.0]


def test_a_preempted_draining_worker_is_not_replaced():
    # Two workers behind round robin, requests every 25 ms: both always busy. At 0.5 s the
    # schedule keeps one worker, so the newest (worker 1) drains; it is preempted at 520 ms,
    # hands its requests back, and no replacement starts.
    supply = Scripted([Lease(), Lease("spot", 520.0)])
    planner = CountSchedule([CountChange(0.5, None, 1)])
    replay(workload(np.arange(40) * 25.0), deployment(2), planner, supply=supply)
    assert ("preempted", 1, 520.0) in supply.events
    assert any(e[0] == "migrated" and e[1] > 0 for e in supply.events)
    assert not any(e[0] == "refused" for e in supply.events)
    assert supply.held == 1


def test_a_refused_scale_up_stops_where_the_supply_ends():
    # The schedule asks for 3 workers at 1 s; the supply holds 2 at most: one more is granted
    # and the refusal names the count wanted and granted.
    supply = Scripted(limit=2)
    planner = CountSchedule([CountChange(1.0, None, 3)])
    result = replay(workload(np.arange(40) * 50.0), deployment(), planner, supply=supply)
    assert ("refused", Role.AGG, 3, 2, 1000.0) in supply.events
    assert result.timeseries["ready"].max() == 2


def test_replays_on_one_clock_match_their_replays_alone_when_nothing_is_refused():
    a, b = workload(np.arange(30) * 40.0), workload(np.arange(25) * 60.0, osl=5)
    alone = [replay(a, deployment(2)), replay(b, deployment(1))]
    together = replay_shared([SharedMember(a, deployment(2)), SharedMember(b, deployment(1))])
    for own, shared in zip(alone, together):
        assert own.requests.equals(shared.requests)
        assert own.summary["gpu_hours"] == shared.summary["gpu_hours"]


def test_one_supply_shared_by_two_replays_refuses_the_later_scale_up():
    # Both schedules ask for a second worker, the first replay at 1 s and the second at 2 s;
    # the shared supply holds 3 workers: the first gets its worker, the second is refused.
    shared = Scripted(limit=3)
    results = replay_shared(
        [
            SharedMember(
                workload(np.arange(60) * 50.0),
                deployment(1),
                CountSchedule([CountChange(1.0, None, 2)]),
                shared,
            ),
            SharedMember(
                workload(np.arange(60) * 50.0),
                deployment(1),
                CountSchedule([CountChange(2.0, None, 2)]),
                shared,
            ),
        ]
    )
    assert [e for e in shared.events if e[0] == "refused"] == [("refused", Role.AGG, 2, 1, 2000.0)]
    assert results[0].timeseries["ready"].max() == 2
    assert results[1].timeseries["ready"].max() == 1


def test_a_lease_that_never_ends_is_never_preempted():
    supply = Scripted([Lease("on_demand", NEVER)])
    replay(workload(np.arange(10) * 50.0), deployment(), supply=supply)
    assert not any(e[0] == "preempted" for e in supply.events)
