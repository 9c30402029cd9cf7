"""What the rest of the replay may use of an engine rank, and what a rank reports back.

``EngineRank`` is the whole surface the replay host, the recorder, the router and the planner
host see; nothing else of a rank is theirs to touch (its batch, queue and KV pool belong to the
rank and its scheduler policy, ``plansim.sim.schedulers``). A rank reports through the
``EngineHooks`` the host gives it. Times are virtual milliseconds.

Who uses what:

- the host: ``enqueue`` a request (False: it was rejected through ``on_reject``); when the rank
  is not ``busy`` and ``has_work``, ``start_pass(now)`` returns the time its pass (or run of
  passes) ends, as the clock reaches it step by step, and the host calls ``finish(end)`` at that
  time; an arrival that reaches a busy rank calls ``interrupt(now)``, which may shorten a run in
  flight (the new end time, the same way, or None when unchanged); ``wake(now)``
  at a time the rank asked for with ``on_wakeup``; ``evacuate()`` when its worker was
  preempted; ``role`` and ``worker_id`` to relay reports;
- the recorder: ``occupancy()`` once per sample;
- the router: ``prefix_view.overlap(keys)`` (the pool hands it the ready ranks' views);
- the planner host (through ``ClusterView``): ``take_fpm(now)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple, Protocol, runtime_checkable

if TYPE_CHECKING:
    from plansim.planner_core.observations import ForwardPassMetrics
    from plansim.roles import Role
    from plansim.sim.batch import Request


class RankOccupancy(NamedTuple):
    """A rank's state at one instant, for the time series: requests running and waiting,
    prompt tokens of fresh requests waiting, and the fraction of KV blocks active (0..1). (A
    named tuple: the sampler takes one of every rank every virtual second.)"""

    running: int
    waiting: int
    queued_prefill_tokens: int
    kv_usage: float


class PrefixView(Protocol):
    """What a router may know of a rank's cache: how many leading blocks of a prompt it holds."""

    def overlap(self, keys: list[int]) -> int:
        """Leading blocks of ``keys`` (prompt block keys, ``plansim.sim.kv``) cached on the
        rank, active or not, as of its last pass end (the reference engine's KV events reach
        the router when a pass ends)."""
        ...


@runtime_checkable
class EngineRank(Protocol):
    """One data-parallel rank of one worker, as the host, recorder, router and planner host
    see it."""

    worker_id: int
    dp_rank: int
    role: Role
    # True from ``start_pass`` until ``finish``.
    busy: bool
    # The router's view of this rank's prefix cache.
    prefix_view: PrefixView

    def enqueue(self, req: Request) -> bool: ...

    def has_work(self) -> bool:
        """A pass can start now."""
        ...

    def cached_blocks(self, keys: list[int]) -> int:
        """Leading blocks of ``keys`` cached on the rank now (its engine's own view)."""
        ...

    def holds_requests(self) -> bool:
        """Requests are on the rank (running, waiting, or held back for a host transfer)."""
        ...

    def evacuate(self) -> list[Request]:
        """Take every request off the rank (not ``busy``; its worker was preempted)."""
        ...

    def wake(self, now_ms: float) -> None:
        """The time a rank asked for through ``on_wakeup`` has come."""
        ...

    def start_pass(self, now_ms: float) -> float: ...

    def interrupt(self, now_ms: float) -> float | None: ...

    def finish(self, now_ms: float) -> None: ...

    def take_fpm(self, t_ms: float) -> ForwardPassMetrics:
        """Per-pass means over the passes completed since the previous call, with the queue at
        ``t_ms``; starts a new window (for the planner host)."""
        ...

    def occupancy(self) -> RankOccupancy:
        """Now, for the recorder's time series."""
        ...


class EngineHooks:
    """What a rank reports to the host; the host supplies the callables. ``rank`` is the
    reporting ``EngineRank``, times are virtual ms."""

    __slots__ = ("on_admit", "on_complete", "on_reject", "on_run", "on_tokens", "on_wakeup")

    def __init__(
        self,
        on_admit: Callable[[EngineRank, Request, float, int], None],
        on_tokens: Callable[..., None],
        on_complete: Callable[[EngineRank, Request, float], None],
        on_reject: Callable[[EngineRank, Request, str], None],
        on_run: Callable[..., None],
        on_wakeup: Callable[[EngineRank, float], None] | None = None,
    ) -> None:
        self.on_admit = on_admit  # (rank, req, now_ms, reused_tokens)
        # (rank, rids, end_ms[, counts]): one pass's tokens, one for each request id of
        # ``rids`` (distinct ids; a list of ints, or an int64 array valid during the call), or
        # counts[i] of rids[i] when a speculative pass emits several
        self.on_tokens = on_tokens
        self.on_complete = on_complete  # (rank, req, end_ms)
        self.on_reject = on_reject  # (rank, req, reason)
        # (rank, rids, ends_ms, first_ms): a finished run, every request of ``rids`` (a list of
        # ints for a short batch, else an int64 array, valid during the call) emitting one
        # token at ``first_ms`` unless it is None (the end of the composed pass a run follows
        # on from) and one at each of ``ends_ms`` (a list or an array); the first may be a
        # request's first token
        self.on_run = on_run
        # (rank, at_ms): the rank has work becoming ready at ``at_ms`` (a host KV transfer)
        self.on_wakeup = on_wakeup
