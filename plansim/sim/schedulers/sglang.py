"""The SGLang scheduler policy (reference mocker, SGLang core; SGLang's ``PrefillAdder``).

A pass is either a **prefill (extend) pass** or a **decode pass**, never both: while a prefill
batch can be formed, running requests get no token (SGLang's default, mixed chunks off). A
prefill pass is timed as a prefill alone; the requests that finish their prompt in it emit their
first token at its end. Otherwise every running request decodes one token.

Prefill batch, in queue order (``schedule_policy``: ``fifo``, or ``lpm``: longest cached prefix
first, see below):

1. A prompt still being chunked continues first, taking ``min(its rest, chunk budget)`` tokens.
2. Each waiting request is matched against the prefix cache (whole pages); its *extend* is the
   rest of its known sequence. With ``reserve = min(output left, clip_max_new_tokens)``:
   - it stops the batch when ``extend + reserve`` reaches the token room: free plus evictable KV
     tokens, minus ``new_token_ratio`` x the ``reserve`` of every running request, minus what
     this batch has taken (and its matched prefix locks);
   - it stops the batch when its page-rounded extend reaches the prefill budget
     ``max_prefill_tokens`` (unless it is the first of the batch);
   - it is added whole when its page-rounded extend fits the chunk budget
     ``chunked_prefill_size``; otherwise its first ``chunk budget`` tokens (whole pages) are
     added and the batch ends (it continues in the next pass);
   - it waits when KV for its pages cannot be had (an out-of-memory admission);
   - at most ``max_num_seqs`` requests run.
   Each addition takes its page-rounded tokens from the three budgets (and its reserve from the
   token room).
3. ``new_token_ratio`` starts at ``0.7 x schedule_conservativeness``, falls by
   ``(start - floor) / 600`` each pass to ``floor = 0.14 x start``, and returns to the start
   after an out-of-memory admission or a retraction.
4. ``prefill_decode_interval`` N > 0: after a prefill pass, N decode passes run before the next
   prefill pass.

Decode pass: on KV shortage the request with the fewest output tokens (the longest prompt among
equals) is retracted (preempted, recomputed later). ``lpm`` ordering applies while at most 128
requests wait: by cached prefix length, longest first, except that a request with at most 32
cached tokens whose first 32 tokens (rounded up to pages) repeat an earlier waiting request's
goes last (it will find that prefix cached once the first is computed).

Default page (block) size 1, as the reference's. The engine's ``sglang`` block holds the knobs
(``SglangKnobs``; ``page_size`` is the engine's ``block_size``); ``prefill_decode_interval`` is a
top-level engine key.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Literal

from plansim.params import param
from plansim.sim.schedulers.base import BackendKeys, PassBuilder

if TYPE_CHECKING:
    from plansim.sim.batch import Request

_INIT_NEW_TOKEN_RATIO = 0.7
_MIN_NEW_TOKEN_RATIO_FACTOR = 0.14
_NEW_TOKEN_RATIO_DECAY_PASSES = 600.0
_LPM_MAX_WAITING = 128
_IN_BATCH_PREFIX_TOKENS = 32


@dataclass(frozen=True, slots=True)
class SglangKnobs:
    """The reference's ``engine.sglang`` block."""

    schedule_policy: Literal["fifo", "lpm"] = param(
        "fifo",
        choices=("fifo", "lpm"),
        help="waiting-queue order: arrival, or longest cached prefix first",
    )
    max_prefill_tokens: int = param(16384, ge=1, help="prefill budget of one pass (tokens)")
    chunked_prefill_size: int = param(8192, ge=1, help="largest prompt chunk of one pass (tokens)")
    clip_max_new_tokens: int = param(
        4096, ge=1, help="output tokens a running request reserves KV for, at most"
    )
    schedule_conservativeness: float = param(
        1.0, ge=0, le=1, help="scales the starting new_token_ratio"
    )


@dataclass(frozen=True, slots=True)
class SglangEngineKnobs:
    """Top-level engine keys only SGLang reads."""

    prefill_decode_interval: int = param(
        0, ge=0, help="decode passes that follow a prefill pass before the next prefill (0: none)"
    )


