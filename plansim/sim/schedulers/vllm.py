"""The vLLM scheduler policy (reference mocker, vLLM core).

1. Token budget ``max_num_batched_tokens``. Running requests are scheduled first, in batch
   order, each taking ``min(remaining known tokens, budget)``: a prompt chunk, or 1 token for a
   decode. Without chunked prefill, a prompt whose remainder exceeds the budget blocks the pass.
2. KV shortage preempts a running request (``preemption_mode`` ``lifo``: the newest, ``fifo``:
   the oldest); the rank gives its grant back and requeues it at the head of the waiting queue.
3. Unless the running requests' grants lost a request (the one being scheduled, or work granted
   earlier in the pass), waiting requests are admitted in order while ``running <
   max_num_seqs`` and budget remains; with a host offload tier each is looked up there first
   (it may leave the queue for a transfer); admission needs KV for the whole known sequence,
   counting only *active* cached prefix blocks as present. Any preemption while an admitted
   request takes its tokens ends admission for the pass.
4. Refused at the door: a prompt at or over ``max_model_len`` and, without chunked prefill, a
   prompt over the budget; ``max_model_len`` clips the output length.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from plansim.sim.host_offload import BLOCKED, HELD
from plansim.sim.schedulers.base import BackendKeys, PassBuilder, PrefixMatch

if TYPE_CHECKING:
    from plansim.sim.batch import Request


class VllmScheduler(BackendKeys):
    """vLLM ordering, admission and preemption; see the module docstring."""

    __slots__ = ("budget", "chunked", "lifo", "max_model_len", "max_num_seqs")
    # Step 3's host lookup: the reference runs ``native_host_offload`` on vLLM only.
    host_offload = True
    # With speculative decoding, a request finishing its prompt also runs verification (its
    # first pass emits 1 + accepted drafts and is timed as a decode too).
    verifies_prefill = True
    recompute_decodes = True
    default_block_size = 64

    def __init__(self, args: Any) -> None:
        self.budget = args.max_num_batched_tokens
        self.max_num_seqs = args.max_num_seqs
        self.chunked = args.enable_chunked_prefill
        self.lifo = args.preemption_mode == "lifo"
        self.max_model_len = args.max_model_len

    def refusal(self, req: Request) -> str | None:
        limit = self.max_model_len
        if limit is not None and req.isl >= limit:
            return "prompt_exceeds_max_model_len"
        if not self.chunked and req.isl > self.budget:
            return "prompt_exceeds_batch_budget"
        if limit is not None:
            req.osl = min(req.osl, limit - req.isl)
        return None

    def victim(self, running: Sequence[Request], needy: Request) -> int:
        return len(running) - 1 if self.lifo else 0

    def compose(self, rank: PassBuilder, now_ms: float) -> None:
        limit = self.budget
        chunked = self.chunked
        running = rank.running
        grant = rank.grant
        grant_decoding = rank.grant_decoding
        lost = False
        # A snapshot: preemption removes requests from the batch as the pass is built. Until
        # it does, row k of the batch is snapshot[k], and each run of decoding requests takes
        # its tokens in one step.
        snapshot = running.copy()
        preemptions = rank.preemptions
        k = 0
        while k < len(snapshot):
            budget = limit - rank.pass_tokens
            if budget <= 0:
                break
            if rank.preemptions == preemptions:
                stop = grant_decoding(k, budget)
                if stop > k:
                    k = stop
                    continue
            req = snapshot[k]
            k += 1
            if not req.in_batch:
                continue
            before = req.computed
            if not chunked and before < req.isl and req.isl - before > budget:
                break
            n = req.isl + req.generated - before
            if n > budget:
                n = budget
            if n <= 0:
                break
            if not grant(req, n):
                lost = True
        if lost or rank.pass_undone:
            return
        waiting = rank.waiting
        host_lookup = rank.host_lookup
        while waiting and len(running) < self.max_num_seqs:
            budget = limit - rank.pass_tokens
            if budget <= 0:
                break
            req = waiting[0]
            match = rank.prefix_match(req)
            if host_lookup is not None:
                found = host_lookup(req, match, now_ms)
                if found == HELD:
                    continue
                if found == BLOCKED:
                    break
            if not self.admits(rank, req, match):
                break
            prompt_left = req.isl - min(match.cached_tokens, req.isl)
            if not chunked and not req.prebuilt and prompt_left > budget:
                break
            rank.admit(req, match, now_ms)
            # At least one token is left to compute, and the prompt's remainder was checked
            # against the budget above.
            n = req.isl + req.generated - req.computed
            if n > budget:
                n = budget
            preemptions = rank.preemptions
            if not grant(req, n) or rank.preemptions != preemptions:
                break

    def admits(self, rank: PassBuilder, req: Request, match: PrefixMatch) -> bool:
        """KV admits the waiting head: its whole known sequence fits (active cached blocks
        count as present)."""
        return match.blocks_needed <= rank.kv_available()

    def steady_decode(self, rank: PassBuilder) -> bool:
        running = rank.running
        if len(running) > self.budget:
            return False
        waiting = rank.waiting
        if waiting and len(running) < self.max_num_seqs:
            # The head would be admitted at the next pass.
            head = waiting[0]
            if self.admits_uncached(rank, head):
                return False
            return not self.admits(rank, head, rank.prefix_match(head))
        return True

    def admits_uncached(self, rank: PassBuilder, req: Request) -> bool:
        """KV admits the waiting head whatever its cached prefix: its whole known sequence fits
        with no block present (``admits`` without a prefix match, which can only need fewer)."""
        return -(-(req.isl + req.generated) // rank.block_size) <= rank.kv_available()

    def steady_prompt(self, rank: PassBuilder) -> tuple[int, bool]:
        # Each decoding request ahead of the prompt takes one token of the budget, the prompt
        # the rest; while its chunk fills the budget nothing is admitted, and its last chunk
        # leaves room for an admission unless no one waits or the batch is full.
        if not self.chunked:
            return 0, False
        running = rank.running
        chunk = self.budget - (len(running) - 1)
        if chunk <= 0:
            return 0, False
        return chunk, not rank.waiting or len(running) >= self.max_num_seqs

    def decode_run(self, passes: int) -> None:
        """Nothing is kept from pass to pass."""

    def pass_state(self) -> object:
        return None
