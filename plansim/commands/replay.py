"""`plansim replay` commands: replay traces against a simulated deployment.

``plansim replay run TRACE... [--config FILE] [--planner-config FILE] [options] [--out DIR]``
loads the traces, builds the deployment (the config file, then CLI flags on top), replays it
(with the planner in the loop when the config has a ``planner:`` block or ``--planner-config``
is given), prints a summary table, writes the output folder and renders the report.
``plansim replay synth --rate R --duration S [synth options] [options]`` does the same for a
synthetic workload built in memory.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from plansim.commands import console, synth_options
from plansim.commands.console import QuietOption
from plansim.commands.options import (
    SLA_E2E_HELP,
    SLA_TPOT_HELP,
    SLA_TTFT_HELP,
    with_options,
)
from plansim.commands.output import (
    ForceOption,
    OutputFolder,
    out_option,
    records_option,
    replay_inputs,
    start_work,
    warn_if_all_rejected,
    write_replay_outputs,
    write_reports,
)
from plansim.commands.progress import Progress
from plansim.commands.report import SelfContainedOption
from plansim.commands.router_flags import (
    ROUTER_MODE_HELP,
    ROUTER_PARAM_HELP,
    knob_help,
    router_param_overrides,
)
from plansim.errors import InputError
from plansim.runtime import long_lived
from plansim.traces.formats import block_size_help, input_help

app = typer.Typer(
    help="Replay request traces against a simulated deployment.", no_args_is_help=True
)


@app.callback()
def _group() -> None:
    """Replay request traces against a simulated deployment."""


def _overrides(**flags: Any) -> tuple[dict[str, Any], dict[str, str]]:
    """CLI flags as dotted deployment keys (flags not given are left to the config file), and
    each key's option name, so that an error names the option."""
    dotted = {
        "mode": "mode",
        "num_workers": "num_workers",
        "num_prefill_workers": "num_prefill_workers",
        "num_decode_workers": "num_decode_workers",
        "router_mode": "router.mode",
        "overlap_score_weight": "router.overlap_score_weight",
        "router_temperature": "router.router_temperature",
        "arrival_speedup_ratio": "arrival_speedup_ratio",
        "max_concurrency": "max_concurrency",
        "sla_ttft_ms": "sla.ttft_ms",
        "sla_tpot_ms": "sla.tpot_ms",
        "sla_e2e_ms": "sla.e2e_ms",
        "seed": "seed",
        "extra_engine_args": "engine",
        "prefill_engine_args": "prefill_engine",
        "decode_engine_args": "decode_engine",
    }
    out: dict[str, Any] = {}
    for name, value in flags.items():
        if value is not None:
            out[dotted[name]] = value
    for name in ("extra_engine_args", "prefill_engine_args", "decode_engine_args"):
        value = out.get(dotted[name])
        # A path (relative to the working folder), or Dynamo's inline JSON ('{"block_size": 64}').
        if value is not None and not value.lstrip().startswith("{"):
            out[dotted[name]] = str(Path(value).resolve())
    return out, {key: "--" + name.replace("_", "-") for name, key in dotted.items()}


def _duration(ms: float) -> str:
    seconds = ms / 1000.0
    if seconds < 1:
        return f"{ms:.1f} ms"
    if seconds < 120:
        return f"{seconds:.1f} s"
    if seconds < 7200:
        return f"{seconds / 60:.1f} min"
    return f"{seconds / 3600:.2f} h"


def _virtual_time(bar: Progress) -> Any:
    """The replay's ``progress(now_ms, end_ms)`` callback, shown in virtual seconds."""

    def progress(now_ms: float, end_ms: float) -> None:
        bar.update(now_ms / 1000.0, total=max(end_ms, now_ms) / 1000.0)

    return progress


