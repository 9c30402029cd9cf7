"""The bad-input battery (issue 11): every user mistake, absurd size and interruption of the
issue, and the earlier one-line errors, as one table each.

A row is a command, its expected exit status and a fragment of its one stderr line. Every row
also checks what a user cannot see at once: no traceback, a single ``plansim: ...`` line for a
failure, nothing left in the output folder (a failed run leaves none; a refused folder is left
exactly as it was), nothing left in the temporary folder, no process left behind.

Rows run in-process (``main()`` with a private temporary folder); the interruption rows run
``python -m plansim`` in its own process group and signal it as a terminal would.
"""

from __future__ import annotations

import errno
import gzip
import hashlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from proctable import descendants, live_children, process_table

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
SAMPLE = EXAMPLES / "traces" / "sample.dynamo.jsonl.gz"  # 2,254 requests over 600 s
MICRO = ROOT / "tests" / "sim" / "reference" / "micro" / "M2-chunked-pair.jsonl"  # 2 requests
DEPLOY = EXAMPLES / "deploy.yaml"  # num_workers: 4
RETUNE = EXAMPLES / "retune.yaml"  # T = 120 s on the sample: 4 complete windows, 0..3
# Processes of a killed command may take this long to notice (watchdogs poll every 0.25 s).
GONE_WITHIN_S = 15.0
# A replay of the micro trace with the case's own deployment file, d.yaml.
REPLAY_D = ("replay", "run", str(MICRO), "--config", "{d}/d.yaml", "--out", "{out}")


def _mooncake_rows(*stamps: float) -> str:
    return "".join(
        f'{{"timestamp": {t}, "input_length": 100, "output_length": 4, "hash_ids": [{i}]}}\n'
        for i, t in enumerate(stamps)
    )


def _retune_run(extra_planner: str = "", retune: str = "") -> str:
    """A retune run file on the sample trace (every path absolute)."""
    return (
        f"trace: {SAMPLE}\n"
        "deployment: {num_workers: 2, router: {mode: kv_router}, sla: {ttft_ms: 500}}\n"
        "planner:\n  mode: agg\n  enable_load_scaling: false\n"
        f"  enable_throughput_scaling: false\n{extra_planner}"
        "  retune:\n    interval_seconds: 120\n    grace_seconds: 10\n    max_parallel: 1\n"
        f"    router:\n      overlap_score_weight: {{choices: [0.0, 1.0]}}\n{retune}"
    )


@dataclass(frozen=True)
class Case:
    """One row: ``args`` after ``plansim``; ``{d}`` is the row's folder, ``{out}`` its output
    folder. ``files`` are written into ``{d}`` first; ``prepare`` runs after that (it may fill
    ``{out}``, which must then be left exactly as it was)."""

    id: str
    args: tuple[str, ...]
    status: int
    message: str
    files: dict[str, str | bytes] = field(default_factory=dict)
    prepare: Callable[..., None] | None = None


def _full_disk_after(limit_bytes: int):
    """``prepare``: the disk fills after ``limit_bytes`` of output (every atomic write)."""

    def prepare(case_dir: Path, monkeypatch: pytest.MonkeyPatch, run_cli) -> None:
        import plansim.io

        written = [0]
        real_fdopen = os.fdopen

        class FullDisk:
            def __init__(self, fh):
                self._fh = fh

            def write(self, data):
                written[0] += len(data)
                if written[0] > limit_bytes:
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                return self._fh.write(data)

            def __getattr__(self, name):
                return getattr(self._fh, name)

            def __enter__(self):
                return self

            def __exit__(self, *exc):
                self._fh.close()

        monkeypatch.setattr(
            plansim.io.os, "fdopen", lambda fd, mode: FullDisk(real_fdopen(fd, mode))
        )

    return prepare


def _run_first(*args: str) -> Callable[..., None]:
    """``prepare``: an earlier successful command fills the output folder."""

    def prepare(case_dir: Path, monkeypatch: pytest.MonkeyPatch, run_cli) -> None:
        code, _, err = run_cli(*(a.format(d=case_dir, out=case_dir / "out") for a in args))
        assert code == 0, err

    return prepare


def _interrupt_at(name: str) -> Callable[..., None]:
    """``prepare``: Ctrl-C arrives while ``name`` is being written."""

    def prepare(case_dir: Path, monkeypatch: pytest.MonkeyPatch, run_cli) -> None:
        import plansim.commands.output as output

        real = output.write_parquet_atomic

        def write(path, frame):
            if Path(path).name == name:
                raise KeyboardInterrupt
            return real(path, frame)

        monkeypatch.setattr(output, "write_parquet_atomic", write)

    return prepare


