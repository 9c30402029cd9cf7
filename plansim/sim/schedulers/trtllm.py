"""The TensorRT-LLM scheduler policy (reference mocker: the vLLM core with TRT-LLM's
``GUARANTEED_NO_EVICT`` capacity scheduler, its only ``capacity_scheduler_policy``).

Passes are composed as vLLM composes them (``plansim.sim.schedulers.vllm``); what differs is
capacity. A request is admitted only if KV for its whole lifetime is free once every running
request's is set aside, so nothing is ever preempted:

    needed    = ceil((prompt + output) / block_size) - active cached prefix blocks
    available = num_gpu_blocks - active blocks
                - sum over running of (ceil((prompt + output) / block_size) - blocks held)

At the door, the output length is clipped to what the KV pool (and ``max_model_len``) leaves
after the prompt, and a request whose prompt leaves no room at all is refused. Default block
size 32, as the reference's. The engine's ``trtllm`` block names the capacity policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from plansim.params import param
from plansim.sim.schedulers.base import PassBuilder, PrefixMatch
from plansim.sim.schedulers.vllm import VllmScheduler

if TYPE_CHECKING:
    from plansim.sim.batch import Request


@dataclass(frozen=True, slots=True)
class TrtllmKnobs:
    """The reference's ``engine.trtllm`` block."""

    capacity_scheduler_policy: Literal["guaranteed_no_evict"] = param(
        "guaranteed_no_evict",
        choices=("guaranteed_no_evict",),
        help="admission rule: KV for a request's whole lifetime is free",
    )


class TrtllmScheduler(VllmScheduler):
    """vLLM passes with no-evict admission; see the module docstring."""

    __slots__ = ("capacity_tokens",)
    default_block_size = 32
    Knobs = TrtllmKnobs
    host_offload = False

    def __init__(self, args: Any) -> None:
        super().__init__(args)
        self.capacity_tokens = args.num_gpu_blocks * args.block_size

    def refusal(self, req: Request) -> str | None:
        reason = super().refusal(req)
        if reason is not None:
            return reason
        if req.isl >= self.capacity_tokens:
            return "prompt_exceeds_kv_pool"
        req.osl = min(req.osl, self.capacity_tokens - req.isl)
        return None

    def admits(self, rank: PassBuilder, req: Request, match: PrefixMatch) -> bool:
        bs = rank.block_size
        needed = -(-(req.isl + req.osl) // bs)
        if not req.prebuilt:  # a transferred prompt gets no prefix credit
            needed -= match.n_active
        reserved = 0
        for r in rank.running:
            rest = -(-(r.isl + r.osl) // bs) - r.n_blocks
            if rest > 0:
                reserved += rest
        return needed <= rank.kv_available() - reserved

    def admits_uncached(self, rank: PassBuilder, req: Request) -> bool:
        """No shortcut: ``admits`` sets the running requests' reservations aside."""
        return False

    def victim(self, running: Sequence[Request], needy: Request) -> int:
        # No-evict admission leaves nothing to preempt; if KV still runs short (a cached prefix
        # evicted before its request claimed it), the newest request yields, as in vLLM.
        return len(running) - 1
