"""The bulk path of the Dynamo trace reader (``plansim.traces.dynamo``): a block of well-formed
rows parsed by pyarrow's JSON reader against the typed fields replay needs, the value rules
checked in bulk. Its own module so that pyarrow's JSON reader and compute kernels are imported
only when a trace is large enough to use them."""

from __future__ import annotations

import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from plansim.limits import MAX_REQUEST_TOKENS
from plansim.traces.dynamo_agents import ToolLink, tool_link
from plansim.traces.dynamo_batch import (
    REQUEST_END,
    SCHEMA,
    SKIPPED_EVENT_TYPES,
    TOOL_END,
    Batch,
    event_of,
)

# The fields replay reads, typed as the format defines them; pyarrow rejects a row whose value
# has another JSON type, which sends the block to the per-row validator. Other fields are ignored.
_REPLAY = pa.struct(
    [
        ("trace_block_size", pa.int64()),
        ("input_length", pa.int64()),
        ("input_sequence_hashes", pa.list_(pa.uint64())),
    ]
)
_REQUEST = pa.struct(
    [
        ("request_id", pa.string()),
        ("model", pa.string()),
        ("request_received_ms", pa.float64()),
        ("output_tokens", pa.int64()),
        ("ttft_ms", pa.float64()),
        ("total_time_ms", pa.float64()),
        ("replay", _REPLAY),
    ]
)
_RECORD = [
    ("schema", pa.string()),
    ("event_type", pa.string()),
    ("event_time_unix_ms", pa.float64()),
    ("agent_context", pa.struct([("session_id", pa.string()), ("parent_session_id", pa.string())])),
    ("request", _REQUEST),
]
# One schema per row form: a bare record, or the writer's {"timestamp", "event"} envelope.
_PARSE_BARE = pj.ParseOptions(
    explicit_schema=pa.schema(_RECORD), unexpected_field_behavior="ignore"
)
_PARSE_ENVELOPE = pj.ParseOptions(
    explicit_schema=pa.schema([("event", pa.struct(_RECORD))]), unexpected_field_behavior="ignore"
)
_READ = pj.ReadOptions(block_size=1 << 20)
# The system allocator hands freed parse buffers back at once; pyarrow's default pool keeps
# them cached per thread, which costs ~80 MB of peak RSS on a 1M-row trace. Every call that
# allocates is given this pool, compute kernels included.
_POOL = pa.system_memory_pool()