def _print_summary(
    s: Mapping[str, Any], n_rejected: int, out_dir: Path, sla: Mapping[str, Any]
) -> str:
    """Print the terminal summary's detail lines; returns the result line. A latency without
    samples (no completed request; for TPOT and ITL, no request with two tokens) is ``n/a``,
    not the zero the summary records; goodput names the SLA it was scored against (TTFT, TPOT:
    each request's mean token gap, E2E) and is a share of all requests."""
    from plansim.schema import sla_text

    echo = console.echo
    echo(
        f"requests      {s['num_requests']} ({s['completed_requests']} completed, "
        f"{n_rejected} rejected, "
        f"{s['num_requests'] - s['completed_requests'] - n_rejected} incomplete)"
    )
    wall = f" (replayed in {_duration(s['wall_time_ms'])})" if "wall_time_ms" in s else ""
    echo(f"duration      {_duration(s['duration_ms'])} of virtual time{wall}")
    echo(
        f"throughput    {s['request_throughput_rps']:.3f} req/s, "
        f"{s['output_throughput_tok_s']:.1f} output tok/s, "
        f"{s['total_throughput_tok_s']:.1f} total tok/s"
    )
    echo(f"{'latency (ms)':<14}{'p50':>10}{'p90':>10}{'p99':>10}{'mean':>10}")
    gaps = s["total_output_tokens"] - s["completed_requests"]
    for label, key, what in _LATENCY_ROWS:
        sampled = s["completed_requests"] > 0 and (key in ("ttft", "e2e_latency") or gaps > 0)
        echo(
            f"  {label:<12}"
            + "".join(
                f"{s[f'{stat}_{key}_ms']:>10.2f}" if sampled else f"{'n/a':>10}"
                for stat in ("median", "p90", "p99", "mean")
            )
            + f"  {what}"
        )
    if "num_sessions" in s:
        done = s["completed_sessions"]
        times = (
            (
                ", total time (first release to last token) p50 "
                f"{_duration(s['median_session_total_ms'])}, p90 "
                f"{_duration(s['p90_session_total_ms'])}, max "
                f"{_duration(s['max_session_total_ms'])}"
            )
            if done
            else ""
        )
        echo(f"sessions      {s['num_sessions']} ({done} completed){times}")
    if s.get("unreleased_requests"):
        echo(f"unreleased    {s['unreleased_requests']} requests waited on a rejected request")
    if "mean_release_wait_ms" in s:
        echo(
            f"cap wait      p50 {_duration(s['median_release_wait_ms'])}, p90 "
            f"{_duration(s['p90_release_wait_ms'])}, mean "
            f"{_duration(s['mean_release_wait_ms'])} (release to arrival at the concurrency cap)"
        )
    if "goodput_completed_requests" in s:
        good = s["goodput_completed_requests"]
        share = good / s["num_requests"] if s["num_requests"] else 0.0
        echo(
            f"goodput       {good} of {s['num_requests']} requests ({share:.1%}) met "
            f"{sla_text(dict(sla))}; {s['goodput_request_throughput_rps']:.3f} req/s, "
            f"{s['goodput_output_throughput_tok_s']:.1f} output tok/s"
        )
        headline = f"goodput {share:.1%} ({sla_text(dict(sla))})"
    else:
        echo("goodput       not scored (no SLA: set sla.ttft_ms, sla.tpot_ms or sla.e2e_ms)")
        headline = "goodput not scored"
    echo(f"GPU-hours     {s['gpu_hours']:.4f}")
    echo(f"prefix reuse  {s['prefix_cache_reused_ratio']:.1%}")
    return f"{headline}, {s['gpu_hours']:.4f} GPU-hours: {out_dir}"


def write_trace_events(out_dir: Path, pass_log: Any, workers: Any) -> None:
    """``trace_events.json.gz``: the replay's passes as a Chrome trace (gzipped compact JSON: a
    trace holds one event per pass: the bundled sample's 10 minutes on 4 workers are 247,292
    passes, 45 MB of JSON, 3.6 MB gzipped; no timestamp in the gzip header, so equal replays
    write equal bytes)."""
    import gzip

    import orjson

    from plansim.io import atomic_write_bytes
    from plansim.result_table import column
    from plansim.schema import TRACE_EVENTS_JSON

    pools = dict(
        zip(column(workers, "worker_id").tolist(), column(workers, "pool").tolist(), strict=True)
    )
    trace = pass_log.trace_events(lambda wid: str(pools.get(wid, "worker")))
    atomic_write_bytes(out_dir / TRACE_EVENTS_JSON, gzip.compress(orjson.dumps(trace), mtime=0))


