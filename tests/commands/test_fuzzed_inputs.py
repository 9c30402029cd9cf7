"""Fuzzed user inputs (issue 33): random mutations of valid traces in every format (truncations,
type changes, missing and extra fields, huge numbers, non-UTF-8 bytes), of shards mixing
formats, and of valid deployment, planner and retune files. Whatever the mutation, plansim exits
0 with a complete run, or 2 with exactly one ``plansim:`` line and nothing written: never a
traceback (an exception escaping ``main``), never another status, never a partial output.

Each property runs a bounded number of examples in the suite, the same ones every time
(derandomized). ``PLANSIM_FUZZ_EXAMPLES=N`` runs N random examples per property instead, and
``-s`` shows how many each judged and how they ended (the long run ``bench/README.md``
reports), e.g. ``PLANSIM_FUZZ_EXAMPLES=1000 python -m pytest -s
tests/commands/test_fuzzed_inputs.py``.
"""

from __future__ import annotations

import contextlib
import copy
import gc
import gzip
import io
import json
import os
import signal
import sys
import tempfile
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from plansim.cli import main

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
MICRO = ROOT / "tests" / "sim" / "reference" / "micro" / "M7-round-robin.jsonl"  # 6 requests
LONG_RUN = int(os.environ.get("PLANSIM_FUZZ_EXAMPLES", "0"))
# Wall seconds one example may take (a valid one replays a few requests in well under one).
EXAMPLE_LIMIT_S = 120


def _settings(examples: int) -> settings:
    """``examples`` fixed ones in the suite; ``PLANSIM_FUZZ_EXAMPLES`` random ones if set."""
    return settings(
        max_examples=LONG_RUN or examples,
        derandomize=not LONG_RUN,
        deadline=None,
        database=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )


# -- running plansim and judging the outcome ----------------------------------------------------


_runs = [0]
_COLLECT_EVERY = 50
# How the examples ended: "complete" (exit 0, a whole run) or "refused" (exit 2, one line).
_outcomes: Counter[str] = Counter()


class TookTooLong(BaseException):
    """An example ran longer than ``EXAMPLE_LIMIT_S``: unbounded work is a finding too."""


def _too_long(signum: int, frame: Any) -> None:
    raise TookTooLong(f"plansim ran more than {EXAMPLE_LIMIT_S} s")


def _plansim(*args: str) -> tuple[int, str, str]:
    """``plansim ARGS`` in this process: (exit status, stdout, stderr). An exception other than
    ``SystemExit`` propagates: it would have been a traceback."""
    out, err = io.StringIO(), io.StringIO()
    argv = sys.argv
    sys.argv = ["plansim", *args]
    previous = signal.signal(signal.SIGALRM, _too_long)
    signal.alarm(EXAMPLE_LIMIT_S)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            try:
                main()
                code = 0
            except SystemExit as exc:
                code = exc.code if isinstance(exc.code, int) else 1
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        sys.argv = argv
        _runs[0] += 1
        if _runs[0] % _COLLECT_EVERY == 0:  # main() leaves its objects to full collections,
            gc.collect()  # rare in one process running thousands of them
    return code, out.getvalue(), err.getvalue()


def _judge(code: int, err: str, out: Path) -> None:
    """Exit 0 with a complete run in ``out``, or exit 2 with one line and no ``out``."""
    assert "Traceback" not in err, err
    if code == 0:
        marker = json.loads((out / "run.json").read_text())
        assert marker["status"] == "complete", marker
        assert all((out / name).is_file() for name in marker["files"]), marker
        assert not [p for p in out.rglob("*") if p.name.endswith(".tmp")]
        assert sorted(p.name for p in out.iterdir() if p.name.startswith(".")) == []
        _outcomes["complete"] += 1
        return
    lines = err.splitlines()
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("plansim: "), err
    assert not lines[0].startswith("plansim: warning:"), err
    assert not out.exists(), sorted(p.name for p in out.rglob("*"))
    _outcomes["refused"] += 1


