"""Ground truth for ``bench/calibration.py``: timing profiles plansim does not see, input traces,
and the reference replay's answers under them.

A case is a trace, a timing profile (the reference mocker's NPZ form, written here from a
formula) and the worker count N it is "recorded" at. The reference replays the trace at N with
its per-request figures, which become the trace's recorded ``ttft_ms`` / ``total_time_ms``
(``recorded.dynamo.jsonl.gz``, all ``plansim calibrate`` reads), and at the other counts for
the summaries and the goodput the calibrated model must predict. Everything is written once
under ``bench/_data/calibration`` and reused (delete the folder to rebuild it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
SHARED = next(
    (p / "shared" for p in ROOT.parents if (p / "shared" / "reference").is_dir()),
    ROOT.parent / "shared",
)
DATA = ROOT / "bench" / "_data" / "calibration"
PEER_SCRIPT = ROOT / "bench" / "calibration_peer.py"

ISL_GRID = np.array([64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768], dtype=float)
KV_GRID = np.array(
    [0, 4096, 16384, 65536, 131072, 262144, 393216, 524288, 786432, 1048576], dtype=float
)
CTX_GRID = np.array([64, 512, 2048, 8192, 32768], dtype=float)


def _profile(
    prefill: Callable[[np.ndarray], np.ndarray],
    decode: Callable[[np.ndarray, np.ndarray], np.ndarray],
) -> dict[str, np.ndarray]:
    kv, ctx = np.meshgrid(KV_GRID, CTX_GRID, indexing="ij")
    return {
        "prefill_isl": ISL_GRID,
        "prefill_ttft_ms": prefill(ISL_GRID),
        "decode_active_kv_tokens": KV_GRID,
        "decode_context_length": CTX_GRID,
        "decode_itl": decode(kv, ctx),
    }


def _sample_scaled(prefill_x: float, decode_x: float) -> dict[str, np.ndarray]:
    with np.load(SHARED / "reference" / "profiles" / "sample_h200.npz") as z:
        arrays = {k: np.array(z[k], dtype=float) for k in z.files}
    arrays["prefill_ttft_ms"] = arrays["prefill_ttft_ms"] * prefill_x
    arrays["decode_itl"] = arrays["decode_itl"] * decode_x
    return arrays


# Profiles of other shapes than the sample: prefill from a pass's new tokens T, decode from
# (active KV tokens, mean context); kv / ctx is the batch size.
PROFILES: dict[str, Callable[[], dict[str, np.ndarray]]] = {
    # The sample profile, prefill 1.7x slower and decode 0.75x (a different GPU).
    "scaled": lambda: _sample_scaled(1.7, 0.75),
    # Attention-heavy prefill (quadratic term 3x the sample's), decode steep in KV tokens.
    "attn_heavy": lambda: _profile(
        lambda t: 25.0 + 0.02 * t + 1.2e-6 * t * t, lambda kv, ctx: 9.0 + 3.0e-5 * kv + 1.0e-4 * ctx
    ),
    # Decode bound by the batch size (a weight-streaming term per request), little by KV.
    "batch_bound": lambda: _profile(
        lambda t: 12.0 + 0.03 * t + 2.0e-7 * t * t,
        lambda kv, ctx: 6.0 + 0.04 * kv / ctx + 1.0e-5 * kv,
    ),
    # Another polynomial, for a larger model: 4.5 x (prefill 3e-7 T^2 + 0.025 T + 22, decode
    # -10 u^2 + 40 u + 8 in the KV fill fraction u of the default pool, 16384 x 64 tokens).
    "poly_other": lambda: _profile(
        lambda t: 4.5 * (22.0 + 0.025 * t + 3.0e-7 * t * t),
        lambda kv, ctx: (
            4.5 * (8.0 + 40.0 * (kv / 1048576.0) - 10.0 * (kv / 1048576.0) ** 2) + 0.0 * ctx
        ),
    ),
}


@dataclass(frozen=True)
class Case:
    """One calibration case: ``trace`` (a Dynamo trace without latencies, or with them for the
    shared case), ``profile`` (a name of ``PROFILES`` or an NPZ path), recorded at
    ``recorded_at`` workers, KV router, default engine, SLA ``sla_ttft_ms`` / ``sla_itl_ms``;
    ``counts``: the counts whose answers are predicted; ``low_counts``: further counts whose
    goodput the cheapest-count check needs; ``truth``: reference summaries given by a file
    (count -> summary) instead of replayed."""

    name: str
    trace: str
    profile: str
    recorded_at: int
    sla_ttft_ms: float
    sla_itl_ms: float
    counts: tuple[int, ...] = ()
    low_counts: tuple[int, ...] = ()
    truth: dict[int, dict] = field(default_factory=dict)
    recorded_trace: str | None = None

    def all_counts(self) -> tuple[int, ...]:
        return tuple(sorted(set(self.counts) | set(self.low_counts) | {self.recorded_at}))


def _around(n: int) -> tuple[int, ...]:
    return tuple(c for c in (n - 4, n - 2, n + 2, n + 4) if c >= 1)


def builtin_cases() -> list[Case]:
    """The cases this benchmark makes (its traces are written by ``ensure_traces``)."""
    return [
        Case(
            "mooncake-scaled",
            "mooncake.dynamo.jsonl.gz",
            "scaled",
            8,
            2000,
            15,
            _around(8),
            (1, 2, 3, 5),
        ),
        Case(
            "mooncake-attn",
            "mooncake.dynamo.jsonl.gz",
            "attn_heavy",
            10,
            3000,
            25,
            _around(10),
            (1, 2, 3, 4, 5),
        ),
        Case(
            "azure-batch",
            "azure.dynamo.jsonl.gz",
            "batch_bound",
            6,
            1000,
            20,
            _around(6),
            (1, 2, 3, 5),
        ),
        Case(
            "synth-poly",
            "synth12k.dynamo.jsonl.gz",
            "poly_other",
            8,
            3000,
            60,
            _around(8),
            (2, 3, 5, 7),
        ),
    ]


def shared_case(path: Path) -> Case:
    """A case in the form of ``calibration_cases.json``: the trace recorded at
    ``recorded_at_workers`` and the reference's summaries at ``counts``; SLA ``sla_ttft_ms`` /
    ``sla_itl_ms`` when the file has them, else 2000 / 15 ms (the shared file's)."""
    data = json.loads(path.read_text())
    counts = {int(k): v for k, v in data["counts"].items()}
    n = int(data["recorded_at_workers"])
    trace = (path.parent / data["trace"]).resolve()
    return Case(
        path.stem,
        str(trace),
        str((path.parent / data.get("profile", "")).resolve()) if data.get("profile") else "",
        n,
        float(data.get("sla_ttft_ms", 2000)),
        float(data.get("sla_itl_ms", 15)),
        tuple(c for c in sorted(counts) if c != n),
        truth=counts,
        recorded_trace=str(trace),
    )


def ensure_traces() -> None:
    """The input traces of the built-in cases, as Dynamo traces without latencies."""
    from plansim.traces import load_workload
    from plansim.traces.writers import write_dynamo

    DATA.mkdir(parents=True, exist_ok=True)
    nan = None
    inputs = {
        "mooncake.dynamo.jsonl.gz": lambda: load_workload(
            [SHARED / "traces" / "mooncake_synthetic_trace.jsonl"],
            format="mooncake",
            trace_block_size=512,
        ),
        "azure.dynamo.jsonl.gz": lambda: load_workload(
            [SHARED / "traces" / "AzureLLMInferenceTrace_code.csv"],
            format="azure",
            trace_block_size=512,
        ),
    }
    for name, load in inputs.items():
        if not (DATA / name).exists():
            w = load()
            nan = np.full(len(w), np.nan)
            write_dynamo(w, DATA / name, ttft_ms=nan, total_ms=nan, epoch_ms=1.764e12)
    synth = DATA / "synth12k.dynamo.jsonl.gz"
    if not synth.exists():
        # One hour, 12,000 requests (3.33/s, diurnal), chat-like lengths with shared prefixes.
        subprocess.run(
            [
                sys.executable,
                "-m",
                "plansim",
                "trace",
                "synth",
                "-o",
                str(synth),
                "--rate",
                "3.3333",
                "--duration",
                "3600",
                "--schedule",
                "diurnal",
                "--peak-to-trough",
                "3",
                "--isl-mean",
                "3000",
                "--osl-mean",
                "400",
                "--prefix-groups",
                "40",
                "--shared-prefix-ratio",
                "0.5",
                "--seed",
                "11",
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )


def profile_path(case: Case) -> Path:
    if case.profile in PROFILES:
        path = DATA / "profiles" / f"{case.profile}.npz"
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            np.savez(path, **PROFILES[case.profile]())
        return path
    return Path(case.profile)


def peer_python() -> Path:
    folder = Path(os.environ.get("PEER_DIR", Path.home() / ".cache" / "plansim-peer"))
    python = folder / "venv" / "bin" / "python"
    if not python.exists():
        sys.exit(f"calibration: no reference venv at {folder} (run ../shared/tools/peer_env.sh)")
    return python


def run_peer(jobs: list[dict], processes: int = 2) -> list[dict]:
    """The reference replay of each job (``bench/calibration_peer.py``), in order, spread over
    ``processes`` reference processes."""
    chunks = [jobs[i::processes] for i in range(processes) if jobs[i::processes]]
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "RUST_LOG": "error"}
        quiet = {"env": env, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
        running = []
        for i, chunk in enumerate(chunks):
            spec, out = Path(tmp) / f"jobs{i}.json", Path(tmp) / f"out{i}.json"
            spec.write_text(json.dumps(chunk))
            command = [str(peer_python()), str(PEER_SCRIPT), str(spec), str(out)]
            running.append((subprocess.Popen(command, **quiet), out))
        results = []
        for proc, out in running:
            if proc.wait() != 0:
                sys.exit(f"calibration: the reference replay failed (exit {proc.returncode})")
            results.append(json.loads(out.read_text()))
    ordered: list[dict] = [{}] * len(jobs)
    for i, chunk_results in enumerate(results):
        ordered[i :: len(chunks)] = chunk_results
    return ordered


# The reference replay is not deterministic: the same job replayed eight times (mooncake-attn at
# 5 workers) gave 95.0% to 96.0% goodput and a median TTFT of 69.8 to 88.0 ms. Each count is
# replayed this many times; the truth is the median of each figure.
TRUTH_REPEATS = 5


@dataclass(frozen=True)
class Truth:
    """The reference's answers for one case: ``summaries`` (count -> the per-figure median of
    its repeats) and ``repeats`` (count -> every repeat's summary; one for a case whose truth a
    file gives)."""

    summaries: dict[int, dict]
    repeats: dict[int, list[dict]]


def ensure_truth(case: Case, repeats: int = TRUTH_REPEATS) -> tuple[Path, Truth]:
    """The recorded trace of ``case`` (the first repeat at ``recorded_at``: one recording, as a
    user has) and the reference's answers at each of its counts, ``repeats`` replays each (the
    replays missing from ``truth.json`` are run and added)."""
    if case.truth and case.recorded_trace:
        given = {n: [s] for n, s in case.truth.items()}
        return Path(case.recorded_trace), Truth(dict(case.truth), given)
    folder = DATA / case.name
    folder.mkdir(parents=True, exist_ok=True)
    truth_file, recorded = folder / "truth.json", folder / "recorded.dynamo.jsonl.gz"
    kept: dict[int, list[dict]] = {}
    if truth_file.exists() and recorded.exists():
        for k, v in json.loads(truth_file.read_text()).items():
            kept[int(k)] = v if isinstance(v, list) else [v]
    if case.recorded_at not in kept:
        # A new recording: answers replayed against another recording's truth do not mix.
        kept = {}
    trace = str(DATA / case.trace)
    npz = str(profile_path(case))
    jobs, owners = [], []
    for n in case.all_counts():
        for r in range(len(kept.get(n, [])), repeats):
            owners.append(n)
            jobs.append(
                {
                    "trace": trace,
                    "trace_format": "dynamo",
                    "num_workers": n,
                    "router_mode": "kv_router",
                    "npz": npz,
                    "sla_ttft_ms": case.sla_ttft_ms,
                    "sla_itl_ms": case.sla_itl_ms,
                    "per_request": n == case.recorded_at and r == 0,
                }
            )
    if jobs:
        for n, job, out in zip(owners, jobs, run_peer(jobs)):
            if job["per_request"]:
                write_recorded(trace, out["requests"], recorded)
            kept.setdefault(n, []).append(out["summary"])
        truth_file.write_text(json.dumps({str(n): kept[n] for n in sorted(kept)}, indent=1))
    used = {n: kept[n][:repeats] for n in case.all_counts()}
    return recorded, Truth({n: median_summary(s) for n, s in used.items()}, used)


def median_summary(summaries: list[dict]) -> dict:
    """Each numeric figure's median over ``summaries`` (the keys all of them have)."""
    keys = set.intersection(*(set(s) for s in summaries))
    return {
        k: float(np.median([s[k] for s in summaries]))
        for k in sorted(keys)
        if all(isinstance(s[k], (int, float)) for s in summaries)
    }


def write_recorded(trace: str, requests: dict[str, list], out: Path) -> None:
    """``trace`` with the reference's per-request TTFT and E2E as recorded latencies. The
    reference lists requests by arrival, not always in file order among equal arrivals, so rows
    are matched by (arrival, input length, output length)."""
    from plansim.traces import load_workload
    from plansim.traces.writers import write_dynamo

    w = load_workload([trace], format="dynamo")
    rows: dict[tuple, list[int]] = {}
    for i, key in enumerate(
        zip(
            np.round(w.arrival_ms - w.arrival_ms.min(), 3).tolist(),
            w.isl_tokens.tolist(),
            w.osl_tokens.tolist(),
        )
    ):
        rows.setdefault(key, []).append(i)
    ttft, total = np.full(len(w), np.nan), np.full(len(w), np.nan)
    for arrival, isl, osl, t, e, status in zip(
        requests["arrival_time_ms"],
        requests["input_length"],
        requests["requested_output_length"],
        requests["ttft_ms"],
        requests["e2e_latency_ms"],
        requests["terminal_status"],
    ):
        i = rows[(round(arrival, 3), isl, osl)].pop(0)
        if status == "completed":
            ttft[i], total[i] = t, e
    write_dynamo(w, out, ttft_ms=ttft, total_ms=total, epoch_ms=0.0)
