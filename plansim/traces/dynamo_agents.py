"""Dynamo request traces with ``agent_context`` as a ``RequestGraph`` (rules of the reference
replay's agentic lowering).

Requests are ordered by recorded (start, end, request_id); start is ``request_received_ms``,
end is start + round(``total_time_ms``), else ``event_time_unix_ms``. Then:

- **sessions**: each request of a session waits for the one before it. When that one had ended
  by the time this one started, the edge fires on its completion, with the recorded gap
  (``start - previous end``: tool time, think time) as delay; a request that started while the
  previous one still ran (the reference rejects such a trace) follows that one's dispatch by
  the recorded gap between their starts.
- **child sessions** (``agent_context.parent_session_id``): the child's first request follows
  the dispatch of its source request in the parent session, and the parent's consumer request
  waits for the completion of the child's last-ending request (a join). Source and consumer are
  named by a tool row (``tool_end`` / ``tool_error`` whose ``tool.claude`` object, or ``tool``
  itself, holds ``source_request_id``, ``consumer_request_id``, ``child_session_id`` and
  ``execution_mode`` ``blocking`` | ``background``); without one, the source is the parent's
  latest request that started no later than the child, and the consumer the parent's first
  request that started after the child's last one ended. Delays are the recorded gaps.
- requests without ``agent_context`` arrive open-loop at their recorded time (the reference
  rejects a trace that mixes both).

A rejected request fires no completion edge: what waits on it is never released.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from plansim.errors import TraceError
from plansim.traces.graph import COMPLETION, DISPATCH, Edges, RequestGraph, build_graph

EXECUTION_MODES = ("blocking", "background")
_TOOL_LINK_KEYS = ("source_request_id", "consumer_request_id", "child_session_id", "execution_mode")


@dataclass(frozen=True, slots=True)
class ToolLink:
    """What a tool row says about the request graph (``None`` where it says nothing)."""

    source: str
    line: int
    session_id: str
    tool_call_id: str
    source_request_id: str
    consumer_request_id: str | None
    child_session_id: str | None
    execution_mode: str


@dataclass(slots=True)
class DynamoLinks:
    """Agent columns of one file, row by row (object arrays: str or None; ``end_ms`` float64,
    the recorded completion), plus the file's tool rows that link requests."""

    session: np.ndarray
    parent_session: np.ndarray
    model: np.ndarray
    end_ms: np.ndarray
    tools: list[ToolLink]


def tool_link(ev: dict, source: str, line: int) -> ToolLink | None:
    """The link a ``tool_end`` / ``tool_error`` row carries, or ``None`` (no agent_context, or
    no source request named). Raises ``TraceError`` for a malformed one."""

    def fail(message: str, fld: str) -> TraceError:
        return TraceError(message, source=source, line=line, field=fld)

    ctx, tool = ev.get("agent_context"), ev.get("tool")
    if not isinstance(ctx, dict) or not isinstance(tool, dict):
        return None
    meta, prefix = tool.get("claude"), "tool.claude"
    if not isinstance(meta, dict):
        meta, prefix = tool, "tool"
    if meta.get("source_request_id") is None:
        return None
    session = ctx.get("session_id")
    if type(session) is not str:
        raise fail(
            "agent_context.session_id is missing or not a string", "agent_context.session_id"
        )
    for key in _TOOL_LINK_KEYS:
        v = meta.get(key)
        if v is not None and type(v) is not str:
            raise fail(f"{key} must be a string, got {v!r}", f"{prefix}.{key}")
    mode = meta.get("execution_mode")
    if mode not in EXECUTION_MODES:
        raise fail(
            f"execution_mode {mode!r} is not one of {', '.join(EXECUTION_MODES)}",
            f"{prefix}.execution_mode",
        )
    return ToolLink(
        source,
        line,
        session,
        str(tool.get("tool_call_id", "")),
        meta["source_request_id"],
        meta.get("consumer_request_id"),
        meta.get("child_session_id"),
        mode,
    )