def static_baseline(workload: Any, deployment: Any) -> dict[str, Any]:
    """What ``baseline.json`` holds: the deployment's starting worker counts held static for the
    whole trace (the deployment without its planner), replayed: a label, the counts, the
    summary (without host figures)."""
    from plansim import api
    from plansim.roles import POOL_COUNT_FIELDS, Mode
    from plansim.sim.summary import without_host_keys

    pools = Mode(deployment.mode).pools
    counts = {
        POOL_COUNT_FIELDS[pool]: getattr(deployment, POOL_COUNT_FIELDS[pool]) for pool in pools
    }
    label = (
        f"static {counts['num_workers']} workers"
        if Mode(deployment.mode) is Mode.AGG
        else f"static {counts['num_prefill_workers']} prefill + "
        f"{counts['num_decode_workers']} decode workers"
    )
    result = api.replay(workload, api.setup(deployment, None))
    return {"label": label, "counts": counts, "summary": without_host_keys(result.summary)}


def baseline_line(summary: Mapping[str, Any], baseline: Mapping[str, Any]) -> str:
    """The planner run against its static baseline, goodput beside GPU-hours."""
    ref = baseline["summary"]
    gap = summary["gpu_hours"] / ref["gpu_hours"] - 1.0 if ref["gpu_hours"] else float("nan")
    text = f"vs baseline   {baseline['label']}: {ref['gpu_hours']:.4f} GPU-hours ({gap:+.1%})"
    if "goodput_completed_requests" in summary and ref.get("num_requests"):
        mine = summary["goodput_completed_requests"] / summary["num_requests"]
        theirs = ref["goodput_completed_requests"] / ref["num_requests"]
        text += f", goodput {theirs:.1%} ({(mine - theirs) * 100:+.1f} points)"
    return text


# The terminal's latency rows: label, summary key, what it measures. The SLA's TPOT bound is
# checked on each request's mean gap; ITL is every gap (the bursts a request sees).
_LATENCY_ROWS = (
    ("TTFT", "ttft", "time to first token"),
    ("TPOT", "tpot", "each request's mean token gap (what the SLA scores)"),
    ("ITL", "itl", "every token gap"),
    ("E2E", "e2e_latency", "end to end"),
)


def _inputs(
    ctx: typer.Context,
    traces: list[Path],
    workload: Any,
    deployment: Any,
    planner_raw: Mapping[str, Any] | None,
    trace_format: str,
    trace_block_size: int | None,
) -> dict[str, Any]:
    """What ran: the command and the options given (not those that say how the run is
    written), the traces, the validated deployment."""
    given = {
        name: str(value) if isinstance(value, Path) else value
        for name, value in ctx.params.items()
        if name != "traces" and records_option(name, value)
    }
    return replay_inputs(
        f"plansim replay {ctx.info_name}",
        given,
        traces,
        workload,
        deployment,
        planner_raw,
        trace_format,
        trace_block_size,
    )


