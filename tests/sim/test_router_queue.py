"""The router queue's order and busy rule (reference ``router_queue_policy``/``_threshold``)."""

from __future__ import annotations

from plansim.sim.router_queue import RouterQueue

# (request id, arrival ms, uncached prompt tokens) queued in this order
WAITING = [(2, 2.0, 3000), (3, 3.0, 1000), (4, 4.0, 2000), (5, 4.0, 1000)]


def _order(policy: str) -> list[int]:
    q = RouterQueue(policy, 0.5)
    for rid, at, uncached in WAITING:
        q.push(rid, at, uncached)
    return [q.pop() for _ in range(len(q))]


def test_fcfs_releases_by_arrival_ties_in_queueing_order():
    assert _order("fcfs") == [2, 3, 4, 5]


def test_lcfs_releases_the_latest_arrival_first():
    assert _order("lcfs") == [4, 5, 3, 2]


def test_wspt_releases_the_shortest_uncached_prompt_first():
    assert _order("wspt") == [3, 5, 4, 2]


def test_a_rank_is_busy_above_the_threshold_fraction_of_its_budget():
    q = RouterQueue("fcfs", 0.5)
    assert not q.busy(4096, 8192) and q.busy(4097, 8192)
    assert not RouterQueue("fcfs", None).busy(10**9, 8192)
    assert not RouterQueue().enabled


def test_changing_the_policy_reorders_the_waiting_requests():
    q = RouterQueue("fcfs", 0.5)
    for rid, at, uncached in WAITING:
        q.push(rid, at, uncached)
    q.configure("wspt", 1.0)
    assert q.threshold == 1.0
    assert [q.pop() for _ in range(4)] == [3, 5, 4, 2]
