"""Adding an extension is one module and one registration line: for each extension point, a
throwaway extension is written into a copy of the package (its module, and its line in the
registry's table, nothing else), and a fresh interpreter shows it working end to end: validated
from a config, named in the help, run in a replay, a planner, a trace load or a report.

(A report panel is one ``Panel`` entry in a report's ``PANELS``: ``tests/reports/test_panels``.)
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import plansim

ROOT = Path(plansim.__file__).resolve().parent


def _extend(tmp_path: Path, module: str, source: str, table: str, line: str) -> Path:
    """A copy of the package with ``module`` (a path under ``plansim/``) added and ``line``
    added as the first entry of the registry table in ``table``."""
    tree = tmp_path / "tree"
    shutil.copytree(ROOT, tree / "plansim", ignore=shutil.ignore_patterns("__pycache__"))
    (tree / "plansim" / module).write_text(textwrap.dedent(source), encoding="utf-8")
    path = tree / "plansim" / table
    text = path.read_text(encoding="utf-8")
    opening = text.index("{", text.index("Registry("))
    at = text.index("\n", opening) + 1
    path.write_text(text[:at] + f"    {line}\n" + text[at:], encoding="utf-8")
    return tree


def _run(tree: Path, code: str, cwd: Path) -> dict:
    """Run ``PRELUDE`` and ``code`` with the copy first on the path; it prints one JSON
    object."""
    env = {**os.environ, "PYTHONPATH": str(tree)}
    done = subprocess.run(
        [sys.executable, "-c", PRELUDE + textwrap.dedent(code)],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


# Shared by the snippets: a workload of (arrival_ms, isl, osl) rows, a replay of it, and the
# one-line message of a bad config.
PRELUDE = """
import json
import numpy as np
from plansim.errors import ConfigError
from plansim.sim.deployment import build_deployment
from plansim.sim.host import replay
from plansim.traces.workload import Workload

def workload(rows):
    n = len(rows)
    return Workload(
        arrival_ms=np.array([r[0] for r in rows], dtype=np.float64),
        isl_tokens=np.array([r[1] for r in rows], dtype=np.int64),
        osl_tokens=np.array([r[2] for r in rows], dtype=np.int64),
        request_id=np.array([f"r{i}" for i in range(n)], dtype=object),
        hash_offsets=np.arange(n + 1, dtype=np.int64),
        hash_ids=np.arange(n, dtype=np.int64), trace_block_size=512)

def error(raw):
    try:
        build_deployment(raw)
    except ConfigError as exc:
        return str(exc)
    return None
