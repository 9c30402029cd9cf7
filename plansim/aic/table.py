"""AIConfigurator's per-pass latencies on a fixed grid, built once per spec and cached on disk.

A replay asks for hundreds of thousands of pass times; the SDK answers one decode step in
about 0.1 ms, so the replay interpolates a table instead. Three tables, all in milliseconds:

- ``prefill_ms[b, n, p]``: a pass prefilling ``b`` requests of ``n`` new tokens each on top of
  ``p`` cached (or earlier-chunk) tokens each; the SDK's ``predict_prefill_latency(b, n + p, p)``.
- ``decode_ms[B, c]``: a decode step of ``B`` requests at mean context ``c``; the SDK's
  ``predict_decode_latency(B, c)``.
- ``shared_ms[x]``: the non-attention (weights-bound) part of a pass over ``x`` tokens; the SDK's
  ``mixed_step_breakdown(x, 0, x)``. A mixed pass runs its prefill and decode tokens through the
  weights once, so its decode requests add ``decode_ms - (shared(T) + shared(B) - shared(T + B))``.

How the grid was chosen. Axes are geometric with four points per octave (1, 1.25, 1.5, 1.75 x
2^k), because the SDK's latencies grow roughly linearly in tokens and requests, so relative
spacing keeps the relative interpolation error even across four orders of magnitude. The SDK's
GEMM tables step up right after round token counts (16, 48, 160, 1024, ...), so the token and
request axes also carry each point's successor (1024 and 1025), which puts those steps on cell
edges instead of smearing them across a cell. Prefix and context axes (attention, smooth in the
SDK) need no successors; prefix is sampled at two points per octave from 16, plus 0. Bounds:
requests up to ``MAX_BATCH``; tokens per request, prefix and context up to the model's context
length rounded up to a power of two; prefill cells beyond ``MAX_PASS_TOKENS`` tokens (no engine
schedules them) are not asked, but extrapolated linearly in batch from the last asked cell.
Queries beyond the bounds extrapolate linearly from the edge cells, like the NPZ model.

Monotone. The SDK is not monotone everywhere (its GEMM rows make a pass of 3 requests up to 5 %
faster than one of 2). The table is made non-decreasing in batch and tokens per request
(prefill), batch and context (decode) and tokens (shared): along each axis in turn every value
becomes the midpoint of the running maximum from below and the running minimum from above. Where
the SDK is already monotone both equal its answer, so those grid points keep the SDK's value
exactly; elsewhere the value moves by at most half the dip it sits in.
``docs/aic.md`` gives the resulting interpolation error against direct SDK calls.

Cache: ``$PLANSIM_CACHE_DIR`` (default ``$XDG_CACHE_HOME/plansim``, else ``~/.cache/plansim``)
``/aic/<name>-<key>.npz``, where the key hashes every input (the spec with its resolved version,
the grid bounds, ``TABLE_FORMAT`` and the SDK version). Written to a temporary file and renamed,
so concurrent builders never leave a half-written table.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from itertools import count
from pathlib import Path

import numpy as np

from plansim.aic import sdk
from plansim.aic.spec import AicSpec
from plansim.io import atomic_open

TABLE_FORMAT = 1  # bump when the grid or the table's meaning changes
MAX_BATCH = 1024
MAX_PASS_TOKENS = 1 << 18
PER_OCTAVE = 4
PREFIX_PER_OCTAVE = 2
MIN_PREFIX = 16
# ``on_rows(done, total)``: rows of the grid asked of the SDK so far, of all of them.
RowsDone = Callable[[int, int], None]


@dataclass(frozen=True, slots=True)
class AicTable:
    """The grids and values (ms) of one spec; ``key`` names the inputs they came from."""

    key: str
    prefill_batch: np.ndarray
    prefill_tokens: np.ndarray
    prefill_prefix: np.ndarray
    prefill_ms: np.ndarray
    decode_batch: np.ndarray
    decode_context: np.ndarray
    decode_ms: np.ndarray
    shared_tokens: np.ndarray
    shared_ms: np.ndarray


@dataclass(frozen=True, slots=True)
class GridBounds:
    """Largest batch, tokens per pass and context (tokens) the grid covers."""

    max_batch: int
    max_pass_tokens: int
    max_context: int


def octave_axis(lo: int, hi: int, per_octave: int, *, successors: bool = False) -> np.ndarray:
    """Integers ``round(2^k * (1 + i / per_octave))`` in ``[lo, hi]`` plus ``lo`` and ``hi``
    (and, with ``successors``, each point + 1), ascending, as float64."""
    points = {lo, hi}
    k = 0
    while 2**k <= hi:
        for i in range(per_octave):
            v = int(round(2**k * (1 + i / per_octave)))
            for w in (v, v + 1) if successors else (v,):
                if lo <= w <= hi:
                    points.add(w)
        k += 1
    return np.array(sorted(points), dtype=np.float64)


def _pow2_ceil(n: int) -> int:
    return 1 << max(0, int(n) - 1).bit_length()


def grid_bounds(spec: AicSpec) -> GridBounds:
    """The grid's bounds for ``spec``: fixed batch and pass sizes, the model's context length."""
    config = sdk.model_config(spec.model)
    context = (
        config.get("max_position_embeddings")
        or config.get("text_config", {}).get("max_position_embeddings")
        or 32768
    )
    return GridBounds(MAX_BATCH, MAX_PASS_TOKENS, _pow2_ceil(int(context)))


def table_key(spec: AicSpec, bounds: GridBounds) -> str:
    """Hash of every input the table depends on (spec, bounds, format, SDK version)."""
    return input_key(
        {
            "format": TABLE_FORMAT,
            "sdk": sdk.sdk_version(),
            "spec": spec.identity(),
            "bounds": [bounds.max_batch, bounds.max_pass_tokens, bounds.max_context],
        }
    )


def input_key(inputs: dict) -> str:
    """A short stable hash of JSON-able ``inputs`` (cache file names)."""
    return hashlib.sha256(json.dumps(inputs, sort_keys=True).encode()).hexdigest()[:16]


def cache_dir() -> Path:
    """Where tables are cached: ``$PLANSIM_CACHE_DIR``, ``$XDG_CACHE_HOME/plansim`` or
    ``~/.cache/plansim``, then ``/aic``."""
    root = os.environ.get("PLANSIM_CACHE_DIR")
    if not root:
        xdg = os.environ.get("XDG_CACHE_HOME")
        root = str(Path(xdg) / "plansim") if xdg else str(Path.home() / ".cache" / "plansim")
    return Path(root) / "aic"


def cache_path(spec: AicSpec, key: str) -> Path:
    name = re.sub(
        r"[^A-Za-z0-9.]+", "-", f"{spec.model}-{spec.system}-{spec.backend}-tp{spec.tp_size}"
    )
    return cache_dir() / f"{name}-{key}.npz"


def load_table(spec: AicSpec, on_rows: RowsDone | None = None) -> AicTable:
    """The table of ``spec``: from the cache when present, else built (``on_rows`` as
    ``sdk_table`` calls it) and cached."""
    bounds = grid_bounds(spec)
    key = table_key(spec, bounds)
    path = cache_path(spec, key)
    table = _read(path, key)
    if table is None:
        table = build_table(spec, bounds, key, on_rows)
        _write(path, table)
    return table


def build_table(
    spec: AicSpec, bounds: GridBounds, key: str = "", on_rows: RowsDone | None = None
) -> AicTable:
    """Ask the SDK for every grid point of ``spec`` and make the answers monotone (seconds;
    ``load_table`` caches the result)."""
    return monotone_table(sdk_table(spec, bounds, key, on_rows))


def sdk_table(
    spec: AicSpec, bounds: GridBounds, key: str = "", on_rows: RowsDone | None = None
) -> AicTable:
    """The SDK's answers at every grid point, as they are. ``on_rows(done, total)`` is called
    after each row of the grid: a prefill row per token count, a decode row per batch size,
    the shared-pass row (progress displays)."""
    handle = sdk.engine(spec)
    batch = octave_axis(1, bounds.max_batch, PER_OCTAVE, successors=True)
    tokens = octave_axis(1, bounds.max_context, PER_OCTAVE, successors=True)
    prefix = np.concatenate(([0.0], octave_axis(MIN_PREFIX, bounds.max_context, PREFIX_PER_OCTAVE)))
    context = octave_axis(1, bounds.max_context, PER_OCTAVE)
    shared_tokens = octave_axis(
        1, bounds.max_pass_tokens + bounds.max_batch, PER_OCTAVE, successors=True
    )
    rows = count(1)
    total = tokens.size + batch.size + 1

    def row_done() -> None:
        if on_rows is not None:
            on_rows(next(rows), total)

    with sdk.quiet():
        prefill = _prefill_grid(handle, batch, tokens, prefix, bounds.max_pass_tokens, row_done)
        decode = np.empty((batch.size, context.size))
        for i, b in enumerate(batch):
            decode[i] = [handle.predict_decode_latency(int(b), int(c)) for c in context]
            row_done()
        shared = np.array(
            [handle.mixed_step_breakdown(int(x), 0, int(x), 2)[1] for x in shared_tokens]
        )
        row_done()
    return AicTable(
        key=key,
        prefill_batch=batch,
        prefill_tokens=tokens,
        prefill_prefix=prefix,
        prefill_ms=prefill,
        decode_batch=batch,
        decode_context=context,
        decode_ms=decode,
        shared_tokens=shared_tokens,
        shared_ms=shared,
    )


def monotone_table(raw: AicTable) -> AicTable:
    """``raw`` non-decreasing in batch and tokens (prefill), batch and context (decode), tokens
    (shared)."""
    return replace(
        raw,
        prefill_ms=monotone(raw.prefill_ms, axes=(0, 1)),
        decode_ms=monotone(raw.decode_ms, axes=(0, 1)),
        shared_ms=monotone(raw.shared_ms, axes=(0,)),
    )


def _prefill_grid(
    handle: object,
    batch: np.ndarray,
    tokens: np.ndarray,
    prefix: np.ndarray,
    max_pass_tokens: int,
    row_done: Callable[[], None],
) -> np.ndarray:
    out = np.empty((batch.size, tokens.size, prefix.size))
    predict = handle.predict_prefill_latency  # type: ignore[attr-defined]
    for j, n in enumerate(tokens.astype(int)):
        last = 0  # last batch index whose pass fits in max_pass_tokens
        for i, b in enumerate(batch.astype(int)):
            if i and b * n > max_pass_tokens:
                # Linear in batch beyond the largest schedulable pass.
                out[i:, j, :] = out[last, j, :] * (batch[i:, None] / batch[last])
                break
            out[i, j, :] = [predict(int(b), int(n + p), int(p)) for p in prefix.astype(int)]
            last = i
        row_done()
    return out


def monotone(values: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """``values`` made non-decreasing along each of ``axes`` in turn: each value becomes the
    midpoint of the running maximum from below and the running minimum from above. Both are
    order-preserving, so monotonicity along earlier axes survives later ones."""
    out = np.asarray(values, dtype=np.float64)
    for axis in axes:
        upper = np.maximum.accumulate(out, axis=axis)
        lower = np.flip(np.minimum.accumulate(np.flip(out, axis=axis), axis=axis), axis=axis)
        out = (upper + lower) / 2.0
    return out


_FIELDS = (
    "prefill_batch",
    "prefill_tokens",
    "prefill_prefix",
    "prefill_ms",
    "decode_batch",
    "decode_context",
    "decode_ms",
    "shared_tokens",
    "shared_ms",
)


def _read(path: Path, key: str) -> AicTable | None:
    try:
        with np.load(path, allow_pickle=False) as z:
            if str(z["key"]) != key:
                return None
            return AicTable(key=key, **{f: np.asarray(z[f], dtype=np.float64) for f in _FIELDS})
    except (OSError, KeyError, ValueError):
        return None


def _write(path: Path, table: AicTable) -> None:
    try:
        with atomic_open(path) as f:
            np.savez(f, key=np.array(table.key), **{name: getattr(table, name) for name in _FIELDS})
    except OSError:
        pass  # an unwritable cache only costs the next run the build time