def dynamo_graph(
    parts: list, request_id: np.ndarray, locate: Callable[[int], tuple[str, int]]
) -> RequestGraph | None:
    """The graph of concatenated Dynamo ``TraceColumns`` parts; ``None`` when no request has
    an ``agent_context``."""
    if all(p.links is None for p in parts):
        return None
    cols = {
        name: np.concatenate([_column(p, name) for p in parts])
        for name in ("session", "parent_session", "model", "end_ms")
    }
    session = cols["session"]
    if np.all(np.equal(session, None)):
        return None
    start = np.concatenate([p.arrival_ms for p in parts])
    end = np.fmax(cols["end_ms"], start)
    import pandas as pd

    codes, uniques = pd.factorize(session, use_na_sentinel=True)
    codes = codes.astype(np.int64)
    names = [str(s) for s in uniques]
    ids = np.asarray(request_id, dtype=object)
    frame = pd.DataFrame({"session": codes, "start": start, "end": end, "rid": ids})
    frame = frame[frame["session"] >= 0].sort_values(
        ["session", "start", "end", "rid"], kind="stable"
    )
    rows = frame.index.to_numpy()
    by_session = {int(s): g for s, g in zip(*_groups(codes[rows], rows), strict=True)}

    def fail(row: int, message: str, fld: str) -> TraceError:
        src, line = locate(int(row))
        return TraceError(message, source=src, line=line, field=fld)

    _check_models(codes, rows, cols["model"], names, fail)
    edges = _Collector(start, end, ids)
    same = np.r_[False, codes[rows[1:]] == codes[rows[:-1]]] if rows.size else np.zeros(0, bool)
    for k in np.flatnonzero(same).tolist():
        prev, cur = int(rows[k - 1]), int(rows[k])
        if end[prev] <= start[cur]:
            edges.add(cur, prev, COMPLETION)
        else:
            edges.add(cur, prev, DISPATCH)
    parents = _parent_of(codes, rows, cols["parent_session"], names, fail)
    row_of = {rid: i for i, rid in enumerate(ids.tolist())}
    tools_by_child = _tools_by_child(parts, row_of, codes, names)
    for child in sorted(parents, key=lambda c: names[c]):
        parent_name = parents[child]
        child_rows = by_session[child]
        if parent_name not in names:
            raise fail(
                child_rows[0],
                f"session {names[child]!r} names parent session "
                f"{parent_name!r}, which has no request in the trace",
                "agent_context.parent_session_id",
            )
        parent_rows = by_session[names.index(parent_name)]
        first = int(child_rows[0])
        last = int(max(child_rows, key=lambda r: (end[r], start[r], ids[r])))
        tool = tools_by_child.get(names[child])
        if tool is not None:
            spawn = row_of[tool.source_request_id]
            join = row_of.get(tool.consumer_request_id) if tool.consumer_request_id else None
            for role, row in (("source", spawn), ("consumer", join)):
                if row is not None and codes[row] != names.index(parent_name):
                    raise TraceError(
                        f"tool {tool.tool_call_id!r}: {role} request "
                        f"{ids[row]!r} is not in parent session {parent_name!r}",
                        source=tool.source,
                        line=tool.line,
                        field="tool",
                    )
        else:
            before = [r for r in parent_rows if start[r] <= start[first]]
            spawn = int(max(before, key=lambda r: start[r])) if before else None
            after = [r for r in parent_rows if start[r] >= end[last]]
            join = int(min(after, key=lambda r: start[r])) if after else None
        if spawn is not None:
            edges.add(first, spawn, DISPATCH, tool)
        if join is not None:
            edges.add(join, last, COMPLETION, tool)
    not_before = start.copy()
    not_before[edges.targets()] = np.nan
    return build_graph(
        len(start),
        not_before,
        edges.edges(),
        codes,
        np.asarray(names, dtype=object),
        request_id=request_id,
        locate=locate,
    )


