"""``SeededDraws(seed)``: the draws of ``numpy.random.default_rng(seed)`` that the routers make
(``integers(n)`` and ``random()``), number for number, without importing ``numpy.random``.

Importing ``numpy.random`` costs about 8 ms of CPU, as much as a KV-router replay's few thousand
tie-breaking draws; this module computes the same stream in Python, at about the cost of a
numpy scalar call a draw:

- ``SeedSequence(seed)`` (a 4-word pool of 32-bit hash mixes of the seed's 32-bit words), whose
  first four 64-bit words of state seed PCG64 (128-bit state and increment);
- PCG64: a 128-bit linear congruential step, then the XSL-RR output (the two halves xored and
  rotated right by the top 6 bits);
- ``random()``: the top 53 bits of a 64-bit output, times 2**-53;
- ``integers(n)`` (``n`` up to 2**32): Lemire's multiply-and-reject on 32-bit draws, which
  take the low then the high half of one 64-bit output, the high half kept for the next one.

``tests/sim/test_seeded_draws.py`` checks the stream against numpy's.
"""

from __future__ import annotations

from typing import Protocol


class Draws(Protocol):
    """What a router draws from: ``SeededDraws`` or a numpy ``Generator``."""

    def integers(self, n: int) -> int: ...

    def random(self) -> float: ...


_M32 = 0xFFFFFFFF
_M64 = 0xFFFFFFFFFFFFFFFF
_M128 = (1 << 128) - 1
_PCG_MULTIPLIER = 0x2360ED051FC65DA44385DF649FCCF645
# SeedSequence's hash constants.
_INIT_A, _MULT_A = 0x43B0D7E5, 0x931E8875
_INIT_B, _MULT_B = 0x8B51F9DD, 0x58F38DED
_MIX_L, _MIX_R = 0xCA01F9DD, 0x4973F715
_POOL_WORDS = 4


class SeededDraws:
    """The ``integers(n)`` / ``random()`` stream of ``numpy.random.default_rng(seed)``."""

    __slots__ = ("_half", "_inc", "_state")

    def __init__(self, seed: int) -> None:
        if seed < 0:
            raise ValueError(f"seed must be non-negative, got {seed}")
        words = _seed_state(seed)  # eight 32-bit words: four 64-bit ones, little-endian
        w64 = [words[2 * i] | words[2 * i + 1] << 32 for i in range(4)]
        initstate, initseq = w64[0] << 64 | w64[1], w64[2] << 64 | w64[3]
        # PCG's seeding: state 0, one step (the state becomes the increment), the initial
        # state added, one more step.
        self._inc = (initseq << 1 | 1) & _M128
        self._state = ((self._inc + initstate) * _PCG_MULTIPLIER + self._inc) & _M128
        self._half: int | None = None  # the high half of the last 64-bit output, unused yet

    def _next64(self) -> int:
        state = self._state = (self._state * _PCG_MULTIPLIER + self._inc) & _M128
        x = (state >> 64) ^ (state & _M64)
        rot = state >> 122
        return ((x >> rot) | (x << (64 - rot))) & _M64

    def _next32(self) -> int:
        half = self._half
        if half is not None:
            self._half = None
            return half
        x = self._next64()
        self._half = x >> 32
        return x & _M32

    def random(self) -> float:
        """A float in [0, 1)."""
        return (self._next64() >> 11) * (1.0 / 9007199254740992.0)

    def integers(self, n: int) -> int:
        """An int in [0, n), for 1 <= n <= 2**32."""
        if not 1 <= n <= 1 << 32:
            raise ValueError(f"integers({n}): n must be 1 to 2**32")
        if n == 1:
            return 0  # numpy draws nothing for a range of one value
        if n == 1 << 32:
            return self._next32()
        m = self._next32() * n
        leftover = m & _M32
        if leftover < n:
            threshold = ((1 << 32) - n) % n
            while leftover < threshold:
                m = self._next32() * n
                leftover = m & _M32
        return m >> 32


def _seed_state(seed: int) -> list[int]:
    """``SeedSequence(seed).generate_state(8)``: eight 32-bit words."""
    entropy = []
    while True:
        entropy.append(seed & _M32)
        seed >>= 32
        if not seed:
            break
    hash_a = _INIT_A

    def hashmix(value: int) -> int:
        nonlocal hash_a
        value ^= hash_a
        hash_a = hash_a * _MULT_A & _M32
        value = value * hash_a & _M32
        return value ^ value >> 16

    def mix(x: int, y: int) -> int:
        result = (_MIX_L * x - _MIX_R * y) & _M32
        return result ^ result >> 16

    pool = [hashmix(entropy[i] if i < len(entropy) else 0) for i in range(_POOL_WORDS)]
    for src in range(_POOL_WORDS):
        for dst in range(_POOL_WORDS):
            if src != dst:
                pool[dst] = mix(pool[dst], hashmix(pool[src]))
    for src in range(_POOL_WORDS, len(entropy)):
        for dst in range(_POOL_WORDS):
            pool[dst] = mix(pool[dst], hashmix(entropy[src]))
    hash_b = _INIT_B
    out = []
    for i in range(8):
        value = pool[i % _POOL_WORDS] ^ hash_b
        hash_b = hash_b * _MULT_B & _M32
        value = value * hash_b & _M32
        out.append(value ^ value >> 16)
    return out
