"""Reader for agentic Mooncake traces (``dynamo.agentic_mooncake`` version 2): request rows with
explicit dependencies.

The first row is the header ``{"schema": "dynamo.agentic_mooncake", "version": 2,
"block_size": N, "hash_id_scope": "local", "source": {...}}`` (``block_size``: tokens per hash
id; ``source`` is provenance only). Every later row is one request:

- ``request_id``, ``session_id`` (strings), optional ``play_id`` (a play is one agent run:
  a request may only depend on requests of its play) and ``model`` (one per session);
- ``input_length`` (alias ``input_tokens``), ``output_length`` (alias ``output_tokens``) and
  ``hash_ids``, read as in a Mooncake row;
- ``not_before_ms``: the earliest release, trace ms;
- ``dependencies``: ``[{"request_id", "trigger": "dispatch" | "completion", "delay_ms",
  "relation": "sequence" | "spawn" | "join" | "replay_barrier"}]``: the request is released
  once every dependency has fired (the named request was dispatched, or completed, ``delay_ms``
  ago) and ``not_before_ms`` has passed. ``relation`` describes the edge and does not change
  when it fires. Rows of one session carry no implicit order.

The virtual clock starts at the smallest ``not_before_ms``. A dependency on an unknown request,
on another play's request, or one that can never fire (a cycle, or a request waiting on one) is
an error naming the line. Keys of the reference's format that have no effect here
(``priority``, ``strict_priority``, ``policy_class``, ``output_token_ids``,
``recorded_api_time_ms``, ``source_play_ordinal``, ``replay_key``) are named in one warning per
file; any other key is an error.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import orjson

from plansim.errors import TraceError
from plansim.limits import MAX_REQUEST_TOKENS
from plansim.traces.agentic_header import SCHEMA, VERSION
from plansim.traces.columns import I64_MAX, U64_MAX, TraceColumns
from plansim.traces.graph import COMPLETION, DISPATCH, Edges, RequestGraph, build_graph
from plansim.traces.lengths import check_lengths, drop_extra_hashes
from plansim.traces.sources import line_batches

log = logging.getLogger(__name__)

TRIGGERS = {"dispatch": DISPATCH, "completion": COMPLETION}
RELATIONS = ("sequence", "spawn", "join", "replay_barrier")
_ROW_KEYS = frozenset(
    {
        "request_id",
        "play_id",
        "session_id",
        "model",
        "input_length",
        "input_tokens",
        "output_length",
        "output_tokens",
        "hash_ids",
        "not_before_ms",
        "dependencies",
    }
)
_NO_EFFECT_KEYS = frozenset(
    {
        "priority",
        "strict_priority",
        "policy_class",
        "output_token_ids",
        "recorded_api_time_ms",
        "source_play_ordinal",
        "replay_key",
    }
)
_HEADER_KEYS = frozenset({"schema", "version", "block_size", "hash_id_scope", "source"})
_DEP_KEYS = frozenset({"request_id", "trigger", "delay_ms", "relation"})


def is_header(rec: object) -> bool:
    return isinstance(rec, dict) and rec.get("schema") == SCHEMA


@dataclass(slots=True)
class AgenticLinks:
    """Graph columns of one file, row by row; dependencies in CSR over the rows."""

    session: np.ndarray  # object str
    play: np.ndarray  # object str or None
    model: np.ndarray  # object str or None
    not_before_ms: np.ndarray  # float64
    dep_offsets: np.ndarray  # int64, rows + 1
    dep_request_id: list[str]
    dep_trigger: np.ndarray  # int8
    dep_delay_ms: np.ndarray  # float64
    dep_relation: np.ndarray  # int8, index into RELATIONS


def read_agentic_mooncake(path: Path, *, trace_block_size: int | None = None) -> TraceColumns:
    """Read one agentic Mooncake file; ``trace_block_size``, when given, must match the
    header's ``block_size``."""
    source = str(path)
    block_size: int | None = None
    rows: dict[str, list] = {
        k: []
        for k in (
            "line",
            "nb",
            "isl",
            "isl_missing",
            "osl",
            "rid",
            "session",
            "play",
            "model",
            "count",
        )
    }
    hashes: list[int] = []
    dep_offsets = [0]
    dep_rid: list[str] = []
    dep_trigger: list[int] = []
    dep_delay: list[float] = []
    dep_relation: list[int] = []
    no_effect: set[str] = set()
    for first_line, lines in line_batches(path):
        for i, ln in enumerate(lines):
            if not ln.strip():
                continue
            line = first_line + i
            try:
                rec = orjson.loads(ln)
            except orjson.JSONDecodeError as exc:
                raise TraceError(
                    f"not JSON: {exc.msg} at column {exc.colno}", source=source, line=line
                ) from None
            if block_size is None:
                block_size = _header(rec, source, line, trace_block_size)
                continue
            row = _Row(rec, source, line, block_size)
            no_effect.update(row.no_effect)
            for key, value in (
                ("line", line),
                ("nb", row.not_before),
                ("isl", row.isl),
                ("isl_missing", row.isl_missing),
                ("osl", row.osl),
                ("rid", row.rid),
                ("session", row.session),
                ("play", row.play),
                ("model", row.model),
                ("count", len(row.hashes)),
            ):
                rows[key].append(value)
            hashes.extend(row.hashes)
            for rid, trig, delay, rel in row.deps:
                dep_rid.append(rid)
                dep_trigger.append(trig)
                dep_delay.append(delay)
                dep_relation.append(rel)
            dep_offsets.append(len(dep_rid))
    if block_size is None:
        raise TraceError("empty file", source=source)
    if not rows["rid"]:
        raise TraceError("the header is not followed by any request row", source=source)
    if no_effect:
        log.warning(
            "%s: key(s) with no effect in plansim: %s", source, ", ".join(sorted(no_effect))
        )

    def objects(values: list) -> np.ndarray:
        out = np.empty(len(values), dtype=object)
        out[:] = values
        return out

    line = np.array(rows["line"], dtype=np.int64)
    isl = np.array(rows["isl"], dtype=np.int64)
    osl = np.array(rows["osl"], dtype=np.int64)
    counts = np.array(rows["count"], dtype=np.int64)
    raw = np.array(hashes, dtype=np.uint64)
    check_lengths(
        source,
        line,
        isl,
        osl,
        isl_field="input_length",
        osl_field="output_length",
        hash_counts=counts,
        block_size=block_size,
        isl_from_hashes=np.array(rows["isl_missing"], dtype=bool),
    )
    raw, counts = drop_extra_hashes(raw, counts, isl, block_size)
    offsets = np.array(dep_offsets, dtype=np.int64)
    nb = np.array(rows["nb"], dtype=np.float64)
    links = AgenticLinks(
        session=objects(rows["session"]),
        play=objects(rows["play"]),
        model=objects(rows["model"]),
        not_before_ms=nb,
        dep_offsets=offsets,
        dep_request_id=dep_rid,
        dep_trigger=np.array(dep_trigger, dtype=np.int8),
        dep_delay_ms=np.array(dep_delay, dtype=np.float64),
        dep_relation=np.array(dep_relation, dtype=np.int8),
    )
    return TraceColumns(
        source=source,
        line=line,
        # A request with dependencies arrives when they allow: its estimate is computed later.
        arrival_ms=np.where(np.diff(offsets) > 0, np.nan, nb),
        isl_tokens=isl,
        osl_tokens=osl,
        request_id=objects(rows["rid"]),
        hash_counts=counts,
        raw_hashes=raw,
        trace_block_size=block_size,
        links=links,
    )


