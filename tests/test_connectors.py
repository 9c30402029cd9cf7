"""VirtualConnector decision-id handshake, in memory and through a JSON file from another
process."""

import subprocess
import sys
import textwrap
import threading

from plansim.connectors import (
    InMemoryDecisionStore,
    JsonFileDecisionStore,
    VirtualConnector,
    VirtualConnectorClient,
)
from plansim.planner_core.observations import ScalingDecision, WorkerCounts


def test_decision_ids_increase_and_block_until_completed():
    store = InMemoryDecisionStore()
    planner = VirtualConnector(store)
    client = VirtualConnectorClient(store)
    assert not planner.scaling_in_progress(0.0)
    assert planner.set_component_replicas(ScalingDecision(2, 3), now_s=0.0) == 1
    assert planner.scaling_in_progress(10.0)
    decision = client.wait(timeout_s=1.0)
    assert (decision.num_prefill, decision.num_decode, decision.decision_id) == (2, 3, 1)
    client.complete(decision)
    assert not planner.scaling_in_progress(10.0)
    assert client.wait(timeout_s=0.01) is None  # nothing newer than the completed decision
    assert planner.set_component_replicas(ScalingDecision(None, 4), now_s=20.0) == 2


def test_unacknowledged_decision_times_out():
    planner = VirtualConnector(timeout_s=1800.0)
    planner.set_component_replicas(ScalingDecision(1, 1), now_s=100.0)
    assert planner.scaling_in_progress(1899.0)
    assert not planner.scaling_in_progress(1900.0)


def test_in_progress_flags_for_the_engine():
    planner = VirtualConnector()
    counts = WorkerCounts(1, 1)
    assert planner.with_progress(counts, 0.0) == counts
    planner.set_component_replicas(ScalingDecision(2, 1), now_s=0.0)
    flagged = planner.with_progress(counts, 1.0)
    assert flagged.prefill_in_progress and flagged.decode_in_progress


def test_client_thread_wakes_on_decision():
    store = InMemoryDecisionStore()
    planner = VirtualConnector(store)
    seen = []

    def client():
        c = VirtualConnectorClient(store, poll_interval_s=5.0)
        d = c.wait(timeout_s=10.0)
        seen.append(d.decision_id)
        c.complete(d)

    thread = threading.Thread(target=client)
    thread.start()
    planner.set_component_replicas(ScalingDecision(1, 2), now_s=0.0)
    thread.join(timeout=10.0)
    assert seen == [1] and not planner.scaling_in_progress(1.0)


def test_json_file_client_in_another_process(tmp_path):
    path = tmp_path / "decision.json"
    planner = VirtualConnector(JsonFileDecisionStore(path))
    planner.set_component_replicas(ScalingDecision(3, 5), now_s=0.0)
    script = textwrap.dedent(f"""
        from plansim.connectors import JsonFileDecisionStore, VirtualConnectorClient
        client = VirtualConnectorClient(JsonFileDecisionStore({str(path)!r}), poll_interval_s=0.01)
        d = client.wait(timeout_s=20)
        print(d.num_prefill, d.num_decode, d.decision_id)
        client.complete(d)
    """)
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60, check=True
    )
    assert out.stdout.split() == ["3", "5", "1"]
    assert not planner.scaling_in_progress(1.0)
    # a restarted planner continues the id sequence from the file
    assert VirtualConnector(JsonFileDecisionStore(path)).decision_id == 1