CASES = [
    # -- unbounded work: refused before anything is sized by it, the limit named -------------
    Case(
        "timestamp-1e308-replay",
        ("replay", "run", "{d}/t.jsonl", "--out", "{out}"),
        2,
        "t.jsonl:2: arrival 1e+308 ms is past the year 2286",
        files={"t.jsonl": _mooncake_rows(0, 1e308)},
    ),
    Case(
        "timestamp-seconds-ms-slip-replay",
        ("replay", "run", "{d}/t.jsonl", "--out", "{out}"),
        2,
        "t.jsonl:2: the trace (first arrival to this row) spans 31.7 years; plansim handles "
        "at most 31.0 days",
        files={"t.jsonl": _mooncake_rows(0, 1_000_000_000_000)},
    ),
    Case(
        "timestamp-1e308-inspect",
        ("trace", "inspect", "{d}/t.jsonl"),
        2,
        "past the year 2286",
        files={"t.jsonl": _mooncake_rows(0, 1e308)},
    ),
    Case(
        "timestamp-slip-inspect",
        ("trace", "inspect", "{d}/t.jsonl"),
        2,
        "spans 31.7 years",
        files={"t.jsonl": _mooncake_rows(0, 1_000_000_000_000)},
    ),
    Case(
        "speedup-stretches-replay",
        ("replay", "run", str(SAMPLE), "--arrival-speedup-ratio", "1e-9", "--out", "{out}"),
        2,
        "arrival_speedup_ratio: the replay (the trace's 10.0 min / arrival_speedup_ratio 1e-09) "
        "spans",
    ),
    Case(
        "predict-interval-tiny",
        ("predict", "compare", str(SAMPLE), "--interval", "0.000001", "--out", "{out}"),
        2,
        "--interval: the number of 1e-06 s buckets would be",
    ),
    Case(
        "predict-interval-nan",
        ("predict", "compare", str(SAMPLE), "--interval", "nan", "--out", "{out}"),
        2,
        "--interval: must be a finite number, got NaN",
    ),
    Case(
        "synth-rate-1e308",
        ("trace", "synth", "--rate", "1e308", "--duration", "60", "-o", "{d}/s.jsonl.gz"),
        2,
        "--rate: the expected number of requests (the rate schedule over the duration) would "
        "be inf; at most 20,000,000",
    ),
    Case(
        "synth-duration-1e308",
        ("trace", "synth", "--rate", "1", "--duration", "1e308", "-o", "{d}/s.jsonl.gz"),
        2,
        "--duration: must be in (0, 2,678,400] s (31 days), got 1e+308",
    ),
    Case(
        "synth-isl-mean-absurd",
        (
            "trace",
            "synth",
            "--rate",
            "1",
            "--duration",
            "60",
            "--isl-mean",
            "1e18",
            "-o",
            "{d}/s.jsonl.gz",
        ),
        2,
        "--isl: mean must be in [0, 10,000,000] tokens, got 1e+18",
    ),
    Case(
        "num-workers-1e8-file",
        REPLAY_D,
        2,
        "d.yaml:1: num_workers: input should be less than or equal to 4096, got 100000000",
        files={"d.yaml": "num_workers: 100000000\n"},
    ),
    Case(
        "num-workers-1e8-flag",
        ("replay", "run", str(MICRO), "--num-workers", "100000000", "--out", "{out}"),
        2,
        "--num-workers: input should be less than or equal to 4096",
    ),
    # 10,000 s of replay ticked every millisecond: 10,000,000 ticks
    Case(
        "planner-ticks-unbounded",
        ("replay", "run", "{d}/t.jsonl", "--planner-config", "{d}/p.yaml", "--out", "{out}"),
        2,
        "scheduling.scale_interval_seconds: the planner's ticks over the replay (one per "
        "0.001 s) would be 10,000,000; at most 1,000,000",
        files={
            "t.jsonl": _mooncake_rows(0, 10_000_000),
            "p.yaml": "mode: agg\nload_adjustment_interval_seconds: 0.001\n",
        },
    ),
    # -- tracebacks before: now one line ---------------------------------------------------
    Case(
        "planner-interval-1e308",
        ("replay", "run", str(MICRO), "--planner-config", "{d}/p.yaml", "--out", "{out}"),
        2,
        "p.yaml:3: throughput_adjustment_interval_seconds: input should be less than or equal "
        "to 2678400",
        files={
            "p.yaml": "mode: agg\noptimization_target: sla\n"
            "throughput_adjustment_interval_seconds: 1.0e+308\n"
        },
    ),
    Case(
        "load-interval-1e308",
        ("replay", "run", str(MICRO), "--planner-config", "{d}/p.yaml", "--out", "{out}"),
        2,
        "load_adjustment_interval_seconds: input should be less than or equal to 2678400",
        files={"p.yaml": "mode: agg\nload_adjustment_interval_seconds: 1.0e+308\n"},
    ),
    Case(
        "seed-huge",
        ("replay", "run", str(MICRO), "--seed", "99999999999999999999999", "--out", "{out}"),
        2,
        "--seed: input should be less than or equal to 9223372036854775807",
    ),
    Case(
        "seed-negative",
        ("replay", "run", str(MICRO), "--seed", "-1", "--out", "{out}"),
        2,
        "--seed: input should be greater than or equal to 0, got -1",
    ),
    Case(
        "synth-seed-huge",
        (
            "trace",
            "synth",
            "--rate",
            "1",
            "--duration",
            "10",
            "--seed",
            "99999999999999999999999",
            "-o",
            "{d}/s.jsonl.gz",
        ),
        2,
        "--seed: must be in [0, 9223372036854775807]",
    ),
    Case(
        "config-invalid-utf8",
        REPLAY_D,
        2,
        "d.yaml:2: not UTF-8 text: byte 0xff at column 17",
        files={"d.yaml": b'num_workers: 2\nrouter: {mode: "\xff"}\n'},
    ),
    Case(
        "planner-invalid-utf8",
        ("replay", "run", str(MICRO), "--planner-config", "{d}/p.yaml", "--out", "{out}"),
        2,
        "p.yaml:1: not UTF-8 text: byte 0xfe",
        files={"p.yaml": b"mode: \xfe\n"},
    ),
    Case(
        "retune-run-invalid-utf8",
        ("retune", "sweep", "{d}/r.yaml", "--out", "{out}"),
        2,
        "r.yaml:1: not UTF-8 text",
        files={"r.yaml": b"trace: \xc3\x28\n"},
    ),
    Case(
        "out-is-a-file-replay",
        ("replay", "run", str(MICRO), "--out", "{d}/a_file"),
        2,
        "--out: {d}/a_file exists and is not a folder",
        files={"a_file": "x"},
    ),
    Case(
        "out-is-a-file-retune-sweep",
        ("retune", "sweep", "{d}/r.yaml", "--out", "{d}/a_file"),
        2,
        "--out: {d}/a_file exists and is not a folder",
        files={"a_file": "x", "r.yaml": _retune_run()},
    ),
    Case(
        "out-is-a-file-predict",
        ("predict", "compare", str(SAMPLE), "--interval", "60", "--out", "{d}/a_file"),
        2,
        "exists and is not a folder",
        files={"a_file": "x"},
    ),
    Case(
        "out-under-a-file",
        ("replay", "run", str(MICRO), "--out", "{d}/a_file/sub"),
        2,
        "--out: {d}/a_file is not a folder, so {d}/a_file/sub cannot be created",
        files={"a_file": "x"},
    ),
    Case(
        "out-read-only",
        ("replay", "run", str(MICRO), "--out", "/sys/plansim-out"),
        2,
        "--out: cannot write in /sys: Permission denied",
    ),
    Case(
        "disk-full-while-writing",
        ("replay", "run", str(MICRO), "--out", "{out}", "--no-report"),
        1,
        "No space left on device",
        prepare=_full_disk_after(10_000),
    ),
    Case(
        "synth-output-is-a-folder",
        ("trace", "synth", "--rate", "1", "--duration", "10", "-o", "{d}/dir"),
        2,
        "--output: {d}/dir is a folder; give a file name",
        files={"dir/keep": "x"},
    ),
    Case(
        "convert-output-is-a-folder",
        ("trace", "convert", str(MICRO), "{d}/dir", "--to", "dynamo"),
        2,
        "OUT: {d}/dir is a folder",
        files={"dir/keep": "x"},
    ),
    Case(
        "convert-onto-read-only",
        ("trace", "convert", str(MICRO), "/sys/m.jsonl", "--to", "mooncake"),
        2,
        "OUT: cannot write in /sys",
    ),
    Case(
        "synth-onto-read-only",
        ("trace", "synth", "--rate", "1", "--duration", "10", "-o", "/sys/s.jsonl.gz"),
        2,
        "--output: cannot write in /sys",
    ),
    Case(
        "synth-onto-a-device",
        ("trace", "synth", "--rate", "1", "--duration", "10", "-o", "/dev/full"),
        2,
        "--output: /dev/full is not a regular file",
    ),
    # -- accepted without a word before: refused, or reconciled loudly -----------------------
    Case(
        "mode-disagg-flag-on-agg-file",
        (
            "replay",
            "run",
            str(MICRO),
            "--config",
            str(DEPLOY),
            "--mode",
            "disagg",
            "--out",
            "{out}",
        ),
        2,
        f"--mode: {DEPLOY} sizes the agg pools (num_workers 4), which mean nothing in disagg "
        "mode; give the disagg pool sizes with --num-prefill-workers and --num-decode-workers",
    ),
    Case(
        "mode-disagg-flag-with-sizes-warns",
        (
            "replay",
            "run",
            str(MICRO),
            "--config",
            str(DEPLOY),
            "--mode",
            "disagg",
            "--num-prefill-workers",
            "1",
            "--num-decode-workers",
            "2",
            "--out",
            "{out}",
            "--no-report",
        ),
        0,
        f"{DEPLOY}: num_workers: no effect with --mode disagg",
    ),
    Case(
        "mode-agg-flag-with-prefill-flag",
        (
            "replay",
            "run",
            str(MICRO),
            "--mode",
            "agg",
            "--num-prefill-workers",
            "2",
            "--out",
            "{out}",
        ),
        2,
        "--num-prefill-workers: only with mode disagg (the mode is agg)",
    ),
    Case(
        "mode-agg-file-with-prefill-key",
        REPLAY_D,
        2,
        "d.yaml:2: num_prefill_workers: only with mode disagg (the mode is agg)",
        files={"d.yaml": "mode: agg\nnum_prefill_workers: 3\n"},
    ),
    Case(
        "mode-disagg-file-with-num-workers",
        REPLAY_D,
        2,
        "d.yaml:2: num_workers: only with mode agg (the mode is disagg)",
        files={"d.yaml": "mode: disagg\nnum_workers: 4\n"},
    ),
    Case(
        "duplicate-yaml-key",
        REPLAY_D,
        2,
        "d.yaml:3: num_workers: given twice in one mapping (first on line 1)",
        files={"d.yaml": "num_workers: 2\nseed: 1\nnum_workers: 3\n"},
    ),
    Case(
        "duplicate-json-key",
        ("replay", "run", str(MICRO), "--config", "{d}/d.json", "--out", "{out}"),
        2,
        "d.json:1: seed: given twice in one object",
        files={"d.json": '{"seed": 1, "seed": 2}'},
    ),
    Case(
        "duplicate-planner-key",
        ("replay", "run", str(MICRO), "--planner-config", "{d}/p.yaml", "--out", "{out}"),
        2,
        "p.yaml:2: mode: given twice",
        files={"p.yaml": "mode: agg\nmode: disagg\n"},
    ),
    Case(
        "boolean-as-number",
        REPLAY_D,
        2,
        "d.yaml:1: num_workers: expected a number, got true",
        files={"d.yaml": "num_workers: true\n"},
    ),
    Case(
        "boolean-as-number-planner",
        ("replay", "run", str(MICRO), "--planner-config", "{d}/p.yaml", "--out", "{out}"),
        2,
        "p.yaml:2: max_gpu_budget: expected a number, got false",
        files={"p.yaml": "mode: agg\nmax_gpu_budget: false\n"},
    ),
    Case(
        "engine-speedup-inf",
        REPLAY_D,
        2,
        "d.yaml:2: engine.speedup_ratio: input should be a finite number, got inf",
        files={"d.yaml": "engine:\n  speedup_ratio: .inf\n"},
    ),
    Case(
        "arrival-speedup-inf-flag",
        ("replay", "run", str(MICRO), "--arrival-speedup-ratio", "inf", "--out", "{out}"),
        2,
        "--arrival-speedup-ratio: input should be a finite number, got inf",
    ),
    Case(
        "windows-to-past-the-trace",
        ("retune", "windows", "{d}/r.yaml", "--to", "99", "--out", "{out}"),
        2,
        "r.yaml: --to: the trace has 4 complete window(s), 0 to 3; window 99 is past the last",
        files={"r.yaml": _retune_run()},
    ),
    Case(
        "windows-from-past-the-trace",
        ("retune", "windows", "{d}/r.yaml", "--from", "7", "--out", "{out}"),
        2,
        "--from: the trace has 4 complete window(s), 0 to 3; window 7 is past the last",
        files={"r.yaml": _retune_run()},
    ),
    Case(
        "window-past-the-trace",
        ("retune", "window", "{d}/r.yaml", "--window", "999", "--out", "{out}"),
        2,
        "--window: the trace has 4 complete window(s), 0 to 3; window 999 is past the last",
        files={"r.yaml": _retune_run()},
    ),
    Case(
        "convert-epoch-nan",
        ("trace", "convert", str(MICRO), "{d}/x.jsonl.gz", "--to", "dynamo", "--epoch-ms", "nan"),
        2,
        "--epoch-ms: must be a finite number, got NaN",
    ),
    Case(
        "convert-epoch-past-2286",
        (
            "trace",
            "convert",
            "{d}/t.jsonl",
            "{d}/x.jsonl.gz",
            "--to",
            "dynamo",
            "--epoch-ms",
            "9999999999999",
        ),
        2,
        "--epoch-ms: 9,999,999,999,999 ms puts the last arrival at 10,000,000,009,999 ms, past "
        "10,000,000,000,000 ms (the year 2286)",
        files={"t.jsonl": _mooncake_rows(0, 10_000)},
    ),
    Case(
        "report-of-foreign-retune-events",
        ("report", "{d}/r"),
        2,
        "r/retune_events.json: record 0 is not a retune decision record",
        files={"r/retune_events.json": '[{"oops": 1}]'},
    ),
    Case(
        "report-of-incomplete-run",
        ("report", "{out}"),
        2,
        "DIR: {out} holds an incomplete run",
        files={
            "out/run.json": '{"command": "plansim replay run", "status": "incomplete"}',
            "out/requests.parquet": "x",
        },
    ),
    Case(
        "reused-out-mixes-runs",
        ("replay", "run", str(MICRO), "--out", "{out}"),
        2,
        "--out: {out} already holds a run of plansim replay run; use --force to replace it",
        prepare=_run_first(
            "replay",
            "run",
            str(MICRO),
            "--planner-config",
            str(EXAMPLES / "planner.yaml"),
            "--out",
            "{out}",
            "--no-report",
        ),
    ),
    Case(
        "out-holding-other-files",
        ("replay", "run", str(MICRO), "--out", "{out}"),
        2,
        "--out: {out} is not empty; use --force",
        files={"out/notes.txt": "mine"},
    ),
    # -- interrupted while writing: the folder says so -------------------------------------
    Case(
        "interrupted-after-first-files",
        ("replay", "run", str(MICRO), "--out", "{out}", "--no-report"),
        130,
        "plansim: interrupted",
        prepare=_interrupt_at("requests.parquet"),
    ),
    # -- messages: the flag, the NaN, the file --------------------------------------------
    Case(
        "flag-error-names-the-flag",
        ("replay", "run", str(MICRO), "--num-workers", "0", "--out", "{out}"),
        2,
        "--num-workers: input should be greater than or equal to 1, got 0",
    ),
    Case(
        "nan-flag-says-nan",
        ("replay", "run", str(MICRO), "--sla-ttft-ms", "nan", "--out", "{out}"),
        2,
        "--sla-ttft-ms: input should be a finite number, got NaN",
    ),
    Case(
        "nan-in-file-says-nan",
        REPLAY_D,
        2,
        "d.yaml:1: sla.ttft_ms: input should be a finite number, got NaN",
        files={"d.yaml": "sla: {ttft_ms: .nan}\n"},
    ),
    Case(
        "nan-planner-says-nan",
        ("replay", "run", str(MICRO), "--planner-config", "{d}/p.yaml", "--out", "{out}"),
        2,
        "p.yaml:2: kalman_r: input should be a finite number, got NaN",
        files={"p.yaml": "mode: agg\nkalman_r: .nan\n"},
    ),
    Case(
        "byte-order-mark-accepted",
        ("replay", "run", str(MICRO), "--config", "{d}/d.yaml", "--out", "{out}", "--no-report"),
        0,
        "",
        files={"d.yaml": b"\xef\xbb\xbfnum_workers: 2\n"},
    ),
    Case(
        "retune-grid-too-large-names-the-file",
        ("retune", "sweep", "{d}/r.yaml", "--out", "{out}"),
        2,
        "r.yaml:13: retune.max_candidates: the candidate grid has 2 points, more than "
        "max_candidates 1",
        files={"r.yaml": _retune_run(retune="    max_candidates: 1\n")},
    ),
    Case(
        "retune-unknown-knob-names-the-file",
        ("retune", "sweep", "{d}/r.yaml", "--out", "{out}"),
        2,
        "r.yaml:13: retune.router.foo: not a router parameter a tick can patch",
        files={"r.yaml": _retune_run(retune="      foo: {choices: [1, 2]}\n")},
    ),
    Case(
        "retune-in-replay-names-the-planner-file",
        ("replay", "run", str(SAMPLE), "--planner-config", "{d}/p.yaml", "--out", "{out}"),
        2,
        "p.yaml:5: retune.max_candidates: the candidate grid has 2 points",
        files={
            "p.yaml": "mode: agg\nenable_load_scaling: false\n"
            "enable_throughput_scaling: false\nretune:\n  max_candidates: 1\n"
            "  router:\n    overlap_score_weight: {choices: [0.0, 1.0]}\n"
        },
    ),
    Case(
        "retune-range-with-a-trillion-values",
        ("retune", "sweep", "{d}/r.yaml", "--out", "{out}"),
        2,
        "r.yaml:13: retune.router.router_temperature.range: the number of values of this range "
        "would be 1,000,000,000,001; at most 10,000 (raise step)",
        files={
            "r.yaml": _retune_run(
                retune="      router_temperature: {range: {min: 0, max: 1, step: 1.0e-12}}\n"
            )
        },
    ),
    Case(
        "planner-mode-mismatch-names-the-file",
        ("replay", "run", str(MICRO), "--planner-config", "{d}/p.yaml", "--out", "{out}"),
        2,
        "p.yaml:1: mode disagg does not match an agg deployment",
        files={"p.yaml": "mode: disagg\noptimization_target: sla\n"},
    ),
    # -- issue 33: no prompt silently cut, every bound of plansim.limits held, every request
    # rejected said in one warning ------------------------------------------------------------
    # One 512-token block cannot hold a 5,000-token prompt (the reference refuses it too).
    Case(
        "prompt-past-its-hash-blocks",
        ("replay", "run", "{d}/m.jsonl", "--out", "{out}"),
        2,
        "m.jsonl:1: input_length 5000 exceeds hash_ids capacity 512 (1 hash id of 512 tokens)",
        files={
            "m.jsonl": '{"timestamp": 0, "input_length": 5000, "output_length": 10, '
            '"hash_ids": [0]}\n'
        },
    ),
    Case(
        "prompt-of-fifty-million-tokens",
        ("replay", "run", "{d}/m.jsonl", "--out", "{out}"),
        2,
        "m.jsonl:1: input_length 50000000 exceeds hash_ids capacity 512",
        files={
            "m.jsonl": '{"timestamp": 0, "input_length": 50000000, "output_length": 10, '
            '"hash_ids": [0]}\n'
        },
    ),
    Case(
        "output-of-fifty-million-tokens",
        ("replay", "run", "{d}/m.jsonl", "--out", "{out}"),
        2,
        "m.jsonl:2: output_length 50,000,000 tokens is over plansim's bound of 10,000,000 "
        "tokens per request",
        files={
            "m.jsonl": '{"timestamp": 0, "input_length": 10, "output_length": 1, '
            '"hash_ids": [0]}\n{"timestamp": 1, "input_length": 10, '
            '"output_length": 50000000, "hash_ids": [1]}\n'
        },
    ),
    Case(
        "azure-context-of-fifty-million-tokens",
        ("replay", "run", "{d}/a.csv", "--out", "{out}"),
        2,
        "a.csv:3: ContextTokens 50,000,000 tokens is over plansim's bound of 10,000,000",
        files={
            "a.csv": "TIMESTAMP,ContextTokens,GeneratedTokens\n"
            "2023-11-16 18:17:03.98,100,10\n2023-11-16 18:17:04.03,50000000,8\n"
        },
    ),
    # One KV block of one token: neither prompt (3,000 and 6,000 tokens) fits; exit 0.
    Case(
        "every-request-rejected",
        ("replay", "run", str(MICRO), "--config", "{d}/d.yaml", "--out", "{out}", "--no-report"),
        0,
        "plansim: warning: all 2 requests were rejected (prompt_exceeds_kv_pool): the smallest "
        "prompt, 3,000 tokens, needs 3,000 KV blocks of 1 token, and a worker rank has 1 "
        "(num_gpu_blocks)",
        files={"d.yaml": "num_workers: 1\nengine: {block_size: 1, num_gpu_blocks: 1}\n"},
    ),
    # -- found by the fuzzed inputs (tests/commands/test_fuzzed_inputs.py) --------------------
    Case(
        "deployment-mode-a-list",
        REPLAY_D,
        2,
        "d.yaml:1: mode: input should be 'agg' or 'disagg', got a list",
        files={"d.yaml": "mode: []\n"},
    ),
    Case(
        "yaml-control-character",
        REPLAY_D,
        2,
        "d.yaml:2: invalid YAML: unacceptable character #x001f: special characters are not allowed",
        files={"d.yaml": b"seed: 1\nrouter: \x1f\n"},
    ),
    Case(
        "backend-a-list",
        REPLAY_D,
        2,
        "d.yaml: engine.engine_type: unknown engine backend [] (known: vllm, sglang, trtllm)",
        files={"d.yaml": "engine: {backend: []}\n"},
    ),
    Case(
        "router-mode-a-list",
        REPLAY_D,
        2,
        "d.yaml:1: router.mode: input should be a valid string, got a list",
        files={"d.yaml": "router: {mode: []}\n"},
    ),
    Case(
        "agentic-trigger-a-list",
        ("replay", "run", "{d}/a.jsonl", "--out", "{out}"),
        2,
        "a.jsonl:3: dependencies[0].trigger: trigger must be dispatch or completion, got []",
        files={
            "a.jsonl": '{"schema": "dynamo.agentic_mooncake", "version": 2, '
            '"block_size": 512}\n'
            '{"request_id": "a", "session_id": "s", "input_length": 10, '
            '"output_length": 1, "hash_ids": [1], "not_before_ms": 0}\n'
            '{"request_id": "b", "session_id": "s", "input_length": 10, '
            '"output_length": 1, "hash_ids": [1], "not_before_ms": 0, '
            '"dependencies": [{"request_id": "a", "trigger": [], '
            '"delay_ms": 0}]}\n'
        },
    ),
    # A warning from a check that passed, then a mistake: only the mistake is printed.
    Case(
        "warning-then-error-is-one-line",
        ("replay", "run", str(MICRO), "--planner-config", "{d}/p.yaml", "--out", "{out}"),
        2,
        "p.yaml:1: mode disagg does not match an agg deployment",
        files={"p.yaml": "mode: disagg\noptimization_target: throughput\nttft_ms: 100\n"},
    ),
    Case(
        "dp-size-builds-too-many-ranks",
        REPLAY_D,
        2,
        "d.yaml:1: num_workers: 4096 workers of dp_size 8 are 32,768 engine ranks; at most "
        "16,384 per pool",
        files={"d.yaml": "num_workers: 4096\nengine: {dp_size: 8}\n"},
    ),
    # Two prompts at speedup 1e-300 take ~1e300 ms: sampling each virtual second
    # toward it exhausted memory.
    Case(
        "passes-timed-in-eons",
        REPLAY_D,
        2,
        "the replay (an engine pass or delay ending there) spans 5.36e+291 years; plansim "
        "handles at most 31.0 days (check the engines' speedup_ratio and timing model)",
        files={"d.yaml": "engine: {speedup_ratio: 1.0e-300}\n"},
    ),
    Case(
        "retune-max-parallel-huge",
        ("retune", "sweep", "{d}/r.yaml", "--out", "{out}"),
        2,
        "r.yaml:10: retune.max_parallel: input should be less than or equal to 1024",
        files={"r.yaml": _retune_run().replace("max_parallel: 1", "max_parallel: 2000000")},
    ),
    Case(
        "capacity-jobs-huge",
        ("capacity", str(MICRO), "--jobs", "2000000", "--out", "{out}"),
        2,
        "Invalid value for '--jobs': Input should be less than or equal to 1024",
    ),
    # A NUL in the engine-args path (YAML's "\0"): opening it raised ValueError.
    Case(
        "engine-path-with-a-nul",
        REPLAY_D,
        2,
        "d.yaml:1: engine: a NUL character in a text",
        files={"d.yaml": 'engine: "e\\0"\n'},
    ),
    # 2**64 blocks replayed, then inputs.json could not be written; a block of 2**63 tokens
    # overflowed in the router.
    Case(
        "kv-blocks-past-64-bits",
        REPLAY_D,
        2,
        "d.yaml:1: engine.num_gpu_blocks: input should be at most 9,223,372,036,854,775,807 in "
        "size (a 64-bit whole number), got 18446744073709551616",
        files={"d.yaml": "engine: {num_gpu_blocks: 18446744073709551616}\n"},
    ),
    Case(
        "block-size-past-64-bits",
        REPLAY_D,
        2,
        "d.yaml:1: engine.block_size: input should be at most 9,223,372,036,854,775,807",
        files={"d.yaml": "engine: {block_size: 9223372036854775808}\n"},
    ),
    # retune: null passed the "has a retune block" check, then failed an assertion.
    Case(
        "retune-block-null",
        ("retune", "window", "{d}/r.yaml", "--window", "0", "--out", "{out}"),
        2,
        "planner.retune: the planner config has no retune block",
        files={"r.yaml": f"trace: {SAMPLE}\nplanner: {{mode: agg, retune: null}}\n"},
    ),
    # -- the earlier one-line errors ---------------------------------------------------------
    Case(
        "unknown-deployment-key",
        REPLAY_D,
        2,
        "d.yaml:1: num_wrokers: unknown key; did you mean 'num_workers'?",
        files={"d.yaml": "num_wrokers: 2\n"},
    ),
    Case(
        "unknown-planner-key",
        ("replay", "run", str(MICRO), "--planner-config", "{d}/p.yaml", "--out", "{out}"),
        2,
        "p.yaml:2: plannerr",
        files={"p.yaml": "mode: agg\nplannerr: 1\n"},
    ),
    Case(
        "config-yaml-syntax",
        REPLAY_D,
        2,
        "d.yaml:3: invalid YAML: expected ',' or ']'",
        files={"d.yaml": "seed: 1\nrouter: [1, 2\n"},
    ),
    Case(
        "config-top-level-list",
        REPLAY_D,
        2,
        "d.yaml: a deployment file must be a mapping at the top level, not a list",
        files={"d.yaml": "- 1\n"},
    ),
    Case(
        "config-missing",
        ("replay", "run", str(MICRO), "--config", "{d}/none.yaml", "--out", "{out}"),
        2,
        "none.yaml: cannot read deployment file",
    ),
    Case(
        "config-is-a-folder",
        ("replay", "run", str(MICRO), "--config", "{d}", "--out", "{out}"),
        2,
        "cannot read deployment file: Is a directory",
    ),
    Case(
        "router-mode-bad-flag",
        ("replay", "run", str(MICRO), "--router-mode", "fastest", "--out", "{out}"),
        2,
        "--router-mode: unknown router mode 'fastest'",
    ),
    Case(
        "mode-bad-flag",
        ("replay", "run", str(MICRO), "--mode", "both", "--out", "{out}"),
        2,
        "--mode: input should be 'agg' or 'disagg', got 'both'",
    ),
    Case(
        "engine-args-file-error-names-it",
        ("replay", "run", str(MICRO), "--extra-engine-args", "{d}/args.json", "--out", "{out}"),
        2,
        "args.json:1: num_gpu_blocks: input should be greater than or equal to 1, got 0",
        files={"args.json": '{"num_gpu_blocks": 0}'},
    ),
    Case(
        "trace-missing",
        ("replay", "run", "{d}/none.jsonl", "--out", "{out}"),
        2,
        "none.jsonl: no such file or folder",
    ),
    Case(
        "trace-row-error",
        ("trace", "inspect", "{d}/t.jsonl"),
        2,
        "t.jsonl:2: output_length is missing",
        files={"t.jsonl": _mooncake_rows(0) + '{"timestamp": 5, "hash_ids": [1]}\n'},
    ),
    Case(
        "trace-not-json",
        ("trace", "inspect", "{d}/t.jsonl"),
        2,
        "t.jsonl:1: not JSON",
        files={"t.jsonl": "{oops\n"},
    ),
    Case(
        "trace-format-unknown", ("trace", "inspect", str(SAMPLE), "--format", "csv"), 2, "--format"
    ),
    Case(
        "trace-bad-gzip",
        ("trace", "inspect", "{d}/t.jsonl.gz"),
        2,
        "t.jsonl.gz",
        files={"t.jsonl.gz": gzip.compress(_mooncake_rows(0, 1, 2).encode())[:-12]},
    ),
    Case(
        "convert-to-unknown",
        ("trace", "convert", str(MICRO), "{d}/x.jsonl", "--to", "parquet"),
        2,
        "--to: unknown output format 'parquet'",
    ),
    Case(
        "synth-step-malformed",
        (
            "trace",
            "synth",
            "--rate",
            "1",
            "--duration",
            "5",
            "--step",
            "oops",
            "-o",
            "{d}/s.jsonl.gz",
        ),
        2,
        "--step",
    ),
    Case(
        "synth-duration-negative",
        ("trace", "synth", "--rate", "1", "--duration", "-5", "-o", "{d}/s.jsonl.gz"),
        2,
        "--duration",
    ),
    Case(
        "predict-unknown-predictor",
        (
            "predict",
            "compare",
            str(SAMPLE),
            "--interval",
            "60",
            "--predictors",
            "oracle",
            "--out",
            "{out}",
        ),
        2,
        "--predictors",
    ),
    Case(
        "predict-malformed-param",
        (
            "predict",
            "compare",
            str(SAMPLE),
            "--interval",
            "60",
            "--param",
            "kalman_r",
            "--out",
            "{out}",
        ),
        2,
        "--param: expected NAME=VALUE",
    ),
    Case(
        "predict-jobs-zero",
        ("predict", "compare", str(SAMPLE), "--interval", "60", "--jobs", "0", "--out", "{out}"),
        2,
        "--jobs: must be in [1, 1,024], got 0",
    ),
    Case(
        "predict-too-few-buckets",
        ("predict", "compare", str(SAMPLE), "--interval", "300", "--out", "{out}"),
        2,
        "--interval: the traces span 1",
    ),
    Case(
        "retune-run-unknown-key",
        ("retune", "sweep", "{d}/r.yaml", "--out", "{out}"),
        2,
        "r.yaml:1: tracee: unknown key",
        files={"r.yaml": "tracee: x.jsonl\n"},
    ),
    Case(
        "retune-run-without-retune",
        ("retune", "sweep", "{d}/r.yaml", "--out", "{out}"),
        2,
        "planner.retune: the planner config has no retune block",
        files={"r.yaml": f"trace: {SAMPLE}\nplanner: {{mode: agg}}\n"},
    ),
    Case(
        "retune-run-mooncake-trace",
        ("retune", "sweep", "{d}/r.yaml", "--out", "{out}"),
        2,
        "is a mooncake trace; retune windows are read from dynamo traces",
        files={"r.yaml": _retune_run().replace(str(SAMPLE), str(MICRO))},
    ),
    Case(
        "retune-timeout-over-interval",
        ("retune", "sweep", "{d}/r.yaml", "--out", "{out}"),
        2,
        "retune.timeout_seconds: 500 exceeds interval_seconds 120",
        files={"r.yaml": _retune_run(retune="    timeout_seconds: 500\n")},
    ),
    Case(
        "windows-to-before-from",
        ("retune", "windows", "{d}/r.yaml", "--from", "2", "--to", "1", "--out", "{out}"),
        2,
        "--to: 1 is before --from 2",
        files={"r.yaml": _retune_run()},
    ),
    Case(
        "windows-ray-address-without-ray",
        ("retune", "windows", "{d}/r.yaml", "--ray-address", "h:1", "--out", "{out}"),
        2,
        "--ray-address: only with --backend ray",
        files={"r.yaml": _retune_run()},
    ),
    Case(
        "report-nothing-to-render",
        ("report", "{d}/empty"),
        2,
        "nothing to render",
        files={"empty/notes.txt": "x"},
    ),
    Case("report-not-a-folder", ("report", "{d}/none"), 2, "none: not a folder"),
    Case(
        "unknown-option",
        ("replay", "run", str(MICRO), "--num-wrokers", "2"),
        2,
        "No such option: --num-wrokers",
    ),
    Case(
        "option-not-a-number",
        ("replay", "run", str(MICRO), "--num-workers", "two"),
        2,
        "Invalid value for '--num-workers': Input should be a valid integer",
    ),
]


