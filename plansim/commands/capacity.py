"""`plansim capacity`: the cheapest deployment that holds the SLA for a trace, the hindsight lower
bound on any scaling policy, and planner policies side by side.

``plansim capacity TRACE... --config deploy.yaml [--sla-ttft-ms X --sla-tpot-ms Y] [--target 0.95]
[--search KEY=V1,V2 ...] [--planner-config planner.yaml ...] [--seeds N]
[--calibration calibration.json] [--backend spawn|ray] [--fail-under RATIO]
[--out DIR]`` validates every option and config
before reading the traces, runs ``plansim.capacity``, prints the ranked table with the
recommendation on top and writes ``capacity.json``, ``points.parquet``, ``inputs.json``,
``recommended_deployment.yaml`` with the Dynamo files of the recommendation (when a deployment
meets the target) and ``capacity_report.html``. A search that cannot meet the target within the
budget says so and exits 0, unless ``--fail-under RATIO`` is given and no deployment replayed
reached RATIO: then it exits with ``FAIL_UNDER_STATUS`` (3), after writing everything. Each
replay is recorded in the output folder as it finishes, so that ``--resume`` after a kill
replays only what is missing and gives the answer an uninterrupted run gives.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Annotated, Any

import typer

from plansim.commands import console
from plansim.commands.console import QuietOption
from plansim.commands.options import SLA_E2E_HELP, SLA_TPOT_HELP, SLA_TTFT_HELP
from plansim.commands.output import (
    ForceOption,
    OutputFolder,
    ResumeOption,
    open_journal,
    out_option,
    records_option,
    start_work,
    write_reports,
)
from plansim.commands.progress import Progress
from plansim.commands.report import SelfContainedOption
from plansim.commands.retune_windows import DEFAULT_BACKEND, Backend
from plansim.errors import InputError
from plansim.limits import MAX_WORKER_PROCESSES
from plansim.sim.routing import ROUTERS
from plansim.traces.formats import block_size_help, input_help
from plansim.workers.backends import backend_help, check_address, make_executor

# The exit status of a search whose best goodput is under --fail-under.
FAIL_UNDER_STATUS = 3


# Where a search's replays run (capacity's and the fleet's options).
BackendOption = Annotated[Backend, typer.Option(help=backend_help("replays"))]
RayAddressOption = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        help="Ray cluster to connect to (default with --backend ray: a local "
        "instance with --jobs CPUs).",
        show_default=False,
    ),
]
JobsOption = Annotated[
    int | None,
    typer.Option(
        min=1,
        max=MAX_WORKER_PROCESSES,
        help="Parallel replays (default: the CPU count).",
        show_default=False,
    ),
]


def capacity(
    ctx: typer.Context,
    traces: Annotated[
        list[Path],
        typer.Argument(help="Trace files, folders or globs.", metavar="TRACE", show_default=False),
    ],
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            "-c",
            help="Deployment file (YAML or JSON); its worker counts are where "
            "the planner policies start.",
        ),
    ] = None,
    target: Annotated[
        float, typer.Option(help="Goodput ratio to meet: good requests / all requests, in (0, 1].")
    ] = 0.95,
    sla_ttft_ms: Annotated[float | None, typer.Option(help=SLA_TTFT_HELP)] = None,
    sla_tpot_ms: Annotated[
        float | None, typer.Option("--sla-tpot-ms", "--sla-itl-ms", help=SLA_TPOT_HELP)
    ] = None,
    sla_e2e_ms: Annotated[float | None, typer.Option(help=SLA_E2E_HELP)] = None,
    fail_under: Annotated[
        float | None,
        typer.Option(
            "--fail-under",
            metavar="RATIO",
            show_default=False,
            help=f"Exit with status {FAIL_UNDER_STATUS} (after writing every file) when no "
            "deployment replayed reaches this goodput ratio, e.g. the --target, so that CI "
            "can gate on it.",
        ),
    ] = None,
    search: Annotated[
        list[str] | None,
        typer.Option(
            "--search",
            metavar="KEY=V1,V2",
            help="Also search a deployment key over these values (repeatable), e.g. "
            f"engine.max_num_batched_tokens=4096,8192 or router.mode={','.join(ROUTERS)}.",
            show_default=False,
        ),
    ] = None,
    planner_config: Annotated[
        list[Path] | None,
        typer.Option(
            "--planner-config",
            help="A planner config to compare (repeatable), besides the "
            "planner's default policies.",
            show_default=False,
        ),
    ] = None,
    tune_planner: Annotated[
        bool,
        typer.Option(
            "--tune-planner",
            help="Also search the dynamo policy's own knobs (predictor, "
            "throughput interval, headroom over the SLA, scale-down "
            "sensitivity, min endpoints) for the cheapest setting that "
            "meets the target; written as recommended_planner.yaml. "
            "--search planner.KEY=V1,V2 searches chosen keys.",
        ),
    ] = False,
    planner_start: Annotated[
        str,
        typer.Option(
            "--planner-start",
            metavar="deployment|static",
            help="Where the planner policies start: deployment (the deployment file's worker "
            "counts, what you switch from) or static (the cheapest static deployment the "
            "search finds: the planner turned on over it).",
        ),
    ] = "deployment",
    no_default_policies: Annotated[
        bool,
        typer.Option("--no-default-policies", help="Compare only the --planner-config policies."),
    ] = False,
    max_gpu_budget: Annotated[int, typer.Option(help="Most GPUs a deployment may use.")] = 64,
    gpu_cost: Annotated[
        list[str] | None,
        typer.Option(
            "--gpu-cost",
            metavar="SYSTEM=PRICE,...",
            help="Rank by cost instead of GPU-hours: the price of one GPU-hour of each GPU system "
            "the deployments run on (their aic timing model's system), e.g. "
            "h200_sxm=3.5,b200_sxm=6.",
            show_default=False,
        ),
    ] = None,
    segment_s: Annotated[
        float, typer.Option(help="Segment length of the hindsight bound (s of replay time).")
    ] = 600.0,
    seeds: Annotated[
        int, typer.Option(help="Router seeds per chosen point, for the 90% interval.")
    ] = 1,
    calibration: Annotated[
        Path | None,
        typer.Option(
            "--calibration",
            help="A calibration.json of plansim calibrate: the chosen points are "
            "also replayed at its timing draws, so their interval includes "
            "the timing's uncertainty, and the recommendation is checked at "
            "the pessimistic draw.",
            show_default=False,
        ),
    ] = None,
    seed: Annotated[int | None, typer.Option(help="The canonical router seed.")] = None,
    arrival_speedup_ratio: Annotated[
        float | None, typer.Option(help="Divide arrival gaps by this.")
    ] = None,
    trace_format: Annotated[str, typer.Option("--format", help=input_help())] = "auto",
    trace_block_size: Annotated[int | None, typer.Option(help=block_size_help())] = None,
    backend: BackendOption = DEFAULT_BACKEND,
    ray_address: RayAddressOption = None,
    jobs: JobsOption = None,
    out: out_option("capacity") = None,
    no_report: Annotated[
        bool, typer.Option("--no-report", help="Skip capacity_report.html.")
    ] = False,
    self_contained: SelfContainedOption = False,
    quiet: QuietOption = False,
    force: ForceOption = False,
    resume: ResumeOption = False,
) -> int:
    """Find the cheapest deployment that meets the goodput target on TRACE..., the hindsight
    lower bound on any scaling policy, and how far each planner policy is from it."""
    import os

    from plansim import capacity as cap
    from plansim.sim.deployment import load_deployment
    from plansim.traces import load_workload

    folder = OutputFolder.claim(out, "capacity", "plansim capacity", force=force, resume=resume)
    if fail_under is not None and not 0 < fail_under <= 1:
        raise InputError(f"must be in (0, 1], got {fail_under:g}", field="--fail-under")
    overrides = {
        key: value
        for key, value in (
            ("sla.ttft_ms", sla_ttft_ms),
            ("sla.tpot_ms", sla_tpot_ms),
            ("sla.e2e_ms", sla_e2e_ms),
            ("seed", seed),
            ("arrival_speedup_ratio", arrival_speedup_ratio),
        )
        if value is not None
    }
    check_address(backend.value, ray_address)
    # Everything that can be checked without the traces is checked first.
    deployment = load_deployment(
        config,
        overrides,
        flags={
            "sla.ttft_ms": "--sla-ttft-ms",
            "sla.tpot_ms": "--sla-tpot-ms",
            "sla.e2e_ms": "--sla-e2e-ms",
            "seed": "--seed",
            "arrival_speedup_ratio": "--arrival-speedup-ratio",
        },
    )
    objective = cap.GpuCost(cap.parse_gpu_costs(gpu_cost)) if gpu_cost else None
    timing = None
    if calibration is not None:
        from plansim.calibrate.result import load_timing_draws

        timing = load_timing_draws(calibration)
    plan = cap.prepare(
        deployment,
        target,
        search=search or (),
        objective=objective,
        planner_configs=planner_config or (),
        default_policies=not no_default_policies,
        max_gpu_budget=max_gpu_budget,
        segment_s=segment_s,
        seeds=seeds,
        tune_planner=tune_planner,
        timing=timing,
        planner_start=planner_start,
    )
    workload = load_workload(traces, format=trace_format, trace_block_size=trace_block_size)
    if len(workload) == 0:
        raise InputError("no requests in " + ", ".join(map(str, traces)), field="TRACE")
    inputs = _inputs(ctx.params, traces, workload, plan, trace_format)
    journal = open_journal(folder, inputs, workload.content_digest(), ignore=_HOW_IT_RUNS)
    executor = make_executor(backend.value, jobs or os.cpu_count() or 1, ray_address)
    start_work()
    with folder.writing() as out_dir:
        result, report = run_search(
            "capacity",
            lambda executor, on_round: cap.run(
                plan, workload, executor=executor, on_round=on_round
            ),
            executor,
            journal,
            backend.value,
            quiet,
        )
        _write(out_dir, result, report, inputs, plan.deployment, config, max_gpu_budget)
        recommended, *lines = table_lines(report)
        status = 0
        best = best_goodput(report)
        if fail_under is not None and (best is None or best < fail_under):
            status = FAIL_UNDER_STATUS
            recommended += f"; no deployment reached {fail_under:.1%} (exit status {status})"
        console.result(recommended)
        console.echo(*lines)
        if not no_report:
            write_reports(out_dir, self_contained=self_contained)
    console.echo(f"output        {out_dir}")
    return console.finish(report, status)


def run_search(
    name: str,
    run: Callable[[Any, Callable[[Any], None]], Any],
    executor: Any,
    journal: Any,
    backend: str,
    quiet: bool,
) -> tuple[Any, dict[str, Any]]:
    """A long search (``plansim capacity``, ``plansim fleet``): ``run(executor, on_round)`` on
    ``executor`` through ``journal`` (each finished replay recorded, recorded ones answered
    from it), with a progress display of its rounds; closes the executor. Returns the result
    and its JSON report, whose ``host`` says where the replays ran and how many the journal
    answered."""
    from plansim.workers.journal import JournaledExecutor

    try:
        # Each round's replays follow from the last round's: their number is not known.
        with Progress(name, total=None, unit="replays", quiet=quiet) as bar:
            result = run(
                JournaledExecutor(executor, journal),
                lambda stats: bar.update(stats.total, description=f"{name} round {stats.rounds}"),
            )
    finally:
        executor.close()
    report = result.to_json()
    report["host"].update(
        backend=backend, max_parallel=executor.max_parallel, resumed_replays=journal.reused
    )
    return result, report


def best_goodput(report: Mapping[str, Any]) -> float | None:
    """The highest goodput ratio any static deployment of a ``capacity.json`` reached."""
    ratios = [v["goodput_ratio"] for v in report["static"] if v.get("goodput_ratio") is not None]
    bad = report.get("best_infeasible")
    if bad is not None and bad.get("goodput_ratio") is not None:
        ratios.append(bad["goodput_ratio"])
    return max(ratios, default=None)


# Options that say how the replays run, not what they give (the answer is the same on any
# backend and worker count), and the exit status CI gates on: a resumed run may change them.
_HOW_IT_RUNS = ("backend", "ray_address", "jobs", "fail_under")


def _inputs(
    options: Mapping[str, Any], traces: Sequence[Path], workload: Any, plan: Any, trace_format: str
) -> dict[str, Any]:
    given = {
        name: [str(v) for v in value]
        if isinstance(value, list)
        else str(value)
        if isinstance(value, Path)
        else value.value
        if hasattr(value, "value")
        else value
        for name, value in options.items()
        if name != "traces" and records_option(name, value)
    }
    return {
        "command": "plansim capacity",
        "options": given,
        "traces": [str(p) for p in traces],
        "trace_format": trace_format,
        "requests": len(workload),
        "deployment": plan.deployment.model_dump(mode="json"),
        "sla": plan.deployment.sla.model_dump(mode="json"),
        "policies": [
            {"name": p.name, "source": p.source, "config": p.config.model_dump(mode="json")}
            for p in plan.policies
        ],
        "seed": plan.deployment.seed,
    }


def _write(
    out_dir: Path,
    result: Any,
    report: dict[str, Any],
    inputs: dict[str, Any],
    plan_deployment: Any,
    config: Path | None,
    max_gpu_budget: int,
) -> None:
    """The folder's files; with a recommendation, ``recommended_deployment.yaml`` (in the
    input's spellings) and the Dynamo files of it (``plansim.capacity.export``)."""
    import logging

    import yaml

    from plansim import schema
    from plansim.capacity.export import deployment_file, engine_files, planner_config
    from plansim.configfile import read_config
    from plansim.io import atomic_write_json, atomic_write_text, write_parquet_atomic
    from plansim.sim.deployment import with_overrides

    atomic_write_json(out_dir / schema.INPUTS_JSON, inputs)
    write_parquet_atomic(out_dir / schema.POINTS_TABLE, result.points)
    if result.cheapest is not None:
        dep = with_overrides(plan_deployment, result.cheapest.deployment())
        raw = read_config(config, what="deployment file") if config is not None else None
        atomic_write_text(
            out_dir / schema.RECOMMENDED_DEPLOYMENT,
            "# plansim capacity: the cheapest deployment meeting the target\n"
            + yaml.safe_dump(deployment_file(dep, raw, config), sort_keys=False),
        )
        files, notes = engine_files(dep)
        for name, content in files.items():
            atomic_write_json(out_dir / name, content)
        for note in notes:
            logging.getLogger("plansim").warning(note)
    if result.tuning is not None and result.tuning.planner is not None:
        atomic_write_text(out_dir / schema.RECOMMENDED_PLANNER, planner_file(result.tuning))
    elif result.cheapest is not None:
        from plansim.planner_core import PlannerConfig

        # The default policy is Dynamo's own planner, the one the file configures.
        dynamo = PlannerConfig.model_fields["scaling_policy"].default
        policy = (dep.planner or {}).get("scaling_policy", dynamo)
        if policy != dynamo:
            logging.getLogger("plansim").warning(
                "%s: the deployment's planner runs scaling_policy %s, plansim's own; the file "
                "is Dynamo's planner on the same targets",
                schema.RECOMMENDED_PLANNER,
                policy,
            )
        atomic_write_text(
            out_dir / schema.RECOMMENDED_PLANNER,
            "# plansim capacity: the Dynamo planner for the recommended deployment,"
            " sized for its SLA (not tuned: --tune-planner searches its knobs)\n"
            + yaml.safe_dump(planner_config(dep, max_gpu_budget), sort_keys=False),
        )
    atomic_write_json(out_dir / schema.CAPACITY_JSON, report)


