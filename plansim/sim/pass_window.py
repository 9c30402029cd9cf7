"""An engine rank's pass metrics: each pass's record, the waiting-queue totals it carries, and
the window of passes the planner host takes.

The rank makes a ``PassRecord`` of every pass it schedules (``QueueTotals.record``, or
``unrecorded`` on a rank whose metrics nothing takes) and adds it to its ``PassWindow`` at the
pass's end (a decode run adds its passes in bulk); the planner host takes the window's totals as
``ForwardPassMetrics`` at each observation, which resets them. Passes are split by kind, those
that scheduled prompt tokens (``mixed``) and those that did not (``decode_only``), so a policy
can tell a prefill chunk's stall from the decode floor. Times are seconds.

The planner's observation records are imported where they are built: a replay without a planner
never loads them (defining them costs about 6 ms).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:
    from plansim.planner_core.observations import ForwardPassMetrics, PassTotals


class PassRecord(NamedTuple):
    """One pass as the window counts it (wall seconds, prompt requests and tokens, decoding
    requests and their KV tokens), and the waiting queue's totals as it was scheduled
    (``ForwardPassMetrics``' queued fields). (A named tuple: one is made for most passes.)"""

    wall_s: float
    prefill_requests: int
    prefill_tokens: int
    decode_requests: int
    decode_kv_tokens: int
    queued: tuple[int, int, int, int]

    def metrics(self, worker_id: int, dp_rank: int) -> ForwardPassMetrics:
        """This one pass as the metrics of rank ``dp_rank`` of worker ``worker_id``."""
        from plansim.planner_core.observations import ForwardPassMetrics

        qpr, qpt, qdr, qdk = self.queued
        return ForwardPassMetrics(
            worker_id=worker_id,
            dp_rank=dp_rank,
            wall_time_s=self.wall_s,
            num_prefill_requests=self.prefill_requests,
            sum_prefill_tokens=self.prefill_tokens,
            num_decode_requests=self.decode_requests,
            sum_decode_kv_tokens=self.decode_kv_tokens,
            queued_prefill_requests=qpr,
            queued_prefill_tokens=qpt,
            queued_decode_requests=qdr,
            queued_decode_kv_tokens=qdk,
        )


_UNRECORDED = PassRecord(0.0, 0, 0, 0, 0, (0, 0, 0, 0))


def unrecorded(
    wall_s: float, n_prefill: int, prefill_tokens: int, n_decode: int, decode_kv: int
) -> PassRecord:
    """``QueueTotals.record`` of a rank without a pass window: nothing reads the record, so one
    placeholder stands for all (about a microsecond saved per pass and run)."""
    return _UNRECORDED


class QueueTotals:
    """A rank's waiting-queue totals, kept by the rank as requests enter and leave its queue:
    fresh prompts and their tokens; preempted or transferred requests and their KV tokens."""

    __slots__ = ("decode_kv_tokens", "decode_requests", "prefill_requests", "prefill_tokens")

    def __init__(self) -> None:
        self.prefill_requests = self.prefill_tokens = 0
        self.decode_requests = self.decode_kv_tokens = 0

    def as_tuple(self) -> tuple[int, int, int, int]:
        return (
            self.prefill_requests,
            self.prefill_tokens,
            self.decode_requests,
            self.decode_kv_tokens,
        )

    def record(
        self, wall_s: float, n_prefill: int, prefill_tokens: int, n_decode: int, decode_kv: int
    ) -> PassRecord:
        """A pass of ``wall_s`` seconds with these batches, scheduled with the queue as it is."""
        return PassRecord(
            wall_s,
            n_prefill,
            prefill_tokens,
            n_decode,
            decode_kv,
            (
                self.prefill_requests,
                self.prefill_tokens,
                self.decode_requests,
                self.decode_kv_tokens,
            ),
        )


class _Sums:
    __slots__ = (
        "decode_kv_tokens",
        "decode_requests",
        "passes",
        "prefill_requests",
        "prefill_tokens",
        "prefill_tokens_sq",
        "wall_s",
    )

    def __init__(self) -> None:
        self.passes = 0
        self.wall_s = 0.0
        self.prefill_requests = self.prefill_tokens = self.prefill_tokens_sq = 0
        self.decode_requests = self.decode_kv_tokens = 0

    def totals(self) -> PassTotals:
        from plansim.planner_core.observations import PassTotals

        return PassTotals(
            self.passes,
            self.wall_s,
            self.prefill_requests,
            self.prefill_tokens,
            self.decode_requests,
            self.decode_kv_tokens,
            self.prefill_tokens_sq,
        )


class PassWindow:
    """Running sums of one rank's passes since the last :meth:`take`."""

    __slots__ = ("_decode", "_mixed")

    def __init__(self) -> None:
        self._mixed = _Sums()
        self._decode = _Sums()

    def add_pass(self, f: PassRecord) -> None:
        """One pass; a pass that scheduled nothing is not a pass and is skipped."""
        prefill_tokens = f.prefill_tokens
        if prefill_tokens <= 0 and f.decode_requests <= 0:
            return
        s = self._mixed if prefill_tokens > 0 else self._decode
        s.passes += 1
        s.wall_s += f.wall_s
        s.prefill_requests += f.prefill_requests
        s.prefill_tokens += prefill_tokens
        s.prefill_tokens_sq += prefill_tokens * prefill_tokens
        s.decode_requests += f.decode_requests
        s.decode_kv_tokens += f.decode_kv_tokens

    def add_decode_passes(
        self, passes: int, wall_s: float, decode_requests: int, decode_kv_tokens: int
    ) -> None:
        """``passes`` decode-only passes with these totals (part of a decode run)."""
        if passes <= 0:
            return
        s = self._decode
        s.passes += passes
        s.wall_s += wall_s
        s.decode_requests += decode_requests
        s.decode_kv_tokens += decode_kv_tokens

    def take(self) -> tuple[PassTotals, PassTotals]:
        """(mixed, decode-only) totals since the last take; starts a new window."""
        out = self._mixed.totals(), self._decode.totals()
        self._mixed, self._decode = _Sums(), _Sums()
        return out

    def take_fpm(
        self, worker_id: int, dp_rank: int, queued: QueueTotals, inflight_prefill_tokens: int
    ) -> ForwardPassMetrics:
        """The window's per-pass means as the metrics of rank ``dp_rank`` of worker
        ``worker_id``, with its waiting queue's totals and the prompt tokens its running
        requests have still to compute; starts a new window."""
        from plansim.planner_core.observations import ForwardPassMetrics

        mixed, decode_only = self.take()
        return ForwardPassMetrics.from_window(
            worker_id,
            dp_rank,
            mixed,
            decode_only,
            queued=queued.as_tuple(),
            inflight_prefill_tokens=inflight_prefill_tokens,
        )
