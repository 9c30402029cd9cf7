"""`plansim retune` commands: ``sweep`` (replay with retune on), ``window`` (score one window)
and ``windows`` (many windows at once, ``plansim.commands.retune_windows``).

Printing lives here and in ``plansim.commands.retune_text``; the work is in
``plansim.retune_runs.runner``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any

import typer

from plansim.commands import console
from plansim.commands.console import QuietOption
from plansim.commands.output import (
    ForceOption,
    OutputFolder,
    ResumeOption,
    open_journal,
    out_option,
    start_work,
    warn_if_all_rejected,
    write_replay_outputs,
    write_reports,
)
from plansim.commands.progress import Progress
from plansim.commands.report import SelfContainedOption
from plansim.commands.retune_text import (
    ranked_table,
    score_legend,
    scoring_sla,
    window_line,
)
from plansim.commands.retune_windows import NoTimeoutOption, echo_resumed
from plansim.io import atomic_write_json
from plansim.schema import BASELINE_JSON

app = typer.Typer(
    help="Retune router and planner parameters over traffic windows.", no_args_is_help=True
)


@app.command("sweep")
def sweep(
    config: Annotated[
        Path,
        typer.Argument(
            help="Retune run file (YAML/JSON): trace, deployment, planner with its retune block.",
            show_default=False,
        ),
    ],
    out: out_option("retune") = None,
    no_report: Annotated[bool, typer.Option("--no-report", help="Skip the HTML reports.")] = False,
    self_contained: SelfContainedOption = False,
    quiet: QuietOption = False,
    force: ForceOption = False,
    resume: ResumeOption = False,
    no_baseline: Annotated[
        bool,
        typer.Option(
            "--no-baseline",
            help="Skip the second replay without retune (the starting parameters "
            "held: baseline.json), which the report's before/after goodput and GPU-hours "
            "compare with.",
        ),
    ] = False,
) -> int:
    """Replay the trace with retune on: one sweep per window, one line per decision; then the
    same replay without retune, for the goodput and GPU-hours before and after.

    Each window's replays and report are recorded in the output folder as they finish, so that
    --resume after a kill sweeps only what is missing (the replay itself runs again: with the
    recorded sweeps it decides as the interrupted run did).
    """
    from plansim.retune_runs.batch import journaled_sweep
    from plansim.retune_runs.runner import (
        count_windows,
        load_retune_run,
        load_run_workload,
        run_retune,
    )
    from plansim.sim.summary import without_host_keys

    folder = OutputFolder.claim(out, "retune", "plansim retune sweep", force=force, resume=resume)
    run = load_retune_run(config)
    workload = load_run_workload(run)
    inputs = {
        "command": "plansim retune sweep",
        "config": str(config),
        "traces": list(run.trace_paths),
        "trace_format": run.trace_format,
        "requests": len(workload),
        "deployment": run.deployment.model_dump(mode="json"),
        "planner": run.planner_raw,
        "sla": run.deployment.sla.model_dump(mode="json"),
        "seed": run.deployment.seed,
        "scoring_sla": scoring_sla(run.retune),
    }
    journal = open_journal(folder, inputs, workload.content_digest())
    console.echo(score_legend(run.retune))
    start_work()
    # The folder is written from the first recorded replay on (its resume records).
    with folder.writing() as out_dir:
        # Over the windows whose sweep launches before the last arrival (an estimate).
        with Progress(
            "retune", total=count_windows(run, workload), unit="windows", quiet=quiet
        ) as bar:

            def on_decision(event: dict[str, Any]) -> None:
                bar.echo(window_line(event))
                bar.advance()

            result = run_retune(
                run,
                workload=workload,
                on_decision=on_decision,
                sweep=lambda plan, pool: journaled_sweep(plan, pool, journal),
            )
        inputs.update(result.inputs)
        baseline = None if no_baseline else retune_baseline(run, workload)
        events = result.retune_events or []
        counts: dict[str, int] = {}
        for event in events:
            counts[event["outcome"]] = counts.get(event["outcome"], 0) + 1
        tally = ", ".join(f"{n} {k}" for k, n in sorted(counts.items())) or "no window completed"
        verdict = f"decisions     {len(events)} ({tally})"
        if baseline is not None:
            verdict += "; " + before_after(baseline["summary"], result.summary)
        warn_if_all_rejected(result, inputs)
        write_replay_outputs(out_dir, result, inputs)
        if baseline is not None:
            atomic_write_json(out_dir / BASELINE_JSON, baseline)
        echo_resumed(journal)
        console.echo(f"output        {out_dir}")
        if not no_report:
            write_reports(out_dir, self_contained=self_contained)
    console.result(f"{verdict}: {out_dir}")
    return console.finish(without_host_keys(result.summary))


@app.command("window")
def window(
    config: Annotated[
        Path, typer.Argument(help="Retune run file (YAML/JSON).", show_default=False)
    ],
    index: Annotated[
        int,
        typer.Option("--window", "-k", min=0, help="Window index k: planner time [kT, (k+1)T)."),
    ],
    no_timeout: NoTimeoutOption = False,
    out: out_option("retune-window") = None,
    no_report: Annotated[bool, typer.Option("--no-report", help="Skip the HTML report.")] = False,
    self_contained: SelfContainedOption = False,
    quiet: QuietOption = False,
    force: ForceOption = False,
) -> int:
    """Score one window's candidates without the outer replay; print them ranked.

    The sweep starts from the startup point with the deployment's starting worker counts. The
    output folder is the one 'retune windows' writes, for this one window, with its report.
    """
    from plansim.commands.retune_windows import plans_of_run, write_window_outputs
    from plansim.retune_runs.batch import score_windows
    from plansim.retune_runs.runner import load_retune_run
    from plansim.workers.backends import EXECUTORS, make_executor

    folder = OutputFolder.claim(out, "retune-window", "plansim retune window", force=force)
    run = load_retune_run(config)
    cfg = run.retune.config
    plans = plans_of_run(
        run,
        first=index,
        last=index,
        first_option="--window",
        last_option="--window",
        no_timeout=no_timeout,
    )
    # One window is swept on this machine, by the default executor.
    executor = make_executor(EXECUTORS.names()[0], cfg.max_parallel)
    start_work()
    try:
        # Over the sweep's tasks (the window's read, the pre-sweep, the candidates' replays),
        # known batch by batch.
        with Progress("retune window", total=0, unit="tasks", quiet=quiet) as bar:
            results = score_windows(plans, _Counted(executor, bar))
    finally:
        executor.close()
    table = ranked_table(results[0].report, cfg, index)
    console.echo(score_legend(run.retune), *table[:-1])
    with folder.writing() as out_dir:
        summary = write_window_outputs(
            out_dir,
            run,
            plans,
            results,
            command="plansim retune window",
            config=config,
            extra={"no_timeout": no_timeout},
        )
        console.echo(f"output        {out_dir}")
        if not no_report:
            write_reports(out_dir, self_contained=self_contained)
    console.result(table[-1])
    return console.finish(summary)


def retune_baseline(run: Any, workload: Any) -> dict[str, Any]:
    """``baseline.json`` of a retune run: the same replay with the planner's retune block left
    out (the starting router and planner parameters held throughout; a planner that only
    retunes leaves no planner)."""
    from plansim import api
    from plansim.sim.summary import without_host_keys

    planner = (
        None
        if run.planner_config.retune_only
        else {k: v for k, v in run.planner_raw.items() if k != "retune"}
    )
    result = api.replay(workload, api.setup(run.deployment, planner, source=run.source))
    return {"label": "without retune", "summary": without_host_keys(result.summary)}


def before_after(before: dict[str, Any], after: dict[str, Any]) -> str:
    """Goodput and GPU-hours without retune, then with it."""
    text = f"GPU-hours {before['gpu_hours']:.4f} → {after['gpu_hours']:.4f}"
    if "goodput_completed_requests" in after and after["num_requests"]:
        old = before["goodput_completed_requests"] / before["num_requests"]
        new = after["goodput_completed_requests"] / after["num_requests"]
        text = f"goodput {old:.1%} → {new:.1%}, " + text
    return text + " (without → with retune)"


class _Counted:
    """A spawn pool whose batches move the progress display: each batch adds its tasks to the
    total, each task's result advances it."""

    def __init__(self, pool: Any, bar: Progress) -> None:
        self._pool, self._bar = pool, bar
        self._total = 0
        self.max_parallel = pool.max_parallel

    def run(
        self, tasks: Any, context: Any, timeout_s: float | None = None, on_result: Any = None
    ) -> Any:
        self._total += len(tasks)
        self._bar.update(self._total - len(tasks), total=self._total)

        def done(result: Any) -> None:
            self._bar.advance()
            if on_result is not None:
                on_result(result)

        return self._pool.run(tasks, context, timeout_s, on_result=done)

    def cancel(self) -> None:
        self._pool.cancel()

    def close(self) -> None:
        self._pool.close()


def _register_windows() -> None:
    from plansim.commands.retune_windows import windows

    app.command("windows")(windows)


_register_windows()
