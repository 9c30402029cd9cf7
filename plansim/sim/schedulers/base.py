"""The scheduler-policy seam of an engine rank.

A rank (``plansim.sim.engine.Rank``) owns the mechanics: the running batch and the waiting
queue, the KV block pool, granting tokens (allocating and registering their blocks), admission
bookkeeping, pass timing, token emission, decode runs, queue totals and pass metrics. A
``SchedulerPolicy`` owns the rules a backend differs in: which requests get tokens in a pass and
how many (ordering and the token budget), which waiting requests are admitted, which running
request is preempted when KV runs short, and which requests are refused at the door.

The policy composes each pass through the ``PassBuilder`` surface of the rank and nothing else.
One policy instance serves one rank (it may keep per-rank state).

A backend also declares its configuration once, as class attributes (``BackendKeys``): the
engine block named after it (``Knobs``: ``engine.sglang``), the engine keys only it reads
(``EngineKnobs``), older spellings, and whether it runs a host offload tier. The engine args'
fields, their bounds and help, the flat older spellings of ``plansim.sim.engine_config`` and the
"supported only for backend ..." checks derive from them.

Adding a backend: one module with a policy class (constructor ``(args: EngineArgs)``, based on
``BackendKeys``) and one line in ``plansim.sim.schedulers.SCHEDULERS``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol

from plansim.params import NoParams

if TYPE_CHECKING:
    from plansim.sim.batch import Request


class PrefixMatch(NamedTuple):
    """What admitting a waiting request would reuse, from the rank's cache now.

    ``n_match`` leading blocks are cached and would be acquired (``keys[:n_match]``), of which
    ``n_active`` are held by running requests; ``cached_tokens`` of the prompt would not be
    recomputed; ``blocks_needed`` more blocks would hold the request's whole known sequence
    (``n_active`` counts as present, inactive cached blocks must be re-acquired). (A named
    tuple: one is made for every admission and every run the waiting head may stop, at a third
    of a frozen dataclass's cost.)"""

    keys: list[int]
    n_match: int
    n_active: int
    blocks_needed: int
    cached_tokens: int


class PassBuilder(Protocol):
    """The rank as its policy sees it while composing a pass."""

    block_size: int
    # In batch order; the policy may reorder ``waiting`` (not ``running``) between passes.
    running: list[Request]
    waiting: deque[Request]
    # Tokens granted so far in this pass (a preempted request's grant is given back).
    pass_tokens: int
    # A request's work granted earlier in this pass was undone by a preemption.
    pass_undone: bool
    # Preemptions (and KV rejections) since the rank started; compare before and after a grant.
    preemptions: int
    # With a host offload tier: look a waiting request up there before admitting it
    # (``plansim.sim.host_offload``: PROCEED, HELD (it left the queue) or BLOCKED); else None.
    host_lookup: Callable[[Request, PrefixMatch, float], int] | None

    def kv_available(self) -> int:
        """Blocks that can be allocated now (free plus evictable)."""
        ...

    def prefix_match(self, req: Request) -> PrefixMatch: ...

    def admit(self, req: Request, match: PrefixMatch, now_ms: float) -> None:
        """Move a waiting request into the batch, acquiring its matched prefix."""
        ...

    def grant(self, req: Request, tokens: int) -> bool:
        """Give a running request its next ``tokens`` this pass, allocating their KV and
        preempting ``victim`` requests while it is short. False when ``req`` itself left the
        batch (preempted, or rejected because it can never fit)."""
        ...

    def grant_decoding(self, start: int, budget: int) -> int:
        """``grant(req, 1)`` for the decoding requests of ``running[start:]`` (one known token
        left, prompt computed) in one step: up to the first request that is not decoding, at
        most ``budget`` of them, and stopping before a grant that would preempt. Returns the
        index after the last one granted (``start`` when none was). Valid while nothing has
        left the batch in this pass (``preemptions`` unchanged)."""
        ...


class SchedulerPolicy(Protocol):
    """A backend's scheduling rules; see the module docstring."""

    # The backend's default KV block (page) size in tokens, used when the config sets none.
    default_block_size: int
    # With speculative decoding: whether a request's prompt-completing pass also verifies
    # drafts (emits 1 + accepted drafts and is timed as a decode too).
    verifies_prefill: bool
    # Whether a pass in which a preempted request recomputes its prompt's last tokens and its
    # output also times it as a decode over its KV length (the reference's vLLM core: every
    # request with output is a decode).
    recompute_decodes: bool

    def refusal(self, req: Request) -> str | None:
        """Why a request reaching the rank can never run there (None: accept it). May clip
        ``req.osl`` to what the backend would generate."""
        ...

    def compose(self, rank: PassBuilder, now_ms: float) -> None:
        """Grant this pass's tokens: running requests and admissions, in the backend's order."""
        ...

    def victim(self, running: Sequence[Request], needy: Request) -> int:
        """Index into ``running`` of the request to preempt while ``needy`` is short of KV."""
        ...

    def steady_decode(self, rank: PassBuilder) -> bool:
        """True when, with every running request decoding, each following pass would give
        each of them one token and admit nothing until one completes or KV runs short: the
        rank may then time those passes in one step (a decode run)."""
        ...

    def steady_prompt(self, rank: PassBuilder) -> tuple[int, bool]:
        """With the last running request's prompt being computed and every other running
        request decoding: ``(chunk, last_admits_nothing)`` when each following pass would give
        each decoding request one token and the prompt ``chunk`` tokens (its last chunk what is
        left), admitting nothing while the chunk takes all ``chunk`` tokens, and also in the
        pass of a shorter last chunk when ``last_admits_nothing``; ``(0, False)`` when passes
        are not that steady. The rank may then time those passes in one step (a prompt run);
        the policy keeps no state from those passes."""
        ...

    def decode_run(self, passes: int) -> None:
        """A decode run of ``passes`` decode-only passes ended: advance the state ``compose``
        keeps from pass to pass as that many decode passes would have."""
        ...

    def pass_state(self) -> object:
        """The state ``compose`` keeps from pass to pass (compared with ``==``): a pass that
        grants nothing and leaves it, the batch and the queue unchanged would repeat forever."""
        ...


class BackendKeys:
    """What a backend declares about its engine keys (class attributes; the defaults declare
    nothing).

    ``Knobs``: the parameter dataclass (``plansim.params``) of the engine block named after the
    backend (``engine.sglang.max_prefill_tokens``; older flat spelling
    ``sglang_max_prefill_tokens``); ``NoParams``: no block. ``EngineKnobs``: top-level engine
    keys only this backend reads; one changed from its default with another backend is an
    error. ``block_aliases``: members of the block that spell a shared engine key
    (``{"page_size": "block_size"}``). ``value_aliases``: older spellings of a knob's values
    (``{"schedule_policy": {"fcfs": "fifo"}}``). ``host_offload``: whether the backend runs a
    ``native_host_offload`` tier."""

    __slots__ = ()
    Knobs: ClassVar[type] = NoParams
    EngineKnobs: ClassVar[type] = NoParams
    block_aliases: ClassVar[Mapping[str, str]] = {}
    value_aliases: ClassVar[Mapping[str, Mapping[Any, Any]]] = {}
    host_offload: ClassVar[bool] = False
