"""`plansim trace` commands: inspect, convert and synthesize request traces.

``plansim trace inspect FILE...``  counts, time span, rates, length distributions, reuse bound.
``plansim trace convert IN OUT --to dynamo|mooncake``  rewrite a trace in another format.
``plansim trace synth --rate R --duration S -o OUT``  write a seeded synthetic trace.

Bad input raises ``InputError``; ``plansim.cli.main`` prints it as one line, exit status 2.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated

import typer

from plansim.commands.output import check_output_file
from plansim.errors import InputError
from plansim.limits import MAX_ARRIVAL_MS, MAX_SEED, check_number

app = typer.Typer(help="Inspect, convert and synthesize request traces.", no_args_is_help=True)

FORMAT_HELP = (
    "Input format: auto (detect from the content), dynamo (dynamo.request.trace.v1 JSONL, plain "
    "or gzip), mooncake (Mooncake JSONL, sessions included), agentic_mooncake "
    "(dynamo.agentic_mooncake) or azure (Azure LLM inference CSV)."
)
BLOCK_HELP = (
    "Tokens per hash block. Mooncake and Azure traces default to 512; Dynamo traces carry their "
    "own block size and a different value is an error."
)
FormatOpt = Annotated[str, typer.Option("--format", "-f", help=FORMAT_HELP)]
BlockOpt = Annotated[int | None, typer.Option("--trace-block-size", help=BLOCK_HELP, min=1)]


@app.callback()
def _group() -> None:
    """Inspect, convert and synthesize request traces."""


def _fmt_dist(stats: dict[str, float]) -> str:
    if not stats:
        return "-"
    return "  ".join(f"{k} {v:,.0f}" if abs(v) >= 100 else f"{k} {v:,.1f}" for k, v in stats.items())


def _fmt_time(ms: float | None) -> str:
    if ms is None:
        return "-"
    if ms > 1e11:  # a Unix time in ms
        return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")
    return f"{ms / 1000:,.3f} s"


@app.command()
def inspect(
    files: Annotated[list[str], typer.Argument(help="Trace files, globs or folders of shards (read together).")],
    format: FormatOpt = "auto",
    trace_block_size: BlockOpt = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the figures as one JSON object.")] = False,
) -> None:
    """Summarise traces: counts, time span, rates, ISL/OSL, block size, prefix-reuse bound.

    Prints rows read and skipped by reason, the time span, the mean and peak 1-minute request
    rate, ISL/OSL mean/p50/p90/p99/max, the block size and the prefix-reuse upper bound (the
    share of block references whose prefix appeared earlier: what an infinite cache could reuse).
    """
    from plansim.traces import load_workload
    from plansim.traces.stats import describe

    workload = load_workload(files, format=format, trace_block_size=trace_block_size)
    d = describe(workload)
    if as_json:
        typer.echo(json.dumps({"files": list(workload.sources), **d}, indent=2))
        return
    skipped = ", ".join(f"{k} {v:,}" for k, v in d["skipped"].items()) or "none"
    rate = d["mean_rate_rps"]
    lines = [
        f"files         {len(workload.sources)}: " + ", ".join(workload.sources),
        f"rows read     {d['rows_read']:,}  (requests {d['requests']:,}; skipped: {skipped})",
        f"time span     {d['span_s']:,.1f} s  ({_fmt_time(d['first_arrival_ms'])} .. {_fmt_time(d['last_arrival_ms'])})",
        f"request rate  mean {rate:,.3f} req/s, peak 1-minute {d['peak_1min_rate_rps']:,.3f} req/s"
        if rate is not None
        else f"request rate  - (one instant), peak 1-minute {d['peak_1min_rate_rps']:,.3f} req/s",
        f"ISL tokens    {_fmt_dist(d['isl_tokens'])}",
        f"OSL tokens    {_fmt_dist(d['osl_tokens'])}",
        f"block size    {d['trace_block_size']} tokens, {d['blocks']:,} blocks",
        f"prefix reuse  <= {100 * d['prefix_reuse_upper_bound']:.1f}% of blocks (infinite cache)",
    ]
    if "sessions" in d:
        triggers = ", ".join(f"{k} {v:,}" for k, v in d["edges_by_trigger"].items()) or "none"
        lines += [
            f"sessions      {d['sessions']:,}  ({d['requests_outside_sessions']:,} requests "
            "outside sessions)",
            f"turns/session {_fmt_dist(d['turns_per_session'])}",
            f"dependencies  {d['dependency_edges']:,} edges ({triggers}); "
            f"{d['requests_waiting_on_dependencies']:,} requests wait on one (closed loop)",
        ]
    if "recorded_ttft_ms" in d:
        lines.append(f"recorded TTFT {_fmt_dist(d['recorded_ttft_ms'])} ms")
    if "recorded_total_ms" in d:
        lines.append(f"recorded E2E  {_fmt_dist(d['recorded_total_ms'])} ms")
    typer.echo("\n".join(lines))


@app.command()
def convert(
    src: Annotated[str, typer.Argument(help="Input trace: a file, glob or folder of shards.")],
    out: Annotated[Path, typer.Argument(help="Output file (overwritten atomically).")],
    to: Annotated[str, typer.Option("--to", help="Output format: dynamo (gzip request_end rows), mooncake (JSONL; sessions as session_id + delay) or agentic_mooncake (dependencies).")],
    format: FormatOpt = "auto",
    trace_block_size: BlockOpt = None,
    epoch_ms: Annotated[float | None, typer.Option(
        "--epoch-ms",
        help="Dynamo output: Unix ms added to arrivals that are offsets (Mooncake, synthetic). "
             "Default: 0 for arrivals that already are Unix times, else 1764000000000.")] = None,
) -> None:
    """Rewrite a trace as a Dynamo request trace or Mooncake JSONL.

    Dynamo output keeps recorded latencies; Mooncake timestamps become ms after the first arrival.
    A closed-loop trace keeps its sessions (mooncake) or its whole dependency graph
    (agentic_mooncake).
    """
    from plansim.traces import load_workload

    _check_to(to)
    if epoch_ms is not None:
        check_number(epoch_ms, "--epoch-ms", ge=0, le=MAX_ARRIVAL_MS, unit="ms")
    check_output_file(out, "OUT")
    workload = load_workload(src, format=format, trace_block_size=trace_block_size)
    epoch = _epoch(workload, epoch_ms)
    if to == "dynamo":
        last_ms = epoch + (float(workload.arrival_ms[-1]) if len(workload) else 0.0)
        if not last_ms < MAX_ARRIVAL_MS:
            raise InputError(f"{epoch:g} ms puts the last arrival at {last_ms:g} ms, past "
                             f"{MAX_ARRIVAL_MS:g} ms (the year 2286)", field="--epoch-ms")
    _write(workload, out, to, epoch)
    note = ""
    if to == "mooncake" and workload.trace_block_size != 512:
        note = f"; read it back with --trace-block-size {workload.trace_block_size}"
    typer.echo(f"wrote {len(workload):,} requests to {out} ({to}){note}")


_OUTPUT_FORMATS = ("dynamo", "mooncake", "agentic_mooncake")


def _check_to(to: str) -> None:
    if to not in _OUTPUT_FORMATS:
        raise InputError(f"unknown output format {to!r}; choose {', '.join(_OUTPUT_FORMATS)}",
                         field="--to")


def _write(workload, out: Path, to: str, epoch_ms: float) -> None:
    from plansim.traces.writers import write_agentic_mooncake, write_dynamo, write_mooncake

    if to == "dynamo":
        write_dynamo(workload, out, epoch_ms=epoch_ms)
    elif to == "mooncake":
        write_mooncake(workload, out)
    else:
        write_agentic_mooncake(workload, out)


def _epoch(workload, epoch_ms: float | None) -> float:
    if epoch_ms is not None:
        return epoch_ms
    first = float(workload.arrival_ms[0]) if len(workload) else 0.0
    return 0.0 if first > 1e11 else 1_764_000_000_000.0


# SynthSpec field -> the option that sets it, for error messages.
_SPEC_OPTIONS = {
    "duration_s": "--duration",
    "rate_rps": "--rate",
    "steps": "--step",
    "period_s": "--period",
    "spikes": "--spike",
    "turns_per_session": "--turns",
    "inter_turn_delay_s": "--inter-turn-delay",
}


def _pairs(values: list[str], names: tuple[str, ...], option: str) -> tuple[tuple[float, ...], ...]:
    out = []
    for text in values:
        parts = text.split(":")
        try:
            nums = tuple(float(p) for p in parts)
        except ValueError:
            nums = ()
        if len(nums) != len(names):
            raise InputError(f"{text!r} is not {':'.join(names)}", field=option)
        out.append(nums)
    return tuple(out)


def _length(kind: str, mean: float | None, std: float | None, values, option: str):
    from plansim.traces.synth import LengthSpec

    if kind == "trace":
        if values is None:
            raise InputError("needs --lengths-from TRACE", field=option)
        return LengthSpec.resample(values)
    if mean is None:
        raise InputError(f"{kind} needs a mean", field=f"{option}-mean")
    if kind == "fixed":
        return LengthSpec.fixed(int(mean))
    if kind == "normal":
        return LengthSpec.normal(mean, std if std is not None else mean / 4)
    if kind == "lognormal":
        return LengthSpec.lognormal(mean, std if std is not None else mean / 2)
    raise InputError(f"unknown distribution {kind!r}; choose fixed, normal, lognormal or trace", field=option)


@app.command()
def synth(
    rate: Annotated[float, typer.Option("--rate", help="Mean request rate, requests/s (the base rate of steps).")],
    duration: Annotated[float, typer.Option("--duration", help="Length of the trace in seconds.")],
    output: Annotated[Path, typer.Option("--output", "-o", help="Output file.")],
    to: Annotated[str, typer.Option("--to", help="Output format: dynamo (gzip) or mooncake (JSONL).")] = "dynamo",
    schedule: Annotated[str, typer.Option(
        help="Rate schedule: constant, steps (see --step) or diurnal (sinusoidal; see "
             "--peak-to-trough, --period).")] = "constant",
    step: Annotated[list[str] | None, typer.Option(
        "--step", help="START_S:RATE_RPS, repeatable: from START_S on the rate is RATE_RPS (steps schedule).")] = None,
    peak_to_trough: Annotated[float, typer.Option(help="Diurnal: peak rate / trough rate (>= 1).")] = 4.0,
    period: Annotated[float | None, typer.Option(help="Diurnal: period in seconds (default: the duration).")] = None,
    spike: Annotated[list[str] | None, typer.Option(
        "--spike", help="START_S:DURATION_S:MULTIPLIER, repeatable: multiply the rate inside the span.")] = None,
    arrival: Annotated[str, typer.Option(help="Arrival process: poisson or gamma (see --burstiness).")] = "poisson",
    burstiness: Annotated[float, typer.Option(
        help="Gamma arrivals: squared coefficient of variation of the gaps (1 = Poisson, > 1 burstier).")] = 1.0,
    isl: Annotated[str, typer.Option(help="ISL distribution: fixed, normal, lognormal or trace (resample --lengths-from).")] = "lognormal",
    isl_mean: Annotated[float | None, typer.Option(help="ISL mean in tokens.")] = 3000.0,
    isl_std: Annotated[float | None, typer.Option(help="ISL standard deviation in tokens (default: mean/4 normal, mean/2 lognormal).")] = None,
    osl: Annotated[str, typer.Option(help="OSL distribution: fixed, normal, lognormal or trace.")] = "lognormal",
    osl_mean: Annotated[float | None, typer.Option(help="OSL mean in tokens.")] = 300.0,
    osl_std: Annotated[float | None, typer.Option(help="OSL standard deviation in tokens.")] = None,
    lengths_from: Annotated[str | None, typer.Option(help="Trace whose ISL/OSL the 'trace' distributions resample.")] = None,
    block_size: Annotated[int, typer.Option("--trace-block-size", min=1, help="Tokens per hash block.")] = 512,
    prefix_groups: Annotated[int, typer.Option(help="Number of shared-prefix groups (0: no shared prefixes).")] = 0,
    shared_prefix_ratio: Annotated[float, typer.Option(help="Share of each prompt that is its group's prefix (0..1).")] = 0.0,
    turns: Annotated[int, typer.Option(help="Turns per session; each turn repeats the previous prompt and output.")] = 1,
    inter_turn_delay: Annotated[float, typer.Option(help="Seconds between the turns of a session (from the previous turn's arrival; with --closed-loop, from its end).")] = 30.0,
    closed_loop: Annotated[bool, typer.Option(
        "--closed-loop", help="Write sessions in the closed-loop form: a later turn follows the previous turn's end by --inter-turn-delay (mooncake: session_id + delay).")] = False,
    seed: Annotated[int, typer.Option(help="Random seed; the same options and seed give the same trace.")] = 0,
) -> None:
    """Write a seeded synthetic trace.

    Arrivals follow a rate schedule (Poisson or gamma), ISL/OSL come from distributions, with
    optional shared-prefix groups and multi-turn sessions.
    """
    from plansim.traces import load_workload
    from plansim.traces.synth import SynthSpec, synthesize

    _check_to(to)
    if closed_loop and to == "dynamo":
        raise InputError("--closed-loop writes sessions with think times: use --to mooncake "
                         "or agentic_mooncake", field="--to")
    if not 0 <= seed <= MAX_SEED:
        raise InputError(f"must be in [0, {MAX_SEED}], got {seed}", field="--seed")
    check_output_file(output, "--output")
    sample = load_workload(lengths_from) if lengths_from else None
    spec = SynthSpec(
        duration_s=duration,
        rate_rps=rate,
        schedule=schedule,  # type: ignore[arg-type]
        steps=_pairs(step or [], ("START_S", "RATE_RPS"), "--step"),  # type: ignore[arg-type]
        peak_to_trough=peak_to_trough,
        period_s=period,
        spikes=_pairs(spike or [], ("START_S", "DURATION_S", "MULTIPLIER"), "--spike"),  # type: ignore[arg-type]
        arrival=arrival,  # type: ignore[arg-type]
        burstiness=burstiness,
        isl=_length(isl, isl_mean, isl_std, sample.isl_tokens if sample else None, "--isl"),
        osl=_length(osl, osl_mean, osl_std, sample.osl_tokens if sample else None, "--osl"),
        trace_block_size=block_size,
        prefix_groups=prefix_groups,
        shared_prefix_ratio=shared_prefix_ratio,
        turns_per_session=turns,
        inter_turn_delay_s=inter_turn_delay,
        closed_loop=closed_loop,
    )
    try:
        workload = synthesize(spec, seed=seed)
    except InputError as exc:
        option = _SPEC_OPTIONS.get(exc.field or "", f"--{(exc.field or '').replace('_', '-')}")
        raise InputError(exc.message, field=option) from None
    _write(workload, output, to, 1_764_000_000_000.0)
    typer.echo(f"wrote {len(workload):,} requests over {duration:g} s to {output} ({to}, seed {seed})")