class _Collector:
    """Edges with their recorded-gap delays; a repeated (target, source, trigger) is kept once."""

    def __init__(self, start: np.ndarray, end: np.ndarray, ids: np.ndarray) -> None:
        self.start, self.end, self.ids = start, end, ids
        self.seen: dict[tuple[int, int, int], float] = {}

    def add(self, target: int, source: int, trigger: int, tool: ToolLink | None = None) -> None:
        ref = self.start[source] if trigger == DISPATCH else self.end[source]
        gap = float(self.start[target] - ref)
        if gap < 0 and tool is not None:
            # Only a tool row can name a source that starts (or ends) after its target starts.
            event = "dispatch" if trigger == DISPATCH else "completion"
            raise TraceError(
                f"tool {tool.tool_call_id!r}: request {self.ids[target]!r} starts "
                f"before the {event} of request {self.ids[source]!r} it would "
                "wait for",
                source=tool.source,
                line=tool.line,
                field="tool",
            )
        self.seen[(target, source, trigger)] = max(gap, 0.0)

    def targets(self) -> np.ndarray:
        return np.array(sorted({t for t, _, _ in self.seen}), dtype=np.int64)

    def edges(self) -> Edges:
        if not self.seen:
            return Edges.empty()
        keys = list(self.seen)
        return Edges(
            np.array([k[0] for k in keys], dtype=np.int64),
            np.array([k[1] for k in keys], dtype=np.int64),
            np.array([self.seen[k] for k in keys], dtype=np.float64),
            np.array([k[2] for k in keys], dtype=np.int8),
        )


def _column(part, name: str) -> np.ndarray:
    links = part.links
    if links is not None:
        return getattr(links, name)
    if name == "end_ms":
        return np.full(len(part), np.nan)
    out = np.empty(len(part), dtype=object)
    out[:] = None
    return out


def _groups(sorted_codes: np.ndarray, rows: np.ndarray) -> tuple[list[int], list[np.ndarray]]:
    if rows.size == 0:
        return [], []
    cut = np.flatnonzero(sorted_codes[1:] != sorted_codes[:-1]) + 1
    return [int(c) for c in sorted_codes[np.r_[0, cut]]], np.split(rows, cut)


def _check_models(codes, rows, model, names, fail) -> None:
    """All requests of a session that name a model name the same one."""
    seen: dict[int, str] = {}
    for row in sorted(rows.tolist()):
        m = model[row]
        if m is None:
            continue
        s = int(codes[row])
        if seen.setdefault(s, m) != m:
            raise fail(
                row,
                f"model {m!r} differs from {seen[s]!r} of earlier requests of "
                f"session {names[s]!r}; one model per session",
                "request.model",
            )


def _parent_of(codes, rows, parent, names, fail) -> dict[int, str]:
    """Session ordinal -> its parent session's id, for sessions that name one (consistently)."""
    out: dict[int, str] = {}
    for row in sorted(rows.tolist()):
        p = parent[row]
        if p is None:
            continue
        s = int(codes[row])
        if out.setdefault(s, p) != p:
            raise fail(
                row,
                f"parent_session_id {p!r} differs from {out[s]!r} of earlier "
                f"requests of session {names[s]!r}",
                "agent_context.parent_session_id",
            )
    return out


def _tools_by_child(parts, row_of: dict[str, int], codes, names) -> dict[str, ToolLink]:
    """Child session id -> the one tool row that spawned it; checks every tool row's ids."""
    out: dict[str, ToolLink] = {}
    known = set(names)
    for tool in (t for p in parts if p.links is not None for t in p.links.tools):
        for role, rid in (
            ("source", tool.source_request_id),
            ("consumer", tool.consumer_request_id),
        ):
            if rid is None:
                continue
            row = row_of.get(rid)
            if row is None:
                raise TraceError(
                    f"tool {tool.tool_call_id!r} names unknown {role} request {rid!r}",
                    source=tool.source,
                    line=tool.line,
                    field=f"{role}_request_id",
                )
            if codes[row] < 0 or names[codes[row]] != tool.session_id:
                owner = names[codes[row]] if codes[row] >= 0 else None
                raise TraceError(
                    f"tool {tool.tool_call_id!r}: {role} request {rid!r} belongs "
                    f"to session {owner!r}, not the tool's {tool.session_id!r}",
                    source=tool.source,
                    line=tool.line,
                    field=f"{role}_request_id",
                )
        child = tool.child_session_id
        if child is None or child not in known:
            continue
        if child in out:
            raise TraceError(
                f"child session {child!r} is named by two tool rows (the other at "
                f"line {out[child].line})",
                source=tool.source,
                line=tool.line,
                field="child_session_id",
            )
        out[child] = tool
    return out


def end_ms(received: np.ndarray, total: np.ndarray, event: np.ndarray) -> np.ndarray:
    """Recorded completion: received + round(total) when both exist, else the event time, else
    the received time (a request of no recorded duration)."""
    done = np.where(np.isnan(total), event, received + np.floor(total + 0.5))
    return np.where(np.isnan(done), received, done)