def _values_ok(b: Batch, strict: bool) -> bool:
    """The value rules the per-row path checks row by row, in bulk (types were checked by the
    parser)."""
    if np.any(b.input_length < 0) or np.any(b.block_size <= 0):
        return False
    if np.any(b.block_size > MAX_REQUEST_TOKENS):
        return False
    if np.any(b.output_tokens < (0 if strict else -1)):
        return False
    if not np.array_equal(b.counts, -(-b.input_length // np.maximum(b.block_size, 1))):
        return False
    for arr in (b.received, b.ttft, b.total, b.event_time):
        if not np.all(np.isnan(arr) | ((arr >= 0) & np.isfinite(arr))):
            return False
    return not (strict and np.any(np.isnan(b.received)))


def arrow_batch(block: bytes, source: str, first_line: int, strict: bool) -> Batch | None:
    """Parse a block of well-formed rows with pyarrow; ``None`` when anything is unusual."""
    n_lines = block.count(b"\n") + (0 if block.endswith(b"\n") else 1)
    # pyarrow skips blank lines and splits "}{": then rows no longer map to lines.
    if b"}{" in block:
        return None
    # The first row says which form the block uses; a block mixing forms fails the null checks
    # below and goes to the per-row path.
    try:
        first = orjson.loads(block[: block.find(b"\n")] if n_lines > 1 else block)
    except orjson.JSONDecodeError:
        return None
    envelope = isinstance(first, dict) and isinstance(first.get("event"), dict)
    try:
        table = pj.read_json(
            pa.BufferReader(block),
            read_options=_READ,
            parse_options=_PARSE_ENVELOPE if envelope else _PARSE_BARE,
            memory_pool=_POOL,
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    if table.num_rows != n_lines:
        return None
    table = table.combine_chunks(memory_pool=_POOL)
    if envelope:
        row = table.column("event").chunk(0)
        if row.null_count:
            return None
    else:
        row = pa.StructArray.from_arrays(
            [table.column(name).chunk(0) for name, _ in _RECORD], names=[n for n, _ in _RECORD]
        )
    schema = pc.struct_field(row, "schema")
    if schema.null_count or not pc.all(pc.equal(schema, SCHEMA, memory_pool=_POOL)).as_py():
        return None
    event_type = pc.struct_field(row, "event_type")
    if event_type.null_count:
        return None
    is_end = pc.equal(event_type, REQUEST_END, memory_pool=_POOL)
    skipped: dict[str, int] = {}
    n_end = pc.sum(is_end).as_py() or 0
    if n_end != len(row):
        for item in pc.value_counts(
            pc.filter(event_type, pc.invert(is_end), memory_pool=_POOL)
        ).to_pylist():
            if item["values"] not in SKIPPED_EVENT_TYPES:
                return None
            skipped[item["values"]] = item["counts"]
        row = pc.filter(row, is_end, memory_pool=_POOL)
    tools: list[ToolLink] = []
    if strict and any(t in skipped for t in TOOL_END):
        tool_rows = np.flatnonzero(
            pc.is_in(event_type, pa.array(sorted(TOOL_END))).to_numpy(zero_copy_only=False)
        )
        lines = block.split(b"\n")
        for i in tool_rows.tolist():
            link = tool_link(event_of(orjson.loads(lines[i])), source, first_line + i)
            if link is not None:
                tools.append(link)
    index = np.flatnonzero(is_end.to_numpy(zero_copy_only=False))
    req = pc.struct_field(row, "request")
    rp = pc.struct_field(req, "replay")
    rid = pc.struct_field(req, "request_id")
    bsz = pc.struct_field(rp, "trace_block_size")
    isl = pc.struct_field(rp, "input_length")
    hs = pc.struct_field(rp, "input_sequence_hashes")
    received = pc.struct_field(req, "request_received_ms")
    osl = pc.struct_field(req, "output_tokens")
    if req.null_count or rp.null_count or rid.null_count or bsz.null_count or isl.null_count:
        return None
    if hs.null_count or (strict and (received.null_count or osl.null_count)):
        return None
    flat = pc.list_flatten(hs)
    if flat.null_count:
        return None
    batch = Batch(
        line=first_line + index,
        request_id=rid,
        received=_float_column(received),
        output_tokens=pc.coalesce(osl, pa.scalar(-1, pa.int64()), memory_pool=_POOL).to_numpy(),
        block_size=bsz.to_numpy(),
        input_length=isl.to_numpy(),
        counts=pc.list_value_length(hs, memory_pool=_POOL).to_numpy().astype(np.int64),
        hashes=flat.to_numpy(),
        ttft=_float_column(pc.struct_field(req, "ttft_ms")),
        total=_float_column(pc.struct_field(req, "total_time_ms")),
        event_time=_float_column(pc.struct_field(row, "event_time_unix_ms")),
        agent=pc.is_valid(pc.struct_field(row, "agent_context"), memory_pool=_POOL).to_numpy(
            zero_copy_only=False
        ),
        skipped=skipped,
        tools=tools,
    )
    if strict and batch.agent.any():
        ctx = pc.struct_field(row, "agent_context")
        session = pc.struct_field(ctx, "session_id")
        if session.null_count != ctx.null_count:
            return None  # an agent_context without session_id: the per-row path names it
        batch.session = session.to_numpy(zero_copy_only=False)
        batch.parent = pc.struct_field(ctx, "parent_session_id").to_numpy(zero_copy_only=False)
        batch.model = pc.struct_field(req, "model").to_numpy(zero_copy_only=False)
    return batch if _values_ok(batch, strict) else None


def _float_column(arr: pa.Array) -> np.ndarray:
    filled = pc.coalesce(arr, pa.scalar(float("nan"), arr.type), memory_pool=_POOL)
    return filled.to_numpy().astype(np.float64, copy=False)