# Options shared by ``replay run`` and ``replay synth`` (see ``plansim.commands.options``):
# the deployment flags (each overrides a deployment key) and how the run is written.
DEPLOYMENT_OPTIONS = {
    "config": (
        Annotated[
            Path | None, typer.Option("--config", "-c", help="Deployment file (YAML or JSON).")
        ],
        None,
    ),
    "planner_config": (
        Annotated[
            Path | None,
            typer.Option(help="Planner config (YAML/JSON); runs the planner in the loop."),
        ],
        None,
    ),
    "mode": (Annotated[str | None, typer.Option(help="agg or disagg.")], None),
    "num_workers": (Annotated[int | None, typer.Option(help="Aggregated workers.")], None),
    "num_prefill_workers": (Annotated[int | None, typer.Option(help="Prefill workers.")], None),
    "num_decode_workers": (Annotated[int | None, typer.Option(help="Decode workers.")], None),
    "router_mode": (Annotated[str | None, typer.Option(help=ROUTER_MODE_HELP)], None),
    "overlap_score_weight": (
        Annotated[float | None, typer.Option(help=knob_help("overlap_score_weight"))],
        None,
    ),
    "router_temperature": (
        Annotated[float | None, typer.Option(help=knob_help("router_temperature"))],
        None,
    ),
    "router_param": (
        Annotated[
            list[str] | None,
            typer.Option("--router-param", metavar="NAME=VALUE", help=ROUTER_PARAM_HELP),
        ],
        None,
    ),
    "arrival_speedup_ratio": (
        Annotated[
            float | None,
            typer.Option(help="Divide arrival gaps (and closed-loop think times) by this."),
        ],
        None,
    ),
    "max_concurrency": (
        Annotated[
            int | None,
            typer.Option(
                help="At most N requests in flight: a released request waits until one completes "
                "(its trace time is the earliest start)."
            ),
        ],
        None,
    ),
    "sla_ttft_ms": (Annotated[float | None, typer.Option(help=SLA_TTFT_HELP)], None),
    "sla_tpot_ms": (
        Annotated[float | None, typer.Option("--sla-tpot-ms", "--sla-itl-ms", help=SLA_TPOT_HELP)],
        None,
    ),
    "sla_e2e_ms": (Annotated[float | None, typer.Option(help=SLA_E2E_HELP)], None),
    "extra_engine_args": (
        Annotated[
            str | None,
            typer.Option(
                metavar="FILE|JSON",
                help="Engine args for every worker, as Dynamo's "
                "--extra-engine-args takes them: a JSON (or YAML) file, or inline JSON such as "
                "'{\"block_size\": 64}'.",
            ),
        ],
        None,
    ),
    "prefill_engine_args": (
        Annotated[
            str | None,
            typer.Option(
                metavar="FILE|JSON", help="Engine args for prefill workers (a file or inline JSON)."
            ),
        ],
        None,
    ),
    "decode_engine_args": (
        Annotated[
            str | None,
            typer.Option(
                metavar="FILE|JSON", help="Engine args for decode workers (a file or inline JSON)."
            ),
        ],
        None,
    ),
}
OUTPUT_OPTIONS = {
    "out": (
        out_option("replay"),
        None,
    ),
    "no_report": (Annotated[bool, typer.Option("--no-report", help="Skip report.html.")], False),
    "self_contained": (
        SelfContainedOption,
        False,
    ),
    "quiet": (QuietOption, False),
    "force": (ForceOption, False),
    "trace_events": (
        Annotated[
            bool,
            typer.Option(
                "--trace-events",
                help="Also write trace_events.json.gz: every pass of every worker as "
                "a Chrome trace (open it in ui.perfetto.dev or chrome://tracing).",
            ),
        ],
        False,
    ),
    "no_baseline": (
        Annotated[
            bool,
            typer.Option(
                "--no-baseline",
                help="With a planner that scales: skip the second replay of the "
                "starting worker counts held static (baseline.json), which the planner "
                "report's saving is measured against (no saving is shown without it).",
            ),
        ],
        False,
    ),
}
# Deployment flags that are deployment keys (_execute reads the files and --router-param).
_DEPLOYMENT_FLAGS = tuple(
    k for k in DEPLOYMENT_OPTIONS if k not in ("config", "planner_config", "router_param")
)


@app.command("run")
@with_options(DEPLOYMENT_OPTIONS, OUTPUT_OPTIONS)
def run(
    ctx: typer.Context,
    traces: Annotated[
        list[Path],
        typer.Argument(help="Trace files, folders or globs.", metavar="TRACE", show_default=False),
    ],
    trace_format: Annotated[str, typer.Option("--format", help=input_help())] = "auto",
    trace_block_size: Annotated[int | None, typer.Option(help=block_size_help())] = None,
    open_loop: Annotated[
        bool,
        typer.Option(
            "--open-loop",
            help="Replay a closed-loop trace (sessions, dependencies) open-loop: "
            "every request at its recorded arrival, or where delays put it "
            "if requests took no time.",
        ),
    ] = False,
    seed: Annotated[int | None, typer.Option(help="Random seed.")] = None,
    **options: Any,
) -> int:
    """Replay TRACE... against the deployment and write summary, tables and report.

    Closed-loop traces (Mooncake sessions, Dynamo agent_context, agentic Mooncake) release each
    request when what it waits for has finished, plus its think or tool time."""
    from plansim.traces import load_workload

    def load(deployment: Any) -> Any:
        workload = load_workload(traces, format=trace_format, trace_block_size=trace_block_size)
        return workload.open_loop() if open_loop else workload

    return _execute(
        ctx, load, traces=traces, trace_format=trace_format, trace_block_size=trace_block_size
    )