def planner_file(tuning: Any) -> str:
    """``recommended_planner.yaml``: the tuned planner config in Dynamo's key names, to pass
    to Dynamo's planner (``--config``) or to ``plansim replay run --planner-config``."""
    import yaml

    setting = ", ".join(f"{k}={v}" for k, v in tuning.answer.items())
    return (
        "# plansim capacity: the cheapest setting of the Dynamo planner meeting the target\n"
        f"# searched: {setting}\n" + yaml.safe_dump(tuning.planner, sort_keys=False)
    )


# -- the terminal table ------------------------------------------------------------------------


def _pct(value: float | None, target: float | None = None) -> str:
    from plansim.reports.format import percent, percent_against

    if value is None:
        return "-"
    return percent(value) if target is None else percent_against(value, target)


def _num(value: float | None, fmt: str = "{:.3f}") -> str:
    return "-" if value is None else fmt.format(value)


def _workers(point: Mapping[str, Any]) -> str:
    if "num_workers" in point:
        return f"{point['num_workers']}"
    return f"{point['num_prefill_workers']}P+{point['num_decode_workers']}D"


def _interval(point: Mapping[str, Any]) -> str:
    iv = point.get("interval")
    if not iv:
        return ""
    draws = f" + {iv['timing_draws']} timing draws" if iv.get("timing_draws") else ""
    text = (
        f", 90% interval {iv['low']:.1%}-{iv['high']:.1%} "
        f"({iv['seeds']} seed(s){draws} x {iv['segments']} segments: {iv['verdict']} target)"
    )
    if "pessimistic_goodput_ratio" in point:
        holds = "holds" if point["holds_at_pessimistic"] else "does not hold"
        text += f"; {point['pessimistic_goodput_ratio']:.1%} at the pessimistic draw ({holds})"
    return text


