"""Speculative (MTP) decoding: how many tokens a verification pass emits.

With ``aic_nextn`` draft tokens, a pass emits the base token plus the leading run of accepted
drafts: draft ``i`` is accepted with probability ``aic_nextn_accept_rates[i]`` given that every
earlier one was (the reference's conditional rates; missing trailing rates are 0, extra ones are
ignored, and without rates it uses 0.85, 0.3, 0, ...). Each engine rank draws from its own
stream seeded with ``aic_mtp_seed`` plus the rank's index in its pool, so a replay is
deterministic and matches the reference request by request.

The stream is the reference's: ``StdRng::seed_from_u64`` of the Rust ``rand`` crate, i.e. a
ChaCha12 keystream keyed by eight PCG32 outputs of the seed, read as little-endian 64-bit words;
a draft with rate ``p < 1`` is accepted when the next word is below ``p * 2**64`` (a rate of 1
accepts without drawing). The algorithms are the published ChaCha and PCG ones.

A speculative rank's ``Drafts`` applies this to its passes (a pass's tokens are bursts): a
verification pass's grant reserves KV for the drafts (``reach``), the pass draws each emitting
request's burst in batch order as it is composed (``draw``), and its end keeps the accepted
drafts' KV as computed and gives the rejected drafts' blocks back (``settle``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from plansim.sim.batch import Request
    from plansim.sim.kv import KvCache

DEFAULT_ACCEPT_RATES = (0.85, 0.3, 0.0, 0.0, 0.0)
MAX_NEXTN = 5

_M32 = 0xFFFFFFFF
_M64 = (1 << 64) - 1
_SIGMA = (0x61707865, 0x3320646E, 0x79622D32, 0x6B206574)  # "expand 32-byte k"
_BLOCKS_PER_REFILL = 4  # the Rust generator fills 4 ChaCha blocks (64 words) at a time


def accept_rates(nextn: int, rates: Sequence[float] | None) -> tuple[float, ...]:
    """The per-position rates in force for ``nextn`` drafts (validated, padded or cut)."""
    if not 1 <= nextn <= MAX_NEXTN:
        raise ValueError(f"aic_nextn must be 1..{MAX_NEXTN}, got {nextn}")
    given = tuple(DEFAULT_ACCEPT_RATES if rates is None else rates)
    for i, rate in enumerate(given):
        if not 0.0 <= float(rate) <= 1.0:
            raise ValueError(f"aic_nextn_accept_rates[{i}] must be in [0, 1], got {rate}")
    return tuple(float(r) for r in given[:nextn]) + (0.0,) * max(0, nextn - len(given))


def _pcg32_key(seed: int) -> list[int]:
    """The 32-byte ChaCha key ``seed_from_u64`` derives: eight PCG32 (XSH RR) outputs."""
    state = seed & _M64
    words = []
    for _ in range(8):
        state = (state * 6364136223846793005 + 11634580027462260723) & _M64
        xorshifted = (((state >> 18) ^ state) >> 27) & _M32
        rot = state >> 59
        words.append(((xorshifted >> rot) | (xorshifted << ((-rot) & 31))) & _M32)
    return words


def _chacha12_block(key: list[int], counter: int) -> list[int]:
    """One 16-word ChaCha12 block (stream id 0)."""
    init = [*_SIGMA, *key, counter & _M32, counter >> 32, 0, 0]
    x = init[:]

    def quarter(a: int, b: int, c: int, d: int) -> None:
        xa, xb, xc, xd = x[a], x[b], x[c], x[d]
        xa = (xa + xb) & _M32
        xd ^= xa
        xd = ((xd << 16) | (xd >> 16)) & _M32
        xc = (xc + xd) & _M32
        xb ^= xc
        xb = ((xb << 12) | (xb >> 20)) & _M32
        xa = (xa + xb) & _M32
        xd ^= xa
        xd = ((xd << 8) | (xd >> 24)) & _M32
        xc = (xc + xd) & _M32
        xb ^= xc
        xb = ((xb << 7) | (xb >> 25)) & _M32
        x[a], x[b], x[c], x[d] = xa, xb, xc, xd

    for _ in range(6):  # 12 rounds: 6 column + diagonal double rounds
        quarter(0, 4, 8, 12)
        quarter(1, 5, 9, 13)
        quarter(2, 6, 10, 14)
        quarter(3, 7, 11, 15)
        quarter(0, 5, 10, 15)
        quarter(1, 6, 11, 12)
        quarter(2, 7, 8, 13)
        quarter(3, 4, 9, 14)
    return [(a + b) & _M32 for a, b in zip(x, init)]


class DraftSampler:
    """One rank's acceptance stream. ``tokens()`` is the number of tokens one verification pass
    emits for one request (1 + accepted drafts), before clipping to what the request has left."""

    __slots__ = ("_counter", "_index", "_key", "_words", "rates")

    def __init__(self, rates: Sequence[float], seed: int) -> None:
        self.rates = tuple(rates)
        self._key = _pcg32_key(seed)
        self._counter = 0
        self._words: list[int] = []
        self._index = 0

    def _refill(self) -> None:
        words: list[int] = []
        for _ in range(_BLOCKS_PER_REFILL):
            words.extend(_chacha12_block(self._key, self._counter))
            self._counter += 1
        self._words = words
        self._index = 0

    def next_u64(self) -> int:
        """The next 64-bit word: two 32-bit words, low first (a word pair may straddle a
        refill, as in the Rust block generator)."""
        words, i = self._words, self._index
        if i < len(words) - 1:
            self._index = i + 2
            return words[i] | (words[i + 1] << 32)
        if i >= len(words):
            self._refill()
            self._index = 2
            return self._words[0] | (self._words[1] << 32)
        low = words[i]
        self._refill()
        self._index = 1
        return low | (self._words[0] << 32)

    def accepts(self, rate: float) -> bool:
        """One Bernoulli draw at ``rate``; a rate of 1 accepts without consuming the stream."""
        if rate >= 1.0:
            return True
        return self.next_u64() < int(rate * 18446744073709551616.0)

    def tokens(self) -> int:
        emitted = 1
        for rate in self.rates:
            if not self.accepts(rate):
                break
            emitted += 1
        return emitted


class Drafts:
    """The draft tokens of one speculative rank (``nextn`` drafts a pass, ``rates`` as
    ``accept_rates`` takes them, the rank's stream from ``seed``, KV blocks of ``block_size``
    tokens). ``bursts``: the tokens each emitting request of the pass in flight emits."""

    __slots__ = ("block_size", "bursts", "max_burst", "sampler")

    def __init__(
        self, nextn: int, rates: Sequence[float] | None, seed: int, block_size: int
    ) -> None:
        self.sampler = DraftSampler(accept_rates(nextn, rates), seed)
        self.max_burst = 1 + nextn
        self.block_size = block_size
        self.bursts: list[int] = []

    def reach(self, req: Request, reach: int) -> int:
        """The tokens whose KV a verification pass granting ``req`` up to ``reach`` (its known
        length) writes: its drafts too, as many as it may emit (its output left, at most
        ``1 + nextn``) less the one emitted."""
        lookahead = req.osl - req.generated
        if lookahead > self.max_burst:
            lookahead = self.max_burst
        return reach + lookahead - 1 if lookahead > 1 else reach

    def draw(self, emit: list[Request], draws: list[bool]) -> None:
        """The bursts of a pass's emitting requests ``emit``: ``1 + accepted drafts`` (drawn, in
        batch order, for those whose ``draws`` is True, whose pass verifies drafts; 1 for the
        others), clipped to the output left and to the KV ``reach`` reserved."""
        sampler = self.sampler
        bs = self.block_size
        bursts = []
        for req, draw in zip(emit, draws):
            k = sampler.tokens() if draw else 1
            left = req.osl - req.generated
            if k > left:
                k = left
            while k > 1 and -(-(req.computed + k - 1) // bs) > req.n_blocks:
                k -= 1
            bursts.append(k)
        self.bursts = bursts

    def settle(self, emit: list[Request], cache: KvCache) -> list[int]:
        """The pass's end: each request of ``emit`` emits its burst, whose accepted drafts are
        computed KV too; the blocks reserved for rejected drafts go back to ``cache`` (the KV
        of the last emitted token is computed by the next pass). Returns the bursts."""
        bs = self.block_size
        bursts = self.bursts
        for req, k in zip(emit, bursts):
            req.generated += k
            req.computed += k - 1
            spare = req.n_blocks - -(-req.computed // bs)
            if spare > 0:
                cache.release((), spare, ())
                req.n_blocks -= spare
        return bursts


__all__ = ["DEFAULT_ACCEPT_RATES", "MAX_NEXTN", "DraftSampler", "Drafts", "accept_rates"]
