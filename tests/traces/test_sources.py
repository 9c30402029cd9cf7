"""Reading trace bytes: inflated pieces, whole-line blocks and their line numbers."""

from __future__ import annotations

import gzip
import io

from plansim.traces.sources import _decompressed, text_chunks


def test_small_pieces_inflate_every_byte_of_every_member():
    # Zeros inflate ~1000-fold: most pieces end at the size cap, with input still to inflate.
    members = [b"\0" * 300_000, b"abc\n" * 50_000, b"\0" * 70_001]
    raw = b"".join(gzip.compress(m) for m in members)
    pieces = list(_decompressed(io.BytesIO(raw), True, in_bytes=1_000))
    assert b"".join(pieces) == b"".join(members)
    assert max(len(p) for p in pieces) <= 1_000


def test_blocks_hold_whole_lines_numbered_from_one(tmp_path):
    lines = [f'{{"row": {i}, "pad": "{"x" * (i % 50)}"}}'.encode() for i in range(3_000)]
    path = tmp_path / "t.jsonl.gz"
    path.write_bytes(gzip.compress(b"\n".join(lines)))  # no final newline
    seen = []
    for first_line, block in text_chunks(path, chunk_bytes=4_096):
        got = block.split(b"\n")
        if got[-1] == b"":
            got.pop()
        assert first_line == len(seen) + 1
        seen.extend(got)
    assert seen == lines
