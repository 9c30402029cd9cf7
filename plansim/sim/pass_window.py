"""Per-rank pass accumulator: what one engine rank did since the planner host last looked.

The engine adds every completed pass at its end (a decode run adds its passes in bulk); the
planner host takes the totals at each observation, which resets them. Passes are split by kind,
those that scheduled prompt tokens (``mixed``) and those that did not (``decode_only``), so a
policy can tell a prefill chunk's stall from the decode floor. Times are seconds.
"""

from __future__ import annotations

from plansim.planner_core.observations import PassTotals


class _Sums:
    __slots__ = ("passes", "wall_s", "prefill_requests", "prefill_tokens", "decode_requests",
                 "decode_kv_tokens", "prefill_tokens_sq")

    def __init__(self) -> None:
        self.passes = 0
        self.wall_s = 0.0
        self.prefill_requests = self.prefill_tokens = self.prefill_tokens_sq = 0
        self.decode_requests = self.decode_kv_tokens = 0

    def totals(self) -> PassTotals:
        return PassTotals(self.passes, self.wall_s, self.prefill_requests, self.prefill_tokens,
                          self.decode_requests, self.decode_kv_tokens, self.prefill_tokens_sq)


class PassWindow:
    """Running sums of one rank's passes since the last :meth:`take`."""

    __slots__ = ("_mixed", "_decode")

    def __init__(self) -> None:
        self._mixed = _Sums()
        self._decode = _Sums()

    def add_pass(self, wall_s: float, prefill_requests: int, prefill_tokens: int,
                 decode_requests: int, decode_kv_tokens: int) -> None:
        """One pass; a pass that scheduled nothing is not a pass and is skipped."""
        if prefill_tokens <= 0 and decode_requests <= 0:
            return
        s = self._mixed if prefill_tokens > 0 else self._decode
        s.passes += 1
        s.wall_s += wall_s
        s.prefill_requests += prefill_requests
        s.prefill_tokens += prefill_tokens
        s.prefill_tokens_sq += prefill_tokens * prefill_tokens
        s.decode_requests += decode_requests
        s.decode_kv_tokens += decode_kv_tokens

    def add_decode_passes(self, passes: int, wall_s: float, decode_requests: int,
                          decode_kv_tokens: int) -> None:
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