def _replayed(counts: Sequence[Any]) -> str:
    return ",".join(str(c) if not isinstance(c, list) else f"{c[0]}P+{c[1]}D" for c in counts)


def table_lines(report: Mapping[str, Any]) -> list[str]:
    """The terminal answer from a ``capacity.json`` mapping: the recommendation, the ranked
    static table, the best infeasible point, the bound, the policies, the replay counts."""
    unit = report["objective"]["unit"]
    # Priced in money: GPU-hours are shown beside the cost.
    gpu_h = report["objective"]["name"] != "gpu_hours"
    target = report["target"]
    lines = []
    best = report["cheapest_static"]
    if best is not None:
        lines.append(
            f"recommended   {_workers(best)} workers ({best['variant']}): goodput "
            f"{_pct(best['goodput_ratio'], target)} >= {_pct(target)} target, "
            f"{_num(best['cost'])} {unit}{_interval(best)}"
        )
    else:
        lines.append(
            f"recommended   none: no deployment within {report['max_gpu_budget']} GPUs "
            f"meets the {_pct(target)} goodput target"
        )
    lines.append("")
    rows = sorted(
        report["static"],
        key=lambda v: (
            not v["feasible"],
            v.get("cost", 0.0) if v["feasible"] else -v.get("goodput_ratio", 0.0),
        ),
    )
    width = max([len("deployment")] + [len(v["variant"]) for v in rows])
    lines.append(
        f"{'rank':>4}  {'deployment':<{width}}  {'workers':>7}  {'GPUs':>4}  "
        f"{'goodput':>7}  {unit:>8}  " + (f"{'GPU-h':>8}  " if gpu_h else "") + "replayed"
    )
    for rank, v in enumerate(rows, start=1):
        if "goodput_ratio" not in v:
            lines.append(f"{'-':>4}  {v['variant']:<{width}}  (nothing replayed within budget)")
            continue
        tag = rank if v["feasible"] else "-"
        lines.append(
            f"{tag:>4}  {v['variant']:<{width}}  {_workers(v):>7}  {v['gpus']:>4}  "
            f"{_pct(v['goodput_ratio'], target):>7}  {_num(v['cost']):>8}  "
            + (f"{_num(v['gpu_hours']):>8}  " if gpu_h else "")
            + f"{_replayed(v['replayed'])}"
        )
    bad = report["best_infeasible"]
    if bad is not None:
        lines.append("")
        lines.append(
            f"best infeasible  {_workers(bad)} workers ({bad['variant']}): goodput "
            f"{_pct(bad['goodput_ratio'], target)}, {_num(bad['cost'])} {unit}"
            f"{_interval(bad)}"
        )
    oracle = report["oracle"]
    lines.append("")
    if oracle is None or oracle["cost"] is None:
        lines.append("lower bound   none: no scaling schedule within the budget meets the target")
    else:
        saving = ""
        if best is not None and best["cost"]:
            saving = f", {1 - oracle['cost'] / best['cost']:.1%} below the cheapest static"
        startup = "/".join(f"{s:g}" for s in oracle["startup_s"])
        lines.append(
            f"lower bound   {_num(oracle['cost'])} {unit} (hindsight, "
            f"{len(oracle['segments'])} segments of {oracle['segment_s']:g} s, "
            f"start-up {startup} s){saving}"
        )
        replayed = oracle.get("schedule_replay")
        if replayed is not None:
            verdict = (
                "meets the target: the best possible lies in between"
                if replayed["meets_target"]
                else "misses the target"
            )
            lines.append(
                f"              its schedule replayed: {_num(replayed['cost'])} {unit}, "
                f"goodput {_pct(replayed['goodput_ratio'], target)} ({verdict})"
            )
    if report["policies"]:
        lines.append("")
        lines.append(
            f"{'policy':<16}  {'goodput':>7}  {unit:>8}  {'events':>6}  "
            f"{'saving':>9}  {'of hindsight saving':>19}  gap to bound"
        )
        for p in report["policies"]:
            gap = _num(p["gap_to_oracle_pct"], "{:+.1f}%")
            head = (
                f"{p['name']:<16}  {_pct(p['goodput_ratio'], target):>7}  "
                f"{_num(p['cost']):>8}  {p['scaling_events']:>6}  "
            )
            if not p["meets_target"]:
                # A cost bought with missed requests is not a saving: no figure for it.
                lines.append(head + f"{'-':>9}  {'-':>19}  {gap:>12}  (misses the target)")
                continue
            saving = p.get("saving_vs_static_pct")
            share = p.get("share_of_hindsight_saving")
            lines.append(
                head + f"{_num(saving, '{:+.1f}%'):>9}  {_num(share, '{:.0%}'):>19}  {gap:>12}"
            )
    tuning = report.get("planner_tuning")
    if tuning is not None:
        lines.append("")
        trials = tuning["trials"]
        held = sum(t["meets_target"] for t in trials)
        knobs = ", ".join(k["key"] for k in tuning["knobs"])
        lines.append(
            f"planner tuning  {len(trials)} settings of {knobs} replayed, {held} meet the target"
        )
        if tuning["answer"] is not None:
            setting = ", ".join(f"{k}={v}" for k, v in tuning["answer"].items())
            lines.append(
                f"                cheapest: {setting} (recommended_planner.yaml, "
                "policy dynamo-tuned)"
            )
        else:
            lines.append("                none meets the target")
    for note in report["notes"]:
        lines.append(f"note          {note}")
    lines.append(replays_line(report))
    return lines


def replays_line(report: Mapping[str, Any]) -> str:
    """The last line of a search's answer (``capacity.json``, ``fleet.json``): its replays by
    kind, rounds, wall time, workers and what a resumed run took from the interrupted one."""
    replays = report["replays"]
    kinds = ", ".join(f"{k} {n}" for k, n in replays.items() if k not in ("total", "rounds"))
    host = report.get("host", {})
    where = f" on {host['max_parallel']} {host['backend']} workers" if "backend" in host else ""
    resumed = host.get("resumed_replays")
    again = f"; {resumed} recorded by the interrupted run, not replayed again" if resumed else ""
    return (
        f"replays       {replays['total']} ({kinds}) in {replays['rounds']} rounds, "
        f"{host.get('wall_s', 0.0):.1f} s{where}{again}"
    )