def _check(prop: Callable[[], None]) -> None:
    """Run the property ``prop``; in a long run, print how many examples it judged and how they
    ended (run pytest with ``-s`` to see it)."""
    before = Counter(_outcomes)
    prop()
    if LONG_RUN:
        done = _outcomes - before
        print(
            f"\nfuzz: {done.total()} examples, {done['complete']} complete runs, "
            f"{done['refused']} refused in one line"
        )


def _replay(files: list[Path], folder: Path, *extra: str) -> None:
    out = folder / "out"
    code, _, err = _plansim(
        "replay", "run", *map(str, files), "--out", str(out), "--no-report", "--quiet", *extra
    )
    _judge(code, err, out)


# -- valid inputs to start from ----------------------------------------------------------------

DYNAMO = "dynamo.request.trace.v1"


def _dynamo_row(rid: str, received: int, isl: int, osl: int, **request: Any) -> dict:
    hashes = [hash((rid, t)) % 2**63 for t in range(-(-isl // 128))]
    return {
        "schema": DYNAMO,
        "event_type": "request_end",
        "event_time_unix_ms": received + 90,
        "request": {
            "request_id": rid,
            "request_received_ms": received,
            "output_tokens": osl,
            "total_time_ms": 80.0,
            "ttft_ms": 12.5,
            "replay": {
                "trace_block_size": 128,
                "input_length": isl,
                "input_sequence_hashes": hashes,
            },
            **request,
        },
    }


BASES: dict[str, list[Any]] = {
    "mooncake": [
        {"timestamp": 0, "input_length": 600, "output_length": 4, "hash_ids": [1, 2]},
        {"timestamp": 15.5, "input_length": 100, "output_length": 3, "hash_ids": [1]},
        {
            "timestamp": 40,
            "input_tokens": 1024,
            "output_tokens": 2,
            "hash_ids": [1, 2],
            "request_id": "r3",
        },
    ],
    "mooncake_sessions": [
        {
            "session_id": "s1",
            "timestamp": 0,
            "input_length": 100,
            "output_length": 3,
            "hash_ids": [1],
        },
        {
            "session_id": "s1",
            "delay": 5,
            "input_length": 700,
            "output_length": 2,
            "hash_ids": [1, 2],
        },
        {"timestamp": 3, "input_length": 50, "output_length": 1, "hash_ids": [9]},
    ],
    "dynamo": [
        _dynamo_row("a", 1_750_000_000_000, 300, 5),
        {"timestamp": 7, "event": _dynamo_row("b", 1_750_000_000_020, 128, 3)},
        {
            "schema": DYNAMO,
            "event_type": "tool_end",
            "event_time_unix_ms": 1_750_000_000_030,
            "agent_context": {"session_id": "s"},
            "tool": {"tool_call_id": "c", "status": "ok"},
        },
        _dynamo_row("c", 1_750_000_000_050, 129, 1, model="m"),
    ],
    "dynamo_agents": [
        {**_dynamo_row("a", 1_750_000_000_000, 200, 4), "agent_context": {"session_id": "s"}},
        {
            **_dynamo_row("b", 1_750_000_000_300, 300, 2),
            "agent_context": {"session_id": "s", "parent_session_id": None},
        },
    ],
    "agentic_mooncake": [
        {
            "schema": "dynamo.agentic_mooncake",
            "version": 2,
            "block_size": 512,
            "hash_id_scope": "local",
            "source": {"format": "test"},
        },
        {
            "request_id": "root",
            "session_id": "s0",
            "input_length": 100,
            "output_length": 2,
            "hash_ids": [1],
            "not_before_ms": 0,
        },
        {
            "request_id": "next",
            "session_id": "s0",
            "input_length": 600,
            "output_length": 3,
            "hash_ids": [1, 2],
            "not_before_ms": 0,
            "dependencies": [
                {
                    "request_id": "root",
                    "trigger": "completion",
                    "delay_ms": 10,
                    "relation": "sequence",
                }
            ],
        },
    ],
    "azure": [
        ["TIMESTAMP", "ContextTokens", "GeneratedTokens"],
        ["2023-11-16 18:17:03.9799600", "1000", "10"],
        ["2023-11-16 18:17:04.0319600", "513", "8"],
        ["2023-11-16 18:17:05.5", "40", "1"],
    ],
}

# Values a mutation puts where another one was: other JSON types, the edges of every numeric
# range plansim converts to (int32, int64, uint64, float64), empty and odd text.
NASTY = st.one_of(
    st.sampled_from(
        [
            None,
            True,
            False,
            0,
            -1,
            1,
            2**31,
            2**53 + 1,
            2**63 - 1,
            2**63,
            2**64,
            10**30,
            -(10**30),
            0.5,
            -0.0,
            1e-300,
            1e17,
            1e308,
            -1e308,
            "",
            "x",
            "12",
            "1e3",
            "\u00e9\u0000",
            [],
            [1],
            [-1],
            [2**64],
            [0.5],
            {},
            {"a": 1},
        ]
    ),
    st.integers(),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=4),
).map(copy.deepcopy)  # a fresh copy: edits must not change the pool
# Cells of a CSV row: numbers at every edge, dates that are not, text.
NASTY_CELLS = st.one_of(
    st.sampled_from(
        [
            "",
            "-1",
            "0",
            "1.5",
            "1e20",
            "10000001",
            "99999999999999999999",
            "nan",
            "inf",
            "abc",
            "2023-13-45 99:99:99",
            "2023-02-30 00:00:00",
            "1970-01-01",
            "9999-12-31 23:59:59",
            '"',
            "\u00e9",
            " 7 ",
        ]
    ),
    st.integers().map(str),
    st.text(max_size=5),
)
# Bytes a file may carry by mistake: invalid UTF-8, a BOM, NUL, stray line ends and braces.
JUNK = st.sampled_from(
    [
        b"\xff",
        b"\xc3\x28",
        b"\xed\xa0\x80",
        b"\x00",
        b"\xef\xbb\xbf",
        b"\r",
        b"\n",
        b"\n\n",
        b"{",
        b"}{",
        b",",
        b'"',
        b"NaN",
        b"Infinity",
        b"-Infinity",
        b"1e999",
    ]
)


def _paths(value: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a value inside ``value`` (dict keys, list indices), the empty path too."""
    found = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _set(root: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    parent = root
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    return root


def _delete(root: Any, path: tuple) -> Any:
    parent = root
    for step in path[:-1]:
        parent = parent[step]
    del parent[path[-1]]
    return root


def _mutate_value(data: st.DataObject, root: Any, mutations: int) -> Any:
    """``root`` (a JSON-like value) after 1 to ``mutations`` random edits: a value replaced by a
    nasty one, a key or item removed, a key added, an item repeated."""
    root = copy.deepcopy(root)
    for _ in range(data.draw(st.integers(1, mutations), label="edits")):
        path = data.draw(st.sampled_from(_paths(root)), label="path")
        kind = data.draw(st.sampled_from(["set", "set", "delete", "add", "repeat"]), label="edit")
        target = root
        for step in path:
            target = target[step]
        if kind == "set" or (kind == "delete" and not path):
            root = _set(root, path, data.draw(NASTY, label="value"))
        elif kind == "delete":
            root = _delete(root, path)
        elif kind == "add" and isinstance(target, dict):
            key = data.draw(
                st.sampled_from(
                    [
                        "extra",
                        "request_id",
                        "hash_ids",
                        "delay",
                        "session_id",
                        "priority",
                        "engine",
                        "x" * 3,
                    ]
                )
            )
            target[key] = data.draw(NASTY, label="value")
        elif kind == "repeat" and isinstance(target, list) and target:
            target.append(copy.deepcopy(target[data.draw(st.integers(0, len(target) - 1))]))
    return root


def _mutate_bytes(data: st.DataObject, text: bytes) -> bytes:
    """``text`` cut short, or with junk inserted, or gzipped (whole or cut), or as it is."""
    kind = data.draw(
        st.sampled_from(["none", "truncate", "junk", "gzip", "gzip-cut"]), label="bytes"
    )
    if kind == "truncate":
        return text[: data.draw(st.integers(0, len(text)), label="cut")]
    if kind == "junk":
        at = data.draw(st.integers(0, len(text)), label="at")
        return text[:at] + data.draw(JUNK, label="junk") + text[at:]
    if kind == "gzip":
        return gzip.compress(text)
    if kind == "gzip-cut":
        packed = gzip.compress(text)
        return packed[: data.draw(st.integers(0, len(packed) - 1), label="cut")]
    return text


def _trace_bytes(data: st.DataObject, fmt: str) -> bytes:
    rows = BASES[fmt]
    if fmt == "azure":
        rows = copy.deepcopy(rows)
        for _ in range(data.draw(st.integers(1, 3), label="edits")):
            r = data.draw(st.integers(0, len(rows) - 1), label="row")
            kind = data.draw(st.sampled_from(["cell", "cell", "drop", "extra", "ragged"]))
            c = data.draw(st.integers(0, len(rows[r]) - 1), label="column") if rows[r] else 0
            if kind == "cell" and rows[r]:
                rows[r][c] = data.draw(NASTY_CELLS, label="cell")
            elif kind == "drop":
                rows = [row[:c] + row[c + 1 :] for row in rows]
            elif kind == "extra":
                rows = [[*row, "x"] for row in rows]
            elif kind == "ragged" and rows[r]:
                rows[r] = rows[r][:-1]
        text = "".join(",".join(row) + "\n" for row in rows).encode("utf-8", "surrogatepass")
    else:
        rows = _mutate_value(data, rows, 3)
        if not isinstance(rows, list):
            rows = [rows]
        text = b"".join(json.dumps(r).encode("utf-8", "surrogatepass") + b"\n" for r in rows)
    return _mutate_bytes(data, text)


def _write(folder: Path, name: str, content: bytes) -> Path:
    path = folder / name
    path.write_bytes(content)
    return path


_SUFFIX = {"azure": ".csv"}


@pytest.mark.parametrize("fmt", sorted(BASES))
def test_a_mutated_trace_is_replayed_or_refused_in_one_line(fmt):
    @_settings(30)
    @given(data=st.data())
    def prop(data):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            trace = _write(folder, "t" + _SUFFIX.get(fmt, ".jsonl"), _trace_bytes(data, fmt))
            _replay([trace], folder)

    _check(prop)


def test_shards_of_mutated_and_mixed_formats_are_replayed_or_refused_in_one_line():
    @_settings(30)
    @given(data=st.data())
    def prop(data):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            shards = folder / "shards"
            shards.mkdir()
            for k in range(data.draw(st.integers(2, 3), label="shards")):
                fmt = data.draw(st.sampled_from(sorted(BASES)), label="format")
                mutated = data.draw(st.booleans(), label="mutated")
                content = (
                    _trace_bytes(data, fmt)
                    if mutated
                    else b"".join(
                        (",".join(r) if fmt == "azure" else json.dumps(r)).encode() + b"\n"
                        for r in BASES[fmt]
                    )
                )
                _write(shards, f"{k}{_SUFFIX.get(fmt, '.jsonl')}", content)
            _replay([shards], folder)

    _check(prop)


# -- configuration files -----------------------------------------------------------------------


def _config_bytes(data: st.DataObject, mapping: dict) -> tuple[bytes, str]:
    mutated = _mutate_value(data, mapping, 3)
    as_json = data.draw(st.booleans(), label="json")
    text = json.dumps(mutated) if as_json else yaml.safe_dump(mutated, allow_unicode=True)
    return _mutate_bytes(
        data, text.encode("utf-8", "surrogatepass")
    ), ".json" if as_json else ".yaml"


def _example(name: str) -> dict:
    return yaml.safe_load((EXAMPLES / name).read_text())


def _config_property(build: Callable[[st.DataObject, Path], list[str]], examples: int):
    """A property running ``plansim`` with the arguments ``build`` writes into a fresh folder."""

    @_settings(examples)
    @given(data=st.data())
    def prop(data):
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(tmp)
            out = folder / "out"
            code, _, err = _plansim(*build(data, folder), "--out", str(out), "--no-report")
            _judge(code, err, out)

    return prop


def test_a_mutated_deployment_file_is_replayed_or_refused_in_one_line():
    def build(data, folder):
        content, suffix = _config_bytes(data, _example("deploy.yaml"))
        config = _write(folder, "deploy" + suffix, content)
        return ["replay", "run", str(MICRO), "--config", str(config), "--quiet"]

    _check(_config_property(build, 60))


def test_a_mutated_planner_file_is_replayed_or_refused_in_one_line():
    base = _example("planner.yaml")
    base["load_predictor"] = "constant"  # the predictor is not under test: the quickest one

    def build(data, folder):
        content, suffix = _config_bytes(data, base)
        config = _write(folder, "planner" + suffix, content)
        return [
            "replay",
            "run",
            str(MICRO),
            "--config",
            str(EXAMPLES / "deploy.yaml"),
            "--planner-config",
            str(config),
            "--quiet",
        ]

    _check(_config_property(build, 40))


def test_a_mutated_retune_file_is_swept_or_refused_in_one_line():
    trace = [
        _dynamo_row(f"r{i}", 1_750_000_000_000 + 400 * i, 100 + 50 * (i % 5), 3) for i in range(40)
    ]
    base = {
        "trace": "trace.jsonl",
        "deployment": {"num_workers": 2, "router": {"mode": "kv_router"}, "sla": {"ttft_ms": 500}},
        "planner": {
            "mode": "agg",
            "enable_load_scaling": False,
            "enable_throughput_scaling": False,
            "retune": {
                "interval_seconds": 4,
                "grace_seconds": 1,
                "max_parallel": 1,
                "router": {"overlap_score_weight": {"choices": [0.0, 1.0]}},
            },
        },
    }

    def build(data, folder):
        _write(folder, "trace.jsonl", b"".join(json.dumps(r).encode() + b"\n" for r in trace))
        content, suffix = _config_bytes(data, base)
        run = _write(folder, "run" + suffix, content)
        return ["retune", "window", str(run), "--window", "0", "--no-timeout"]

    _check(_config_property(build, 12))


def test_a_mutated_fleet_file_or_its_deployment_is_planned_or_refused_in_one_line():
    # 24 requests of one model on H100 or H200 (AIConfigurator's timing): a valid fleet's search
    # is a few replays of a few workers.
    trace = [
        {
            "timestamp": 250 * i,
            "input_length": 600,
            "output_length": 4,
            "hash_ids": [2 * i, 2 * i + 1],
        }
        for i in range(24)
    ]
    deployment = {
        "mode": "agg",
        "num_workers": 1,
        "engine": {
            "timing_model": {"type": "aic", "model": "Qwen/Qwen3-0.6B", "system": "h100_sxm"}
        },
        "router": {"mode": "round_robin"},
        "sla": {"ttft_ms": 500},
    }
    fleet = {
        "inventory": {
            "h100_sxm": {
                "count": 4,
                "price_per_gpu_hour": 2.2,
                "spot": {"price_per_gpu_hour": 0.9, "preemptions_per_hour": 1.0},
            },
            "h200_sxm": {"count": 2, "price_per_gpu_hour": 3.5},
        },
        "budget_per_hour": 20,
        "models": [
            {
                "name": "chat",
                "trace": "trace.jsonl",
                "deployment": "chat.yaml",
                "search": {"timing_model.system": ["h100_sxm", "h200_sxm"]},
                "target": 0.9,
                "max_gpu_budget": 3,
            }
        ],
    }

    def build(data, folder):
        _write(folder, "trace.jsonl", b"".join(json.dumps(r).encode() + b"\n" for r in trace))
        if data.draw(st.booleans(), label="mutate the deployment"):
            content, suffix = _config_bytes(data, deployment)
            _write(folder, "chat" + suffix, content)
            config = {**fleet, "models": [{**fleet["models"][0], "deployment": "chat" + suffix}]}
            content, suffix = json.dumps(config).encode(), ".json"
        else:
            _write(folder, "chat.yaml", yaml.safe_dump(deployment).encode())
            content, suffix = _config_bytes(data, fleet)
        path = _write(folder, "fleet" + suffix, content)
        return ["fleet", str(path), "--jobs", "1", "--quiet"]

    _check(_config_property(build, 16))