def _header(rec: object, source: str, line: int, expected: int | None) -> int:
    def fail(message: str, fld: str | None = None) -> TraceError:
        return TraceError(message, source=source, line=line, field=fld)

    if not is_header(rec):
        raise fail(
            f"the first row must be the {SCHEMA} header (schema, version {VERSION}, block_size)",
            "schema",
        )
    unknown = sorted(set(rec) - _HEADER_KEYS)
    if unknown:
        raise fail(f"unknown header key {unknown[0]!r}", unknown[0])
    if rec.get("version") != VERSION or type(rec.get("version")) is not int:
        raise fail(f"version must be {VERSION}, got {rec.get('version')!r}", "version")
    bs = rec.get("block_size")
    if type(bs) is not int or not 0 < bs <= MAX_REQUEST_TOKENS:
        raise fail(
            f"block_size must be an integer in [1, {MAX_REQUEST_TOKENS:,}], got {bs!r}",
            "block_size",
        )
    scope = rec.get("hash_id_scope", "local")
    if scope != "local":
        raise fail(f"hash_id_scope must be 'local', got {scope!r}", "hash_id_scope")
    if rec.get("source") is not None and not isinstance(rec["source"], dict):
        raise fail("source must be an object", "source")
    if expected is not None and expected != bs:
        raise fail(f"block_size {bs} differs from --trace-block-size {expected}", "block_size")
    return bs