def _expand(text: str, case_dir: Path) -> str:
    return text.replace("{d}", str(case_dir)).replace("{out}", str(case_dir / "out"))


def _snapshot(folder: Path) -> dict[str, str] | None:
    """Every file under ``folder`` with a digest of its bytes (None: no such folder)."""
    if not folder.exists():
        return None
    return {
        str(p.relative_to(folder)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(folder.rglob("*"))
        if p.is_file()
    }


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_bad_input(case: Case, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, run_cli):
    case_dir = tmp_path / "case"
    case_dir.mkdir()
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private_tmp))
    monkeypatch.setenv("TMPDIR", str(private_tmp))
    monkeypatch.chdir(case_dir)
    for name, content in case.files.items():
        path = case_dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)
    if case.prepare is not None:
        case.prepare(case_dir, monkeypatch, run_cli)
    out = case_dir / "out"
    out_before = _snapshot(out)
    children_before = live_children(os.getpid())

    code, stdout, err = run_cli(*(_expand(a, case_dir) for a in case.args))

    assert code == case.status, err
    assert "Traceback" not in err + stdout
    assert _expand(case.message, case_dir) in err
    if case.status != 0:
        lines = err.splitlines()
        assert len(lines) == 1 and lines[0].startswith("plansim: "), err
        if case.id == "interrupted-after-first-files":
            # Marked incomplete, with what was written before the interruption.
            assert json.loads((out / "run.json").read_text())["status"] == "incomplete"
            assert sorted(p.name for p in out.iterdir()) == [
                "inputs.json",
                "run.json",
                "summary.json",
            ]
        elif case.id == "disk-full-while-writing":
            assert json.loads((out / "run.json").read_text())["status"] == "incomplete"
            assert not [p for p in out.iterdir() if p.name.endswith(".tmp")]
        else:
            assert _snapshot(out) == out_before  # nothing written, nothing replaced
    else:
        assert json.loads((out / "run.json").read_text())["status"] == "complete"
    assert list(private_tmp.iterdir()) == []
    assert live_children(os.getpid()) <= children_before


