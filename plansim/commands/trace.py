"""`plansim trace` commands: inspect, convert and synthesize request traces.

``plansim trace inspect FILE...``  counts, time span, rates, length distributions, reuse bound.
``plansim trace convert IN OUT --to FORMAT``  rewrite a trace in another format.
``plansim trace synth --rate R --duration S -o OUT``  write a seeded synthetic trace.

Bad input raises ``InputError``; ``plansim.cli.main`` prints it as one line, exit status 2.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import typer

from plansim.commands import console, synth_options
from plansim.commands.options import with_options
from plansim.commands.output import check_output_file
from plansim.errors import InputError
from plansim.limits import MAX_ARRIVAL_MS, MAX_SEED, check_number
from plansim.traces.formats import (
    TRACE_FORMATS,
    block_size_help,
    input_help,
    output_help,
    writable,
)

app = typer.Typer(help="Inspect, convert and synthesize request traces.", no_args_is_help=True)

FormatOpt = Annotated[str, typer.Option("--format", "-f", help=input_help())]
BlockOpt = Annotated[int | None, typer.Option("--trace-block-size", help=block_size_help(), min=1)]
ToOpt = Annotated[str, typer.Option("--to", help=output_help())]
UNIX_OUTPUTS = [name for name in writable() if TRACE_FORMATS.get(name).writer.unix_ms]


@app.callback()
def _group() -> None:
    """Inspect, convert and synthesize request traces."""


def _fmt_dist(stats: dict[str, float]) -> str:
    if not stats:
        return "-"
    return "  ".join(
        f"{k} {v:,.0f}" if abs(v) >= 100 else f"{k} {v:,.1f}" for k, v in stats.items()
    )


def _fmt_time(ms: float | None) -> str:
    if ms is None:
        return "-"
    if ms > 1e11:  # a Unix time in ms
        return datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds")
    return f"{ms / 1000:,.3f} s"


@app.command()
def inspect(
    files: Annotated[
        list[str], typer.Argument(help="Trace files, globs or folders of shards (read together).")
    ],
    format: FormatOpt = "auto",
    trace_block_size: BlockOpt = None,
) -> int:
    """Summarise traces: counts, time span, rates, ISL/OSL, block size, prefix-reuse bound.

    Prints rows read and skipped by reason, the time span, the mean and peak 1-minute request
    rate, ISL/OSL mean/p50/p90/p99/max, the block size and the prefix-reuse upper bound (the
    share of block references whose prefix appeared earlier: what an infinite cache could reuse).
    """
    from plansim.traces import load_workload
    from plansim.traces.stats import describe

    workload = load_workload(files, format=format, trace_block_size=trace_block_size)
    d = describe(workload)
    skipped = ", ".join(f"{k} {v:,}" for k, v in d["skipped"].items()) or "none"
    rate = d["mean_rate_rps"]
    lines = [
        f"files         {len(workload.sources)}: " + ", ".join(workload.sources),
        f"rows read     {d['rows_read']:,}  (requests {d['requests']:,}; skipped: {skipped})",
        f"time span     {d['span_s']:,.1f} s  ({_fmt_time(d['first_arrival_ms'])} .. "
        f"{_fmt_time(d['last_arrival_ms'])})",
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
    console.echo(*lines)
    console.result(f"{d['requests']:,} requests over {d['span_s']:,.1f} s")
    return console.finish({"files": list(workload.sources), **d})


@app.command()
def convert(
    src: Annotated[str, typer.Argument(help="Input trace: a file, glob or folder of shards.")],
    out: Annotated[Path, typer.Argument(help="Output file (overwritten atomically).")],
    to: ToOpt,
    format: FormatOpt = "auto",
    trace_block_size: BlockOpt = None,
    epoch_ms: Annotated[
        float | None,
        typer.Option(
            "--epoch-ms",
            help=f"Output in {' or '.join(UNIX_OUTPUTS)} (Unix times): Unix ms added to arrivals "
            "that are offsets (Mooncake, synthetic). Default: 0 for arrivals that already are "
            "Unix times, else 1764000000000.",
        ),
    ] = None,
) -> int:
    """Rewrite a trace in another format (--to).

    Output in Unix times keeps recorded latencies; other outputs' timestamps become ms after the
    first arrival. A closed-loop trace keeps its sessions or its whole dependency graph where
    the output format holds them.
    """
    from plansim.traces import load_workload

    fmt = _output_format(to)
    if epoch_ms is not None:
        check_number(epoch_ms, "--epoch-ms", ge=0, le=MAX_ARRIVAL_MS, unit="ms")
    check_output_file(out, "OUT")
    workload = load_workload(src, format=format, trace_block_size=trace_block_size)
    epoch = _epoch(workload, epoch_ms)
    if fmt.writer.unix_ms:
        last_ms = epoch + (float(workload.arrival_ms[-1]) if len(workload) else 0.0)
        if not last_ms < MAX_ARRIVAL_MS:
            raise InputError(
                f"{epoch:,.0f} ms puts the last arrival at {last_ms:,.0f} ms, "
                f"past {MAX_ARRIVAL_MS:,.0f} ms (the year 2286)",
                field="--epoch-ms",
            )
    fmt.writer.write(workload, out, epoch)
    note = ""
    if fmt.block_size is not None and workload.trace_block_size != fmt.block_size:
        # The format does not store the block size: it reads back at its default.
        note = f"; read it back with --trace-block-size {workload.trace_block_size}"
    console.result(f"wrote {len(workload):,} requests to {out} ({to}){note}")
    return console.finish(
        {
            "output": str(out),
            "format": to,
            "requests": len(workload),
            "trace_block_size": workload.trace_block_size,
        }
    )


def _output_format(to: str) -> Any:
    """The format ``--to`` names (``InputError`` for one plansim does not write)."""
    if to not in writable():
        raise InputError(
            f"unknown output format {to!r}; choose {', '.join(writable())}", field="--to"
        )
    return TRACE_FORMATS.get(to)


def _epoch(workload, epoch_ms: float | None) -> float:
    if epoch_ms is not None:
        return epoch_ms
    first = float(workload.arrival_ms[0]) if len(workload) else 0.0
    return 0.0 if first > 1e11 else 1_764_000_000_000.0


@app.command()
@with_options(synth_options.SYNTH_OPTIONS)
def synth(
    ctx: typer.Context,
    output: Annotated[Path, typer.Option("--output", "-o", help="Output file.")],
    to: ToOpt = "dynamo",
    seed: Annotated[
        int, typer.Option(help="Random seed; the same options and seed give the same trace.")
    ] = 0,
    **options: Any,
) -> int:
    """Write a seeded synthetic trace.

    Arrivals follow a rate schedule (Poisson or gamma), ISL/OSL come from distributions, with
    optional shared-prefix groups and multi-turn sessions (open- or closed-loop).
    """
    fmt = _output_format(to)
    if options["closed_loop"] and not fmt.writer.graph:
        graphs = [name for name in writable() if TRACE_FORMATS.get(name).writer.graph]
        raise InputError(
            f"--closed-loop writes sessions with think times: use --to {' or '.join(graphs)}",
            field="--to",
        )
    if not 0 <= seed <= MAX_SEED:
        raise InputError(f"must be in [0, {MAX_SEED}], got {seed}", field="--seed")
    check_output_file(output, "--output")
    workload = synth_options.synthesize_from(ctx.params, seed=seed)
    fmt.writer.write(workload, output, 1_764_000_000_000.0)
    console.result(
        f"wrote {len(workload):,} requests over {options['duration']:g} s to "
        f"{output} ({to}, seed {seed})"
    )
    return console.finish(
        {
            "output": str(output),
            "format": to,
            "requests": len(workload),
            "duration_s": options["duration"],
            "seed": seed,
        }
    )