class _Row:
    """One validated request row."""

    __slots__ = (
        "deps",
        "hashes",
        "isl",
        "isl_missing",
        "model",
        "no_effect",
        "not_before",
        "osl",
        "play",
        "rid",
        "session",
    )

    def __init__(self, rec: object, source: str, line: int, block_size: int) -> None:
        def fail(message: str, fld: str | None = None) -> TraceError:
            return TraceError(message, source=source, line=line, field=fld)

        if not isinstance(rec, dict):
            raise fail(f"expected a JSON object, got {type(rec).__name__}")
        if is_header(rec):
            raise fail("a second header: one header per file, on its first row", "schema")
        unknown = sorted(set(rec) - _ROW_KEYS - _NO_EFFECT_KEYS)
        if unknown:
            raise fail(f"unknown key {unknown[0]!r}", unknown[0])
        self.no_effect = _NO_EFFECT_KEYS.intersection(rec)
        for key, required in (
            ("request_id", True),
            ("session_id", True),
            ("play_id", False),
            ("model", False),
        ):
            v = rec.get(key)
            if (v is None and required) or (v is not None and (type(v) is not str or not v)):
                raise fail(f"{key} must be a non-empty string, got {v!r}", key)
        self.rid, self.session = rec["request_id"], rec["session_id"]
        self.play, self.model = rec.get("play_id"), rec.get("model")
        hs = rec.get("hash_ids")
        if not isinstance(hs, list):
            raise fail("hash_ids is missing or not a list", "hash_ids")
        for h in hs:
            if not (type(h) is int and 0 <= h <= U64_MAX):
                raise fail(f"hash_ids holds {h!r}, not a non-negative integer", "hash_ids")
        isl = _alias(rec, "input_length", "input_tokens")
        if isl is not None and not (type(isl) is int and 0 <= isl <= I64_MAX):
            raise fail(f"input_length must be a non-negative integer, got {isl!r}", "input_length")
        osl = _alias(rec, "output_length", "output_tokens")
        if not (type(osl) is int and 0 <= osl <= I64_MAX):
            raise fail(
                f"output_length must be a non-negative integer, got {osl!r}", "output_length"
            )
        # Checked with the whole file's lengths (plansim.traces.lengths): a prompt past its
        # blocks' capacity is refused, hash ids past its last block are dropped.
        self.isl = len(hs) * block_size if isl is None else isl
        self.isl_missing = isl is None
        self.hashes = hs
        self.osl = osl
        nb = rec.get("not_before_ms")
        if not _is_ms(nb):
            raise fail(
                f"not_before_ms must be a non-negative number of ms, got {nb!r}", "not_before_ms"
            )
        self.not_before = float(nb)
        deps = rec.get("dependencies", [])
        if not isinstance(deps, list):
            raise fail("dependencies must be a list", "dependencies")
        self.deps = [_dependency(d, k, fail) for k, d in enumerate(deps)]