@app.command("synth")
@with_options(synth_options.SYNTH_OPTIONS, DEPLOYMENT_OPTIONS, OUTPUT_OPTIONS)
def synth(
    ctx: typer.Context,
    seed: Annotated[
        int | None,
        typer.Option(
            help="Random seed of the synthetic workload and of the replay (default: the "
            "deployment's, 0)."
        ),
    ] = None,
    **options: Any,
) -> int:
    """Synthesize a workload (the options of `plansim trace synth`) and replay it, no file
    needed: e.g. `--max-concurrency N` in a loop draws throughput and TTFT against
    concurrency."""

    def load(deployment: Any) -> Any:
        return synth_options.synthesize_from(ctx.params, seed=deployment.seed)

    return _execute(
        ctx, load, traces=[], trace_format="synth", trace_block_size=options["block_size"]
    )


def _execute(
    ctx: typer.Context,
    load: Any,
    *,
    traces: list[Path],
    trace_format: str,
    trace_block_size: int | None,
) -> int:
    """Build and validate the deployment and planner (``ctx.params``), ``load(deployment)``
    the workload, replay it, write the output folder, print the summary, render the reports."""
    from plansim.sim.deployment import load_deployment
    from plansim.sim.summary import without_host_keys

    p = ctx.params
    config, planner_config = p["config"], p["planner_config"]
    folder = OutputFolder.claim(
        p["out"], "replay", f"plansim replay {ctx.info_name}", force=p["force"]
    )
    overrides, flags = _overrides(**{name: p[name] for name in (*_DEPLOYMENT_FLAGS, "seed")})
    overrides.update(router_param_overrides(p["router_param"] or []))
    # The deployment, the planner and the workload live until the command ends.
    with long_lived():
        # Validate everything (deployment, planner) before reading possibly large traces.
        deployment = load_deployment(config, overrides, flags=flags)
        planner_raw: Mapping[str, Any] | None = None
        planner_source = ""
        if planner_config is not None:
            from plansim.planner_io import read_planner_mapping

            planner_raw = read_planner_mapping(planner_config)
            planner_source = str(planner_config)
        elif deployment.planner is not None:
            planner_raw, planner_source = deployment.planner, str(config or "deployment")
        from plansim import api

        setup = api.setup(deployment, planner_raw, source=planner_source)
        workload = load(deployment)
    if setup.retune and not traces:
        raise InputError(
            "retune replays windows of a trace file: use plansim replay run",
            field="--planner-config",
        )

    pass_log = None
    if p["trace_events"]:
        from plansim.sim.pass_log import PassLog

        pass_log = PassLog()
    start_work()
    # Over virtual time, up to the last arrival (a closed loop's moves on as it is released).
    with Progress("replay", total=None, unit="virtual s", quiet=p["quiet"]) as bar:
        result = api.replay(
            workload,
            setup,
            trace_paths=[str(t) for t in traces],
            progress=_virtual_time(bar) if bar.on else None,
            pass_log=pass_log,
        )

    baseline = None
    if not p["no_baseline"] and any(e.get("applied", True) for e in result.scaling_events):
        baseline = static_baseline(workload, deployment)
    inputs = {
        **_inputs(ctx, traces, workload, deployment, planner_raw, trace_format, trace_block_size),
        **result.inputs,
    }
    warn_if_all_rejected(result, inputs)
    with folder.writing() as out_dir:
        # The result and the table writer's modules live until the command ends too:
        # a collection while they load would walk every structure the replay built.
        with long_lived():
            write_replay_outputs(out_dir, result, inputs)
            if baseline is not None:
                from plansim.io import atomic_write_json
                from plansim.schema import BASELINE_JSON

                atomic_write_json(out_dir / BASELINE_JSON, baseline)
            if pass_log is not None:
                write_trace_events(out_dir, pass_log, result.tables["workers"])
        n_rejected = int((result.tables["requests"]["status"] == "rejected").sum())
        headline = _print_summary(result.summary, n_rejected, out_dir, deployment.sla.model_dump())
        if baseline is not None:
            console.echo(baseline_line(result.summary, baseline))
        console.echo(f"output        {out_dir}")
        if not p["no_report"]:
            write_reports(out_dir, self_contained=p["self_contained"])
    console.result(headline)
    return console.finish(without_host_keys(result.summary))