# -- interruptions: a real process, signalled as a terminal or a user would ------------------


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()[:200]
    except OSError:
        return f"{pid} (gone)"


@dataclass(frozen=True)
class Interruption:
    """``args`` run until ``ready`` descendant processes exist (the workers are busy), then
    ``signum`` goes to the process group (SIGINT, as Ctrl-C) or to the process (SIGTERM,
    SIGKILL). ``status`` None: killed, so no exit line to check."""

    id: str
    args: tuple[str, ...]
    signum: int
    ready: int
    status: int | None
    message: str


RETUNE_SWEEP = ("retune", "sweep", str(RETUNE), "--out", "{out}", "--no-report")
INTERRUPTIONS = [
    Interruption(
        "ctrl-c-during-retune-sweep", RETUNE_SWEEP, signal.SIGINT, 2, 130, "plansim: interrupted"
    ),
    Interruption(
        "sigterm-during-retune-sweep",
        RETUNE_SWEEP,
        signal.SIGTERM,
        2,
        143,
        "plansim: terminated (SIGTERM)",
    ),
    Interruption("sigkill-during-retune-sweep", RETUNE_SWEEP, signal.SIGKILL, 2, None, ""),
    Interruption(
        "sigkill-during-predict-compare-jobs-2",
        (
            "predict",
            "compare",
            str(SAMPLE),
            "--interval",
            "10",
            "--jobs",
            "2",
            "--out",
            "{out}",
            "--no-report",
        ),
        signal.SIGKILL,
        3,
        None,
        "",
    ),
    Interruption(
        "ctrl-c-during-predict-compare-jobs-2",
        (
            "predict",
            "compare",
            str(SAMPLE),
            "--interval",
            "10",
            "--jobs",
            "2",
            "--out",
            "{out}",
            "--no-report",
        ),
        signal.SIGINT,
        3,
        130,
        "plansim: interrupted",
    ),
    Interruption(
        "sigkill-during-retune-windows-ray",
        ("retune", "windows", str(RETUNE), "--backend", "ray", "--out", "{out}", "--no-report"),
        signal.SIGKILL,
        6,
        None,
        "",
    ),
]