def _dependency(d: object, k: int, fail) -> tuple[str, int, float, int]:
    where = f"dependencies[{k}]"
    if not isinstance(d, dict):
        raise fail("a dependency must be an object", where)
    unknown = sorted(set(d) - _DEP_KEYS)
    if unknown:
        raise fail(f"unknown key {unknown[0]!r}", f"{where}.{unknown[0]}")
    rid = d.get("request_id")
    if type(rid) is not str or not rid:
        raise fail(f"request_id must be a non-empty string, got {rid!r}", f"{where}.request_id")
    trigger = d.get("trigger")
    if not isinstance(trigger, str) or trigger not in TRIGGERS:
        raise fail(f"trigger must be dispatch or completion, got {trigger!r}", f"{where}.trigger")
    delay = d.get("delay_ms")
    if not _is_ms(delay):
        raise fail(
            f"delay_ms must be a non-negative number of ms, got {delay!r}", f"{where}.delay_ms"
        )
    relation = d.get("relation", "sequence")
    if relation not in RELATIONS:
        raise fail(
            f"relation must be one of {', '.join(RELATIONS)}, got {relation!r}", f"{where}.relation"
        )
    return rid, TRIGGERS[trigger], float(delay), RELATIONS.index(relation)


def _alias(rec: dict, name: str, alias: str):
    v = rec.get(name)
    return rec.get(alias) if v is None else v


def _is_ms(v: object) -> bool:
    return type(v) in (int, float) and math.isfinite(v) and v >= 0


def agentic_graph(
    parts: list, request_id: np.ndarray, locate: Callable[[int], tuple[str, int]]
) -> RequestGraph:
    """The graph of concatenated agentic Mooncake parts (ids resolve across files)."""
    links = [p.links for p in parts]
    n = sum(len(p) for p in parts)
    session = np.concatenate([x.session for x in links])
    play = np.concatenate([x.play for x in links])
    model = np.concatenate([x.model for x in links])
    row_of = {rid: i for i, rid in enumerate(np.asarray(request_id, dtype=object).tolist())}
    target_parts, sources = [], []
    base = 0
    for x, p in zip(links, parts, strict=True):
        counts = np.diff(x.dep_offsets)
        targets = base + np.repeat(np.arange(len(p), dtype=np.int64), counts)
        within = np.arange(counts.sum()) - np.repeat(x.dep_offsets[:-1], counts)
        for rid, row, k in zip(x.dep_request_id, targets.tolist(), within.tolist(), strict=True):
            src = row_of.get(rid)
            if src is None:
                raise _fail(
                    locate,
                    row,
                    f"depends on unknown request {rid!r}",
                    f"dependencies[{k}].request_id",
                )
            if play[src] != play[row]:
                raise _fail(
                    locate,
                    row,
                    f"depends on request {rid!r} of play {play[src]!r}, "
                    f"not its own play {play[row]!r}",
                    f"dependencies[{k}].request_id",
                )
            sources.append(src)
        target_parts.append(targets)
        base += len(p)
    import pandas as pd

    codes, uniques = pd.factorize(session)
    seen: dict[int, str] = {}
    for row in range(n):
        if model[row] is not None and seen.setdefault(int(codes[row]), model[row]) != model[row]:
            raise _fail(
                locate,
                row,
                f"model {model[row]!r} differs from "
                f"{seen[int(codes[row])]!r} of earlier requests of session "
                f"{session[row]!r}; one model per session",
                "model",
            )
    edges = Edges(
        np.concatenate(target_parts),
        np.array(sources, dtype=np.int64),
        np.concatenate([x.dep_delay_ms for x in links]),
        np.concatenate([x.dep_trigger for x in links]),
    )
    not_before = np.concatenate([x.not_before_ms for x in links])
    return build_graph(
        n,
        not_before,
        edges,
        codes.astype(np.int64),
        np.asarray(uniques, dtype=object),
        request_id=request_id,
        locate=locate,
    )


def _fail(locate, row: int, message: str, fld: str) -> TraceError:
    src, line = locate(int(row))
    return TraceError(message, source=src, line=line, field=fld)
