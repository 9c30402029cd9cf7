"""`plansim fleet`: several models, several GPU types with prices, one inventory; the cheapest
fleet that holds every model's SLA.

``plansim fleet FLEET.yaml [--backend spawn|ray] [--jobs N] [--out DIR]`` validates the fleet
file, every model's deployment and search space before reading a trace, runs
``plansim.fleet``, prints the fleet (per model its deployment, tier, GPUs, goodput and cost; the
GPUs used of each type; the autoscaled fleet when planners ran) and writes ``fleet.json``,
``points.parquet``, ``inputs.json``, ``models/<name>/recommended_deployment.yaml`` per model
(when the fleet fits) and ``fleet_report.html``. A fleet that does not fit still exits 0 and
says which model and constraint binds. Every replay is recorded in the output folder as it
finishes, so that ``--resume`` after a kill replays only what is missing (``plansim
capacity``'s journal).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

import typer

from plansim.commands import console
from plansim.commands.capacity import (
    BackendOption,
    JobsOption,
    RayAddressOption,
    replays_line,
    run_search,
)
from plansim.commands.console import QuietOption
from plansim.commands.output import (
    ForceOption,
    OutputFolder,
    ResumeOption,
    open_journal,
    out_option,
    start_work,
    write_reports,
)
from plansim.commands.report import SelfContainedOption
from plansim.commands.retune_windows import DEFAULT_BACKEND
from plansim.errors import InputError


def fleet(
    fleet_file: Annotated[
        Path,
        typer.Argument(
            help="The fleet file (YAML or JSON): inventory, budget, models.",
            metavar="FLEET.yaml",
            show_default=False,
        ),
    ],
    backend: BackendOption = DEFAULT_BACKEND,
    ray_address: RayAddressOption = None,
    jobs: JobsOption = None,
    out: out_option("fleet") = None,
    no_report: Annotated[bool, typer.Option("--no-report", help="Skip fleet_report.html.")] = False,
    self_contained: SelfContainedOption = False,
    quiet: QuietOption = False,
    force: ForceOption = False,
    resume: ResumeOption = False,
) -> int:
    """Find the cheapest fleet (one deployment per model) that meets every model's goodput
    target within the GPU inventory and the budget, and replay it autoscaled when the models
    have planners."""
    import os

    from plansim import fleet as fl
    from plansim.configfile import read_config
    from plansim.workers.backends import check_address, make_executor

    folder = OutputFolder.claim(out, "fleet", "plansim fleet", force=force, resume=resume)
    check_address(backend.value, ray_address)
    # Everything that can be checked without the traces is checked first.
    plan = fl.prepare(fl.load_fleet(fleet_file), source=str(fleet_file))
    workloads = [_workload(m, str(fleet_file)) for m in plan.models]
    inputs = {
        "command": "plansim fleet",
        "fleet": read_config(fleet_file, what="fleet file"),
        "deployments": {m.name: m.deployment.model_dump(mode="json") for m in plan.models},
        "requests": {m.name: len(w) for m, w in zip(plan.models, workloads)},
    }
    # A resumed run must replay the same traffic: every model's trace content, in model order.
    digests = "\0".join(f"{m.name}={w.content_digest()}" for m, w in zip(plan.models, workloads))
    journal = open_journal(folder, inputs, digests)
    executor = make_executor(backend.value, jobs or os.cpu_count() or 1, ray_address)
    start_work()
    with folder.writing() as out_dir:
        result, report = run_search(
            "fleet",
            lambda executor, on_round: fl.run(
                plan, workloads, executor=executor, on_round=on_round
            ),
            executor,
            journal,
            backend.value,
            quiet,
        )
        _write(out_dir, result, report, inputs)
        headline, *lines = table_lines(report)
        console.result(headline)
        console.echo(*lines)
        if not no_report:
            write_reports(out_dir, self_contained=self_contained)
    console.echo(f"output        {out_dir}")
    return console.finish(report)


def _workload(m: Any, source: str) -> Any:
    """The model's trace; a format or block-size mistake names the model's key."""
    from plansim.traces import load_workload

    try:
        return load_workload(list(m.traces), format=m.format, trace_block_size=m.trace_block_size)
    except InputError as exc:
        keys = {"--format": "format", "--trace-block-size": "trace_block_size"}
        if exc.field in keys:
            raise InputError(
                exc.message, source=source, field=f"models.{m.index}.{keys[exc.field]}"
            ) from None
        raise


def _write(out_dir: Path, result: Any, report: dict[str, Any], inputs: dict[str, Any]) -> None:
    import yaml

    from plansim import schema
    from plansim.capacity.export import deployment_file
    from plansim.io import atomic_write_json, atomic_write_text, write_parquet_atomic
    from plansim.sim.deployment import with_overrides

    atomic_write_json(out_dir / schema.INPUTS_JSON, inputs)
    write_parquet_atomic(out_dir / schema.POINTS_TABLE, result.points)
    if result.feasible:
        for m, pick in zip(result.plan.models, result.picks):
            folder = out_dir / schema.FLEET_MODELS_DIR / m.name
            folder.mkdir(parents=True, exist_ok=True)
            head = f"# plansim fleet: {m.name}'s deployment in the cheapest fleet\n"
            if pick.tier != "on_demand":
                head += f"# every worker on {pick.tier} capacity\n"
            dep = with_overrides(m.deployment, pick.deployment())
            atomic_write_text(
                folder / schema.RECOMMENDED_DEPLOYMENT,
                head + yaml.safe_dump(deployment_file(dep, None), sort_keys=False),
            )
    atomic_write_json(out_dir / schema.FLEET_JSON, report)


# -- the terminal table ------------------------------------------------------------------------


def _workers(point: Mapping[str, Any]) -> str:
    if "num_workers" in point:
        return str(point["num_workers"])
    return f"{point['num_prefill_workers']}P+{point['num_decode_workers']}D"


def _gpus(point: Mapping[str, Any]) -> str:
    return "+".join(f"{n} {s}" for s, n in point["gpus"].items())


def table_lines(report: Mapping[str, Any]) -> list[str]:
    """The terminal answer from a ``fleet.json`` mapping."""
    from plansim.reports.format import percent, percent_against

    solver = report["solver"]
    proved = "proved optimal" if solver["proved_optimal"] else f"status {solver['status']}"
    budget = report["budget_per_hour"]
    lines = []
    what = "fits" if report["feasible"] else "does not fit; the closest fleet"
    lines.append(
        f"fleet         {what}: {len(report['models'])} models, "
        f"{report['cost_per_hour']:.3f} per hour"
        + (f" (budget {budget:g})" if budget is not None else "")
        + f", {report['cost']:.3f} over the traces; {solver['name']}: {proved}"
    )
    independent = report["independent"]
    if independent["cost_per_hour"] is not None:
        fits = "fit" if independent["fits"] else "do not fit"
        lines.append(
            f"alone         each model's cheapest answer: "
            f"{independent['cost_per_hour']:.3f} per hour together; they {fits}"
        )
    lines.append("")
    rows = [(m["name"], m["choice"], m) for m in report["models"]]
    width = max([len("model")] + [len(n) for n, _, _ in rows])
    vwidth = max([len("deployment")] + [len(c["variant"]) for _, c, _ in rows])
    lines.append(
        f"{'model':<{width}}  {'deployment':<{vwidth}}  {'workers':>7}  "
        f"{'tier':<9}  {'GPUs':<14}  {'goodput':>7}  {'target':>6}  {'per hour':>8}  "
        "alone"
    )
    for name, choice, m in rows:
        alone = m["cheapest_alone"]
        alone_text = "-" if alone is None else f"{alone['cost_per_hour']:.3f}"
        if choice["moved"]:
            alone_text += f" (moved: {alone['variant']}, {_workers(alone)} on {alone['tier']})"
        lines.append(
            f"{name:<{width}}  {choice['variant']:<{vwidth}}  {_workers(choice):>7}  "
            f"{choice['tier']:<9}  {_gpus(choice):<14}  "
            f"{percent_against(choice['goodput_ratio'], m['target']):>7}  "
            f"{percent(m['target']):>6}  {choice['cost_per_hour']:>8.3f}  {alone_text}"
        )
    lines.append("")
    for system, entry in report["inventory"].items():
        spot = f", {entry['used_spot']} of them spot" if entry["used_spot"] else ""
        lines.append(f"GPUs          {system}: {entry['used']} of {entry['count']}{spot}")
    auto = report.get("autoscaled")
    if auto is not None:
        lines.append("")
        lines.append(
            f"autoscaled    {auto['gpu_hours']:.2f} GPU-h, {auto['cost']:.3f} over the "
            f"traces, {auto['refused_scale_ups']} scale-ups refused, "
            f"{auto['sla_cost_good_requests']} good requests lost to them"
        )
        for entry in auto["models"]:
            cost = ""
            if "sla_cost" in entry:
                cost = (
                    f", alone {percent(entry['alone']['goodput_ratio'])} "
                    f"({entry['sla_cost']['good_requests']:+d} good requests lost)"
                )
            lines.append(
                f"  {entry['name']:<{width}}  goodput "
                f"{percent(entry['goodput_ratio'])}, {entry['gpu_hours']:.2f} GPU-h, "
                f"{entry['scaling_events']} scaling events, "
                f"{entry['refused_scale_ups']} refused, "
                f"{entry['preemptions']} preempted{cost}"
            )
    for note in report["notes"]:
        lines.append(f"note          {note}")
    lines.append(replays_line(report))
    return lines