def _ceil_page(tokens: int, page: int) -> int:
    return -(-tokens // page) * page


class _Budget:
    """A prefill batch's budgets (tokens): KV room, ``max_prefill_tokens`` input and
    ``chunked_prefill_size`` chunk."""

    __slots__ = ("chunk", "clip", "input", "page", "room")

    def __init__(self, room: float, max_input: int, chunk: int, page: int, clip: int) -> None:
        self.room, self.input, self.chunk, self.page, self.clip = room, max_input, chunk, page, clip

    def take(self, extend: int, output_left: int) -> int:
        """Tokens of an ``extend``-token prompt rest the batch takes (0: it stops the batch),
        charging the budgets."""
        page = self.page
        if _ceil_page(extend, page) <= self.chunk:
            n = extend
            reserve = output_left if output_left < self.clip else self.clip
        else:
            n = self.chunk // page * page
            reserve = 0
            if n <= 0:
                return 0
        charged = _ceil_page(n, page)
        if reserve < 0:
            reserve = 0
        if charged + reserve >= self.room or charged > self.input:
            return 0
        self.room -= charged + reserve
        self.input -= charged
        self.chunk -= charged
        return n


class SglangScheduler(BackendKeys):
    """SGLang prefill-or-decode passes, ``PrefillAdder`` budgets, retraction, ``lpm`` order;
    see the module docstring. Keeps the rank's ``new_token_ratio`` and pass cadence."""

    Knobs = SglangKnobs
    EngineKnobs = SglangEngineKnobs
    block_aliases: ClassVar[Mapping[str, str]] = {"page_size": "block_size"}
    # The older mocker accepted SGLang's ``fcfs`` for ``fifo``.
    value_aliases: ClassVar[Mapping[str, Mapping[Any, Any]]] = {"schedule_policy": {"fcfs": "fifo"}}

    # With speculative decoding, a request finishing its prompt also runs verification (its
    # first pass emits 1 + accepted drafts and is timed as a decode too).
    verifies_prefill = False
    # Not yet checked on the reference's SGLang core: a retracted request re-prefills as a
    # prompt, as before.
    recompute_decodes = False
    default_block_size = 1

    __slots__ = (
        "chunk_size",
        "clip",
        "decodes_since_prefill",
        "interval",
        "lpm",
        "max_model_len",
        "max_prefill_tokens",
        "max_running",
        "ratio",
        "ratio_floor",
        "ratio_start",
        "ratio_step",
    )

    def __init__(self, args: Any) -> None:
        sg = args.sglang
        self.max_running = args.max_num_seqs
        self.lpm = sg.schedule_policy == "lpm"
        self.max_prefill_tokens = sg.max_prefill_tokens
        self.chunk_size = sg.chunked_prefill_size
        self.clip = sg.clip_max_new_tokens
        self.ratio_start = _INIT_NEW_TOKEN_RATIO * sg.schedule_conservativeness
        self.ratio_floor = self.ratio_start * _MIN_NEW_TOKEN_RATIO_FACTOR
        self.ratio_step = (self.ratio_start - self.ratio_floor) / _NEW_TOKEN_RATIO_DECAY_PASSES
        self.ratio = self.ratio_start
        self.interval = args.prefill_decode_interval
        self.decodes_since_prefill = self.interval
        self.max_model_len = args.max_model_len

    def refusal(self, req: Request) -> str | None:
        limit = self.max_model_len
        if limit is not None:
            if req.isl >= limit:
                return "prompt_exceeds_max_model_len"
            req.osl = min(req.osl, limit - req.isl)
        return None

    def victim(self, running: Sequence[Request], needy: Request) -> int:
        best = 0
        for i, req in enumerate(running):
            b = running[best]
            if req.generated < b.generated or (req.generated == b.generated and req.isl > b.isl):
                best = i
        return best

    def compose(self, rank: PassBuilder, now_ms: float) -> None:
        preemptions = rank.preemptions
        oom = False
        prefilled = False
        gated = (
            self.interval
            and self.decodes_since_prefill < self.interval
            and any(r.computed >= r.isl for r in rank.running)
        )
        if not gated:
            prefilled, oom = self._prefill_batch(rank, now_ms)
        if not prefilled:
            self._decode(rank, now_ms)
        if oom or rank.preemptions != preemptions:
            self.ratio = self.ratio_start
        ratio = self.ratio - self.ratio_step
        self.ratio = ratio if ratio > self.ratio_floor else self.ratio_floor
        if prefilled:
            self.decodes_since_prefill = 0
        elif rank.pass_tokens:
            self.decodes_since_prefill += 1

    def steady_prompt(self, rank: PassBuilder) -> tuple[int, bool]:
        """A chunk's size follows the KV room left each pass: no prompt runs."""
        return 0, False

    def decode_run(self, passes: int) -> None:
        # As ``compose`` after each decode pass (no retraction in a run): the ratio decays one
        # step a pass, subtracted pass by pass so that it is the same float.
        floor, step = self.ratio_floor, self.ratio_step
        ratio = self.ratio
        for _ in range(passes):
            if ratio <= floor:
                break
            ratio -= step
            if ratio <= floor:
                ratio = floor
        self.ratio = ratio
        self.decodes_since_prefill += passes

    def pass_state(self) -> object:
        # The ratio decays pass by pass, empty passes too, and the room it leaves grows.
        return self.ratio, self.decodes_since_prefill

    def _prefill_batch(self, rank: PassBuilder, now_ms: float) -> tuple[bool, bool]:
        """Compose a prefill batch; returns (any prompt tokens granted, out of memory)."""
        running = rank.running
        waiting = rank.waiting
        page = rank.block_size
        chunked = None
        for req in running:
            if req.computed < req.isl:
                chunked = req
                break
        if chunked is None and (not waiting or waiting[0].prebuilt):
            return False, False
        if self.lpm and chunked is None:
            self._order_lpm(rank)
        clip = self.clip
        ratio = self.ratio
        room = rank.kv_available() * page
        for req in running:
            if req is not chunked:
                left = req.osl - req.generated
                room -= (left if left < clip else clip) * ratio
        if chunked is not None:
            # KV it already holds past its computed tokens needs no room: a transferred prompt
            # re-admitted after a retraction holds its whole prompt while it is recomputed.
            room += max(0, chunked.n_blocks - -(-chunked.computed // page)) * page
        budget = _Budget(room, self.max_prefill_tokens, self.chunk_size, page, clip)
        granted = 0
        if chunked is not None:
            n = budget.take(chunked.isl - chunked.computed, chunked.osl - chunked.generated)
            if n <= 0:
                return False, False
            if -(-(chunked.computed + n) // page) - chunked.n_blocks > rank.kv_available():
                return False, True
            rank.grant(chunked, n)
            granted = 1
            if chunked.computed < chunked.isl:
                return True, False
        decoding = sum(1 for r in running if r.computed >= r.isl)
        while (
            waiting
            and not waiting[0].prebuilt
            and decoding + granted < self.max_running
            and budget.chunk > 0
        ):
            req = waiting[0]
            match = rank.prefix_match(req)
            extend = req.isl + req.generated - match.cached_tokens
            n = budget.take(extend, req.osl - req.generated)
            if n <= 0:
                break
            need = -(-(match.cached_tokens + n) // page) - match.n_active
            if need > rank.kv_available():
                return granted > 0, True
            rank.admit(req, match, now_ms)
            rank.grant(req, n)
            granted += 1
        return granted > 0, False

    def _decode(self, rank: PassBuilder, now_ms: float) -> None:
        """One token for every running request; transferred prompts join first."""
        waiting = rank.waiting
        running = rank.running
        while waiting and waiting[0].prebuilt and len(running) < self.max_running:
            req = waiting[0]
            match = rank.prefix_match(req)
            if match.blocks_needed > rank.kv_available():
                break
            rank.admit(req, match, now_ms)
        grant = rank.grant
        # Row k of the batch is snapshot[k] until a retraction removes one; until then each
        # run of decoding requests takes its tokens in one step.
        snapshot = running.copy()
        preemptions = rank.preemptions
        k = 0
        while k < len(snapshot):
            if rank.preemptions == preemptions:
                stop = rank.grant_decoding(k, len(snapshot))
                if stop > k:
                    k = stop
                    continue
            req = snapshot[k]
            k += 1
            if req.in_batch and req.computed >= req.isl - (1 if req.prebuilt else 0):
                grant(req, req.isl + req.generated - req.computed)

    def _order_lpm(self, rank: PassBuilder) -> None:
        waiting = rank.waiting
        if len(waiting) > _LPM_MAX_WAITING:
            return
        page = rank.block_size
        dup_blocks = -(-_IN_BATCH_PREFIX_TOKENS // page)
        seen: set[tuple[int, ...]] = set()
        scored = []
        for i, req in enumerate(waiting):
            cached = rank.prefix_match(req).cached_tokens
            late = False
            if cached <= _IN_BATCH_PREFIX_TOKENS and req.isl >= dup_blocks * page:
                head = tuple(req.prompt_keys[:dup_blocks])
                late = len(head) == dup_blocks and head in seen
                seen.add(head)
            scored.append((late, -cached, i, req))
        scored.sort(key=lambda s: s[:3])
        waiting.clear()
        waiting.extend(s[3] for s in scored)

    def steady_decode(self, rank: PassBuilder) -> bool:
        if rank.waiting:
            return False
        if self.interval and self.decodes_since_prefill < self.interval:
            return False
        return all(r.computed >= r.isl for r in rank.running)