"""


def test_a_new_engine_backend(tmp_path):
    tree = _extend(
        tmp_path,
        "sim/schedulers/one_at_a_time.py",
        '''
        """``one_at_a_time``: vLLM passes with at most ``max_running`` requests running."""

        from dataclasses import dataclass

        from plansim.params import param
        from plansim.sim.schedulers.vllm import VllmScheduler


        @dataclass(frozen=True, slots=True)
        class OneAtATimeKnobs:
            max_running: int = param(1, ge=1, help="requests running at once")


        class OneAtATimeScheduler(VllmScheduler):
            __slots__ = ()
            default_block_size = 16
            Knobs = OneAtATimeKnobs
            host_offload = False

            def __init__(self, args):
                super().__init__(args)
                self.max_num_seqs = args.one_at_a_time.max_running
        ''',
        "sim/schedulers/__init__.py",
        '"one_at_a_time": "plansim.sim.schedulers.one_at_a_time:OneAtATimeScheduler",',
    )
    out = _run(
        tree,
        """
        fixed = {"type": "fixed", "prefill_ms": 5.0, "decode_ms": 5.0}
        rows = [(0.0, 100, 2), (0.0, 100, 2)]
        def e2e(engine):
            result = replay(workload(rows), build_deployment({"engine": engine}))
            return result.requests["e2e_latency_ms"].tolist()
        engine = build_deployment({"engine": {"backend": "one_at_a_time",
                                               "one_at_a_time_max_running": 2}}).engine
        print(json.dumps({
            "vllm": e2e({"timing_model": fixed}),
            "one": e2e({"backend": "one_at_a_time", "timing_model": fixed}),
            "block_size": engine.block_size, "max_running": engine.one_at_a_time.max_running,
            "bad": error({"engine": {"backend": "one_at_a_time",
                                     "one_at_a_time": {"max_running": 0}}}),
        }))
        """,
        tmp_path,
    )
    # Two 2-token requests at 0 ms, 5 ms passes: batched, both end after a prefill and a decode
    # pass (10 ms); one at a time, the second starts when the first ends (20 ms).
    assert out["vllm"] == [10.0, 10.0] and out["one"] == [10.0, 20.0]
    assert out["block_size"] == 16 and out["max_running"] == 2  # the older flat spelling
    assert "engine.one_at_a_time.max_running" in out["bad"]


def test_a_new_routing_policy(tmp_path):
    tree = _extend(
        tmp_path,
        "sim/routing/first_ready.py",
        '''
        """``first_ready``: the first ready rank (or the last, ``pick_last``)."""

        from dataclasses import dataclass

        from plansim.params import param
        from plansim.sim.routing.base import Policy, Route


        @dataclass(frozen=True, slots=True)
        class FirstReadyKnobs:
            pick_last: bool = param(False, help="choose the last ready rank instead")


        class FirstReady(Policy):
            Knobs = FirstReadyKnobs
            draws = False
            reads_prefix_cache = False
            observes_first_tokens = False

            def choose(self, isl, keys, views, loads):
                return Route(len(views) - 1 if self.pick_last else 0, 0)
        ''',
        "sim/routing/__init__.py",
        '"first_ready": "plansim.sim.routing.first_ready:FirstReady",',
    )
    out = _run(
        tree,
        """
        from plansim.commands.router_flags import ROUTER_MODE_HELP
        rows = [(0.0, 100, 2), (1.0, 100, 2), (2.0, 100, 2)]
        def workers(router):
            dep = build_deployment({"num_workers": 3, "router": router})
            return sorted(set(replay(workload(rows), dep).requests["decode_worker"].tolist()))
        print(json.dumps({
            "first": workers({"mode": "first-ready"}),
            "last": workers({"mode": "first_ready", "pick_last": True}),
            "round_robin": workers({"mode": "round_robin"}),
            "help": ROUTER_MODE_HELP,
            "bad": error({"router": {"mode": "first_ready", "pick_last": "often"}}),
        }))
        """,
        tmp_path,
    )
    assert len(out["first"]) == 1 and len(out["last"]) == 1 and out["first"] != out["last"]
    assert len(out["round_robin"]) == 3
    assert "first_ready" in out["help"]
    assert "router.pick_last" in out["bad"]


def test_a_new_timing_model(tmp_path):
    # Its key is its own: one another type declares (the polynomial's prefill_ms_per_token)
    # would have to be declared the same way.
    tree = _extend(
        tmp_path,
        "sim/timing/per_token.py",
        '''
        """``per_token``: a prefill pass costs ``ms_per_new_token`` per new token, a decode
        pass ``pass_ms``."""

        from dataclasses import dataclass

        import numpy as np

        from plansim.params import param
        from plansim.sim.timing.base import TimingKind


        class PerTokenTiming:
            def __init__(self, per_token, pass_ms):
                self.per_token, self.pass_ms = per_token, pass_ms

            def prefill_ms(self, new_tokens, batch_size, mean_isl, mean_prefix):
                return self.per_token * new_tokens

            def decode_ms(self, batch_size, active_kv_tokens, mean_context, total_kv_tokens):
                return self.pass_ms

            def decode_ms_bulk(self, batch_size, active_kv_tokens, mean_context, total_kv_tokens):
                return np.full(np.shape(active_kv_tokens), self.pass_ms)


        @dataclass(frozen=True, slots=True)
        class PerTokenParams:
            ms_per_new_token: float | None = param(None, ge=0, optional=True,
                                                       help="prefill time per new token (ms)")
            pass_ms: float | None = param(None, ge=0, optional=True, help="decode pass (ms)")


        class PerTokenKind(TimingKind):
            Params = PerTokenParams

            def check(self, spec):
                if spec.ms_per_new_token is None or spec.pass_ms is None:
                    raise ValueError("a per_token timing model needs ms_per_new_token and "
                                     "pass_ms")

            def build(self, spec):
                return PerTokenTiming(spec.ms_per_new_token, spec.pass_ms)


        KIND = PerTokenKind()
        ''',
        "sim/timing/__init__.py",
        '"per_token": "plansim.sim.timing.per_token:KIND",',
    )
    out = _run(
        tree,
        """
        timing = {"type": "per_token", "ms_per_new_token": 0.1, "pass_ms": 4.0}
        dep = build_deployment({"engine": {"timing_model": timing}})
        result = replay(workload([(0.0, 100, 3)]), dep)
        print(json.dumps({
            "e2e": result.requests["e2e_latency_ms"].tolist(),
            "incomplete": error({"engine": {"timing_model": {"type": "per_token", "pass_ms": 1}}}),
            "foreign": error({"engine": {"timing_model": {**timing, "decode_ms": 1}}}),
        }))
        """,
        tmp_path,
    )
    # 100 prompt tokens at 0.1 ms, then two 4 ms decode passes.
    assert out["e2e"] == [pytest.approx(18.0)]
    assert "engine.timing_model" in out["incomplete"]
    assert "ms_per_new_token" in out["incomplete"]
    assert "decode_ms: not read by a timing model of type per_token" in out["foreign"]


def test_a_new_load_predictor(tmp_path):
    tree = _extend(
        tmp_path,
        "planner_core/predictors/mean_of_last.py",
        '''
        """``mean_of_last``: the mean of the last ``mean_window`` values."""

        from dataclasses import dataclass

        from plansim.params import param
        from plansim.planner_core.predictors.base import LoadPredictor


        @dataclass(frozen=True, slots=True)
        class MeanOfLastParams:
            mean_window: int = param(3, ge=1, help="values averaged")


        class MeanOfLast(LoadPredictor):
            Params = MeanOfLastParams
            tune_order = 1  # constant's too: the names break the tie

            def __init__(self, *, mean_window=3):
                super().__init__(minimum_data_points=1)
                self.mean_window = mean_window

            def _forecast(self):
                last = self.values[-self.mean_window:]
                return sum(last) / len(last)
        ''',
        "planner_core/predictors/factory.py",
        '"mean_of_last": "plansim.planner_core.predictors.mean_of_last:MeanOfLast",',
    )
    out = _run(
        tree,
        """
        from plansim.capacity.planner_search import preset_predictors
        from plansim.commands.predict import PREDICTORS_HELP
        from plansim.planner_core import parse_planner_config
        from plansim.planner_core.predictors import make_predictor
        p = make_predictor("mean_of_last", mean_window=2)
        for x in (2.0, 4.0, 9.0):
            p.observe(x)
        config = parse_planner_config({"load_predictor": "mean_of_last", "mean_window": 4})
        try:
            parse_planner_config({"load_predictor": "mean_of_last", "mean_window": 0})
        except ConfigError as exc:
            bad = str(exc)
        print(json.dumps({"forecast": p.predict_next(), "window": config.mean_window,
                          "help": PREDICTORS_HELP, "bad": bad, "tuned": preset_predictors()}))
        """,
        tmp_path,
    )
    assert out["forecast"] == 6.5  # (4 + 9) / 2
    assert out["window"] == 4 and "mean_of_last" in out["help"]
    assert out["bad"].startswith("mean_window")
    # --tune-planner tries it after kalman; with constant at the same order, by name.
    assert out["tuned"] == ["kalman", "constant", "mean_of_last", "arima"]


def test_a_new_scaling_policy(tmp_path):
    tree = _extend(
        tmp_path,
        "planner_core/scaling_policies/fixed_size.py",
        '''
        """``fixed_size``: every load interval, the decode pool is set to ``replicas``."""

        from pydantic import BaseModel, ConfigDict, Field

        from plansim.planner_core.pipeline import Override, OverrideType, Stage, StageResult
        from plansim.planner_core.scaling_policies.base import PolicyPlugins, ScalingPolicy


        class FixedSizeParams(BaseModel):
            model_config = ConfigDict(extra="forbid", frozen=True)
            replicas: int = Field(2, ge=1, description="decode replicas")


        class FixedSize:
            plugin_id = "fixed_size"
            stage = Stage.PROPOSE
            priority = 10
            needs = frozenset({"workers"})
            observation_window_seconds = None

            def __init__(self, state, params):
                self.state, self.params = state, params

            @property
            def execution_interval_seconds(self):
                return self.state.config.load_adjustment_interval_seconds

            def run(self, ctx):
                return StageResult(overrides=(
                    Override("decode", OverrideType.SET, self.params.replicas, "fixed size"),))


        def build(state, params, sla):
            return PolicyPlugins(load=FixedSize(state, params))


        POLICY = ScalingPolicy(summary="a fixed decode pool", params=FixedSizeParams,
                               build="plansim.planner_core.scaling_policies.fixed_size:build")
        ''',
        "planner_core/scaling_policies/__init__.py",
        '"fixed_size": "plansim.planner_core.scaling_policies.fixed_size:POLICY",',
    )
    out = _run(
        tree,
        """
        from plansim import api
        from plansim.planner_core import parse_planner_config
        planner = {"mode": "agg", "optimization_target": "throughput", "enable_load_scaling": True,
                   "enable_throughput_scaling": False, "load_adjustment_interval_seconds": 5,
                   "max_gpu_budget": 8, "scaling_policy": "fixed_size",
                   "scaling_policy_params": {"replicas": 3}}
        dep = build_deployment({"num_workers": 1, "engine": {"startup_time": 1}})
        rows = [(1000.0 * i, 100, 2) for i in range(20)]
        result = api.replay(workload(rows), api.setup(dep, planner=planner))
        try:
            parse_planner_config({**planner, "scaling_policy_params": {"replica": 3}})
        except ConfigError as exc:
            bad = str(exc)
        first = result.scaling_events[0]
        print(json.dumps({"first": [first["at_s"], first["from_count"], first["to_count"]],
                          "counts": sorted({e["to_count"] for e in result.scaling_events}),
                          "bad": bad}))
        """,
        tmp_path,
    )
    # The first load interval ends at 5 s: the pool goes from its 1 worker to 3, and stays.
    assert out["first"] == [5.0, 1, 3] and out["counts"] == [3]
    assert (
        "scaling_policy_params.replica: not a parameter of scaling policy fixed_size" in out["bad"]
    )


def test_a_new_trace_format(tmp_path):
    tree = _extend(
        tmp_path,
        "traces/formats/tsv.py",
        '''
        """``tsv``: one request per line, ``arrival_ms  input_length  output_length``, after a
        header naming them; no hashes (every block unshared)."""

        import numpy as np

        from plansim.io import atomic_open
        from plansim.traces.columns import TraceColumns
        from plansim.traces.formats.base import TraceFormat, TraceWriter

        HEADER = b"arrival_ms\\tinput_length\\toutput_length"


        def sniff(line, record):
            return record is None and line == HEADER


        def read_tsv(path, *, trace_block_size=None):
            bs = trace_block_size or 64
            rows = np.loadtxt(path, skiprows=1, ndmin=2)
            isl = rows[:, 1].astype(np.int64)
            return TraceColumns(
                source=str(path), line=np.arange(2, len(rows) + 2, dtype=np.int64),
                arrival_ms=rows[:, 0].astype(np.float64), isl_tokens=isl,
                osl_tokens=rows[:, 2].astype(np.int64),
                request_id=np.array([None] * len(rows), dtype=object),
                hash_counts=-(-isl // bs), raw_hashes=None, trace_block_size=bs)


        def write_tsv(workload, path):
            with atomic_open(path) as fh:
                fh.write(HEADER + b"\\n")
                for a, i, o in zip(workload.arrival_ms, workload.isl_tokens, workload.osl_tokens):
                    fh.write(f"{a:.0f}\\t{i}\\t{o}\\n".encode())
            return path


        FORMAT = TraceFormat(
            about="tab-separated arrival_ms, input_length, output_length",
            first_line="a tsv header (arrival_ms, input_length, output_length)",
            sniff=sniff, reader="plansim.traces.formats.tsv:read_tsv", block_size=64,
            writer=TraceWriter("plansim.traces.formats.tsv:write_tsv", "tab-separated lengths"))
        ''',
        "traces/formats/__init__.py",
        '"tsv": "plansim.traces.formats.tsv:FORMAT",',
    )
    (tmp_path / "t.tsv").write_text(
        "arrival_ms\tinput_length\toutput_length\n0\t100\t3\n250\t700\t5\n"
    )
    out = _run(
        tree,
        """
        import os
        import subprocess
        import sys
        from pathlib import Path
        from plansim.traces import load_workload
        from plansim.traces.detect import detect_format
        def cli(*args):
            done = subprocess.run([sys.executable, "-m", "plansim", *args], capture_output=True,
                                  text=True, env={**os.environ, "COLUMNS": "2000"})
            return done.returncode, done.stdout + done.stderr
        w = load_workload(["t.tsv"])
        to_dynamo = cli("trace", "convert", "t.tsv", "t.jsonl.gz", "--to", "dynamo")
        back = cli("trace", "convert", "t.jsonl.gz", "u.tsv", "--to", "tsv")
        print(json.dumps({
            "detected": detect_format(Path("t.tsv")), "isl": w.isl_tokens.tolist(),
            "blocks": w.hash_offsets.tolist(), "convert": [to_dynamo, back],
            "written": Path("u.tsv").read_text(),
            "help": " ".join(cli("replay", "run", "--help")[1].split()),
        }))
        """,
        tmp_path,
    )
    assert out["detected"] == "tsv" and out["isl"] == [100, 700]
    assert out["blocks"] == [0, 2, 13]  # ceil(100 / 64), ceil(700 / 64) unshared blocks
    assert [code for code, _ in out["convert"]] == [0, 0], out["convert"]
    # Back from Dynamo's Unix times: the offsets plus convert's default epoch.
    assert out["written"] == (
        "arrival_ms\tinput_length\toutput_length\n1764000000000\t100\t3\n1764000000250\t700\t5\n"
    )
    assert "tsv (tab-separated" in out["help"]


def test_a_new_folder_report(tmp_path):
    tree = _extend(
        tmp_path,
        "reports/notes.py",
        '''
        """``notes_report.html``: the folder's ``notes.json`` list, one paragraph each."""

        import html

        from plansim.reports.folder_tables import FolderReport

        def _read(tables):
            return isinstance(tables.json("notes.json"), list)

        def _write(tables, out):
            body = "".join(f"<p>{html.escape(str(n))}</p>" for n in tables.json("notes.json"))
            return [out.write_html("notes_report.html", lambda src: f"<html>{body}</html>")]

        FOLDER_REPORT = FolderReport(("notes.json",), _read, _write)
        ''',
        "reports/folder.py",
        '"notes": "plansim.reports.notes:FOLDER_REPORT",',
    )
    (tmp_path / "run").mkdir()
    (tmp_path / "run" / "notes.json").write_text('["first <note>", "second"]')
    (tmp_path / "empty").mkdir()
    out = _run(
        tree,
        """
        from pathlib import Path
        from plansim.errors import InputError
        from plansim.reports import render_dir
        written = [p.name for p in render_dir("run")]
        try:
            render_dir("empty")
        except InputError as exc:
            empty = str(exc)
        print(json.dumps({"written": written, "page": Path("run/notes_report.html").read_text(),
                          "empty": empty}))
        """,
        tmp_path,
    )
    assert out["written"] == ["plotly.min.js", "notes_report.html"]
    assert out["page"] == "<html><p>first &lt;note&gt;</p><p>second</p></html>"
    assert "nothing to render: no notes.json, requests.parquet" in out["empty"]


def test_a_new_executor_backend(tmp_path):
    tree = _extend(
        tmp_path,
        "workers/inline.py",
        '''
        """``inline``: every task in this process, one after the other."""

        from plansim.workers.executor import ExecutorBackend, InProcessExecutor

        def double(context, x):
            return 2 * x

        def _build(max_parallel, address):
            return InProcessExecutor()

        BACKEND = ExecutorBackend(about="this process, one task at a time", build=_build)
        ''',
        "workers/backends.py",
        '"inline": "plansim.workers.inline:BACKEND",',
    )
    out = _run(
        tree,
        """
        import os, subprocess, sys
        from plansim.commands.retune_windows import DEFAULT_BACKEND
        from plansim.errors import InputError
        from plansim.workers.backends import check_address, make_executor
        from plansim.workers.executor import Task, TaskContext
        from plansim.workers.inline import double
        executor = make_executor("inline", 2)
        outcome = executor.run([Task(f"t{x}", double, (x,)) for x in (1, 2, 3)],
                               TaskContext(sweep_dir="."))
        try:
            check_address("inline", "x:1")
        except InputError as exc:
            address = str(exc)
        shown = subprocess.run([sys.executable, "-m", "plansim", "capacity", "--help"],
                               env={**os.environ, "COLUMNS": "240"}, capture_output=True,
                               text=True, check=True).stdout
        print(json.dumps({"values": [r.value for r in outcome.results],
                          "default": DEFAULT_BACKEND.value, "address": address,
                          "help": " ".join(shown.split())}))
        """,
        tmp_path,
    )
    assert out["values"] == [2, 4, 6]
    # The first registered is the default: the new line went first.
    assert out["default"] == "inline"
    assert out["address"] == "--ray-address: only with --backend ray"
    assert "(inline: this process, one task at a time; spawn: a spawn pool" in out["help"]
    assert "[inline|spawn|ray]" in out["help"]  # the choices, in click's words
