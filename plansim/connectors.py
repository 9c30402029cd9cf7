"""Connectors: how a host applies the planner's replica targets to a deployment.

``PlannerConnector`` is the seed's connector interface in synchronous form (an offline host has
no event loop). Inside a replay, ``plansim.sim.planner_host`` applies targets to the cluster.
``VirtualConnector`` hands decisions to an external orchestrator with the decision-id handshake:

1. the planner writes ``(num_prefill, num_decode, decision_id)``;
2. the client ``wait()``s for a decision newer than the last it completed;
3. the client scales its deployment;
4. the client reports ``complete(decision)``;
5. the planner proceeds once ``scaled_decision_id >= decision_id``, or once the decision is
   older than ``timeout_s`` (default 1800 s).

The store is in memory (same process, e.g. a thread) or a JSON file pair (another process): the
planner writes ``<path>`` and the client writes ``<path>.ack.json``, each atomically, so neither
side ever overwrites the other's field.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

import orjson

from plansim.io import atomic_write_json
from plansim.planner_core.engine import DEFAULT_SCALING_TIMEOUT_S
from plansim.planner_core.observations import ScalingDecision, WorkerCounts


class PlannerConnector(Protocol):
    """What a planner host needs from the deployment it scales."""

    def validate_deployment(self, mode: str) -> None: ...

    def wait_for_deployment_ready(self) -> None: ...

    def get_model_name(self) -> str | None: ...

    def get_gpu_counts(self) -> tuple[int, int]:
        """GPUs per (prefill, decode) replica."""
        ...

    def get_worker_info(self) -> dict[str, Any]: ...

    def get_actual_worker_counts(self) -> WorkerCounts: ...

    def set_component_replicas(self, targets: ScalingDecision, blocking: bool = True) -> None: ...


@dataclass(frozen=True, slots=True)
class VirtualDecision:
    """One published decision: replica targets (``None``: that role is left as it is), its id
    (one more than the previous decision's) and when it was made (planner time, seconds)."""

    num_prefill: int | None
    num_decode: int | None
    decision_id: int
    decided_at_s: float


class DecisionStore(Protocol):
    """Where the planner publishes its last decision and the client its last completed id
    (0 before any); each side writes only its own field."""

    def write_decision(self, decision: VirtualDecision) -> None: ...

    def read_decision(self) -> VirtualDecision | None: ...

    def write_scaled(self, decision_id: int) -> None: ...

    def read_scaled(self) -> int: ...


class InMemoryDecisionStore:
    """Thread-safe store for a client in the same process; ``changed`` wakes waiting clients."""

    def __init__(self) -> None:
        self.changed = threading.Condition()
        self._decision: VirtualDecision | None = None
        self._scaled = 0

    def write_decision(self, decision: VirtualDecision) -> None:
        with self.changed:
            self._decision = decision
            self.changed.notify_all()

    def read_decision(self) -> VirtualDecision | None:
        with self.changed:
            return self._decision

    def write_scaled(self, decision_id: int) -> None:
        with self.changed:
            self._scaled = max(self._scaled, decision_id)
            self.changed.notify_all()

    def read_scaled(self) -> int:
        with self.changed:
            return self._scaled


class JsonFileDecisionStore:
    """Decision in ``path`` (written by the planner), acknowledgement in ``path.ack.json``
    (written by the client); atomic renames, so a reader never sees half a file."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.ack_path = self.path.with_name(self.path.name + ".ack.json")
        self.changed = None

    def write_decision(self, decision: VirtualDecision) -> None:
        atomic_write_json(
            self.path,
            {
                "num_prefill": decision.num_prefill,
                "num_decode": decision.num_decode,
                "decision_id": decision.decision_id,
                "decided_at_s": decision.decided_at_s,
            },
        )

    def read_decision(self) -> VirtualDecision | None:
        data = _read_json(self.path)
        if data is None:
            return None
        return VirtualDecision(
            data["num_prefill"],
            data["num_decode"],
            int(data["decision_id"]),
            float(data["decided_at_s"]),
        )

    def write_scaled(self, decision_id: int) -> None:
        atomic_write_json(
            self.ack_path, {"scaled_decision_id": max(self.read_scaled(), decision_id)}
        )

    def read_scaled(self) -> int:
        data = _read_json(self.ack_path)
        return 0 if data is None else int(data["scaled_decision_id"])


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        return orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None


class VirtualConnector:
    """Planner side of the handshake. Clock-free: callers pass ``now_s``."""

    def __init__(
        self, store: DecisionStore | None = None, *, timeout_s: float = DEFAULT_SCALING_TIMEOUT_S
    ) -> None:
        self.store = store if store is not None else InMemoryDecisionStore()
        self.timeout_s = timeout_s
        last = self.store.read_decision()
        self._decision_id = last.decision_id if last is not None else 0

    @property
    def decision_id(self) -> int:
        return self._decision_id

    def set_component_replicas(self, targets: ScalingDecision, now_s: float) -> int:
        """Publish a decision; returns its id (ids increase by one per decision)."""
        self._decision_id += 1
        self.store.write_decision(
            VirtualDecision(targets.num_prefill, targets.num_decode, self._decision_id, now_s)
        )
        return self._decision_id

    def scaling_in_progress(self, now_s: float) -> bool:
        """True while the last decision is neither acknowledged nor timed out."""
        last = self.store.read_decision()
        if last is None or self.store.read_scaled() >= last.decision_id:
            return False
        return now_s - last.decided_at_s < self.timeout_s

    def with_progress(self, counts: WorkerCounts, now_s: float) -> WorkerCounts:
        """``counts`` with both in-progress flags set while a decision is pending."""
        if not self.scaling_in_progress(now_s):
            return counts
        return replace(counts, prefill_in_progress=True, decode_in_progress=True)


class VirtualConnectorClient:
    """Orchestrator side: ``wait()`` for a new decision, scale, then ``complete(decision)``."""

    def __init__(self, store: DecisionStore, *, poll_interval_s: float = 0.05) -> None:
        self.store = store
        self.poll_interval_s = poll_interval_s

    def wait(self, timeout_s: float | None = None) -> VirtualDecision | None:
        """Block until a decision newer than the last completed one exists; None on timeout."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        condition = getattr(self.store, "changed", None)
        while True:
            decision = self.store.read_decision()
            if decision is not None and decision.decision_id > self.store.read_scaled():
                return decision
            remaining = None if deadline is None else deadline - time.monotonic()
            if remaining is not None and remaining <= 0:
                return None
            step = (
                self.poll_interval_s if remaining is None else min(self.poll_interval_s, remaining)
            )
            if condition is not None:
                with condition:
                    condition.wait(step)
            else:
                time.sleep(step)

    def complete(self, decision: VirtualDecision) -> None:
        self.store.write_scaled(decision.decision_id)