@pytest.mark.slow
@pytest.mark.parametrize("case", INTERRUPTIONS, ids=[c.id for c in INTERRUPTIONS])
def test_interruption_leaves_nothing_behind(case: Interruption, tmp_path: Path):
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    out = tmp_path / "out"
    env = {**os.environ, "TMPDIR": str(private_tmp)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "plansim", *(a.replace("{out}", str(out)) for a in case.args)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    seen: dict[int, int] = {}
    try:
        deadline = time.monotonic() + 120
        while len(seen) < case.ready:
            assert proc.poll() is None and time.monotonic() < deadline, "never got busy"
            table = process_table()
            seen.update(descendants(proc.pid, table))
            seen = {pid: st for pid, st in seen.items() if table.get(pid, (0, None))[1] == st}
            time.sleep(0.05)
        if case.signum == signal.SIGINT:
            os.killpg(proc.pid, signal.SIGINT)
        else:
            os.kill(proc.pid, case.signum)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()

    if case.status is None:
        assert proc.returncode == -signal.SIGKILL, err
    else:
        assert proc.returncode == case.status, err
        assert err.splitlines() == [case.message]
    assert "Traceback" not in err
    deadline = time.monotonic() + GONE_WITHIN_S
    while True:
        table = process_table()
        left = [pid for pid, start in seen.items() if table.get(pid, (0, None))[1] == start]
        if not left or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert left == [], f"processes outlived the command: {[_cmdline(pid) for pid in left]}"
    while list(private_tmp.iterdir()) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert list(private_tmp.iterdir()) == []
    # A run stopped before writing leaves no folder (a killed one, its stale lock: the next
    # run names it); one stopped while writing says so.
    if out.exists() and (case.status is not None or (out / "run.json").exists()):
        marker = json.loads((out / "run.json").read_text())
        assert marker["status"] == "incomplete"
    elif out.exists():
        assert [p.name for p in out.iterdir()] == [".plansim.lock"]
