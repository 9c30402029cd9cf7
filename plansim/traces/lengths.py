"""The length rules every trace reader applies to its rows, so that no prompt is silently cut
and no request is past plansim's bounds.

- A row's prompt must fit in its hash blocks: ``input_length <= len(hash_ids) *
  trace_block_size``, as the reference replay requires (``trace line 1 input_length 5000
  exceeds hash_ids capacity 512``). Formats whose hash count is fixed by the length (Dynamo's
  ``ceil(input_length / trace_block_size)``) check that in their reader.
- A row's prompt and output are each at most ``limits.MAX_REQUEST_TOKENS`` tokens.

``check_lengths`` applies both to a reader's columns at once (numpy, no per-row Python) and
raises one ``TraceError`` naming the file, the line and the field of the first row that breaks
one. Hash ids past a prompt's last block hold none of its tokens: the reference accepts them
(its own test traces have them) and so does plansim; ``drop_extra_hashes`` drops them.
"""

from __future__ import annotations

import numpy as np

from plansim.errors import TraceError
from plansim.limits import MAX_REQUEST_TOKENS


def check_lengths(
    source: str,
    line: np.ndarray,
    isl_tokens: np.ndarray,
    osl_tokens: np.ndarray,
    *,
    isl_field: str,
    osl_field: str,
    hash_counts: np.ndarray | None = None,
    block_size: int = 0,
    hashes_field: str = "hash_ids",
    isl_from_hashes: np.ndarray | None = None,
) -> None:
    """Refuse the first row (in file order) whose prompt is longer than its ``hash_counts``
    blocks of ``block_size`` tokens hold (when ``hash_counts`` is given), or whose prompt or
    output is over ``MAX_REQUEST_TOKENS``. ``line``: each row's line; ``*_field``: the names
    the format gives the columns; ``isl_from_hashes`` marks rows without a length, whose prompt
    is their blocks' capacity (a bound broken there names ``hashes_field``). A negative output
    (a window row without one) is not checked.
    """
    # As given (int64, or float64 where a CSV reader has not converted them yet).
    isl, osl = np.asarray(isl_tokens), np.asarray(osl_tokens)
    over_capacity = None
    if hash_counts is not None:
        capacity = np.asarray(hash_counts, dtype=np.int64) * block_size
        over_capacity = isl > capacity
    long_prompt = isl > MAX_REQUEST_TOKENS
    long_output = osl > MAX_REQUEST_TOKENS
    bad = long_prompt | long_output
    if over_capacity is not None:
        bad |= over_capacity
    if not bad.any():
        return
    row = int(np.argmax(bad))

    def fail(message: str, field: str) -> TraceError:
        return TraceError(message, source=source, line=int(line[row]), field=field)

    if over_capacity is not None and over_capacity[row]:
        n = int(hash_counts[row])
        raise fail(
            f"{isl_field} {int(isl[row])} exceeds {hashes_field} capacity "
            f"{n * block_size} ({n} hash id{'' if n == 1 else 's'} of "
            f"{block_size} tokens); the prompt would be cut",
            isl_field,
        )
    if long_prompt[row] and isl_from_hashes is not None and isl_from_hashes[row]:
        raise fail(
            f"{int(hash_counts[row]):,} hash ids of {block_size} tokens make a prompt of "
            f"{int(isl[row]):,} tokens, over plansim's bound of {MAX_REQUEST_TOKENS:,} "
            "tokens per request",
            hashes_field,
        )
    field, value = (isl_field, isl[row]) if long_prompt[row] else (osl_field, osl[row])
    raise fail(
        f"{field} {int(value):,} tokens is over plansim's bound of "
        f"{MAX_REQUEST_TOKENS:,} tokens per request",
        field,
    )


def drop_extra_hashes(
    raw_hashes: np.ndarray, hash_counts: np.ndarray, isl_tokens: np.ndarray, block_size: int
) -> tuple[np.ndarray, np.ndarray]:
    """``(raw_hashes, hash_counts)`` without the hash ids past each prompt's last block (CSR in
    row order)."""
    needed = -(-np.asarray(isl_tokens, dtype=np.int64) // block_size)
    if not np.any(needed < hash_counts):
        return raw_hashes, hash_counts
    owner = np.repeat(np.arange(hash_counts.size), hash_counts)
    start = np.concatenate(([0], np.cumsum(hash_counts)[:-1]))
    position = np.arange(raw_hashes.size) - np.repeat(start, hash_counts)
    return raw_hashes[position < needed[owner]], needed
