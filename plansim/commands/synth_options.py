"""The options of a synthetic workload, written once for ``plansim trace synth`` and
``plansim replay synth`` (``SYNTH_OPTIONS``, see ``plansim.commands.options``), and the
workload they build."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from plansim.errors import InputError

Rate = Annotated[
    float, typer.Option("--rate", help="Mean request rate, requests/s (the base rate of steps).")
]
Duration = Annotated[float, typer.Option("--duration", help="Length of the trace in seconds.")]
Schedule = Annotated[
    str,
    typer.Option(
        help="Rate schedule: constant, steps (see --step) or diurnal (sinusoidal; see "
        "--peak-to-trough, --period)."
    ),
]
Step = Annotated[
    list[str] | None,
    typer.Option(
        "--step",
        help="START_S:RATE_RPS, repeatable: from START_S on the rate is RATE_RPS (steps schedule).",
    ),
]
PeakToTrough = Annotated[float, typer.Option(help="Diurnal: peak rate / trough rate (>= 1).")]
Period = Annotated[
    float | None, typer.Option(help="Diurnal: period in seconds (default: the duration).")
]
Spike = Annotated[
    list[str] | None,
    typer.Option(
        "--spike",
        help="START_S:DURATION_S:MULTIPLIER, repeatable: multiply the rate inside the span.",
    ),
]
Arrival = Annotated[str, typer.Option(help="Arrival process: poisson or gamma (see --burstiness).")]
Burstiness = Annotated[
    float,
    typer.Option(
        help="Gamma arrivals: squared coefficient of variation of the gaps "
        "(1 = Poisson, > 1 burstier)."
    ),
]
Isl = Annotated[
    str,
    typer.Option(
        help="ISL distribution: fixed, normal, lognormal or trace (resample --lengths-from)."
    ),
]
IslMean = Annotated[float | None, typer.Option(help="ISL mean in tokens.")]
IslStd = Annotated[
    float | None,
    typer.Option(
        help="ISL standard deviation in tokens (default: mean/4 normal, mean/2 lognormal)."
    ),
]
Osl = Annotated[str, typer.Option(help="OSL distribution: fixed, normal, lognormal or trace.")]
OslMean = Annotated[float | None, typer.Option(help="OSL mean in tokens.")]
OslStd = Annotated[float | None, typer.Option(help="OSL standard deviation in tokens.")]
LengthsFrom = Annotated[
    str | None, typer.Option(help="Trace whose ISL/OSL the 'trace' distributions resample.")
]
BlockSize = Annotated[int, typer.Option("--trace-block-size", min=1, help="Tokens per hash block.")]
PrefixGroups = Annotated[
    int, typer.Option(help="Number of shared-prefix groups (0: no shared prefixes).")
]
SharedPrefixRatio = Annotated[
    float, typer.Option(help="Share of each prompt that is its group's prefix (0..1).")
]
Turns = Annotated[
    int, typer.Option(help="Turns per session; each turn repeats the previous prompt and output.")
]
InterTurnDelay = Annotated[
    float,
    typer.Option(
        help="Seconds between the turns of a session (from the previous turn's arrival; with "
        "--closed-loop, from its end)."
    ),
]
ClosedLoop = Annotated[
    bool,
    typer.Option(
        "--closed-loop",
        help="Closed-loop sessions: a later turn follows the previous turn's end "
        "by --inter-turn-delay (mooncake: session_id + delay).",
    ),
]

SYNTH_OPTIONS = {
    "rate": (Rate, ...),
    "duration": (Duration, ...),
    "schedule": (Schedule, "constant"),
    "step": (Step, None),
    "peak_to_trough": (PeakToTrough, 4.0),
    "period": (Period, None),
    "spike": (Spike, None),
    "arrival": (Arrival, "poisson"),
    "burstiness": (Burstiness, 1.0),
    "isl": (Isl, "lognormal"),
    "isl_mean": (IslMean, 3000.0),
    "isl_std": (IslStd, None),
    "osl": (Osl, "lognormal"),
    "osl_mean": (OslMean, 300.0),
    "osl_std": (OslStd, None),
    "lengths_from": (LengthsFrom, None),
    "block_size": (BlockSize, 512),
    "prefix_groups": (PrefixGroups, 0),
    "shared_prefix_ratio": (SharedPrefixRatio, 0.0),
    "turns": (Turns, 1),
    "inter_turn_delay": (InterTurnDelay, 30.0),
    "closed_loop": (ClosedLoop, False),
}

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
    raise InputError(
        f"unknown distribution {kind!r}; choose fixed, normal, lognormal or trace", field=option
    )


def synthesize_from(options: dict[str, Any], *, seed: int):
    """The workload of the synth options (keyword names as in ``plansim trace synth``)."""
    from plansim.traces import load_workload
    from plansim.traces.synth import SynthSpec, synthesize

    o = options
    sample = load_workload(o["lengths_from"]) if o["lengths_from"] else None
    spec = SynthSpec(
        duration_s=o["duration"],
        rate_rps=o["rate"],
        schedule=o["schedule"],
        steps=_pairs(o["step"] or [], ("START_S", "RATE_RPS"), "--step"),  # type: ignore[arg-type]
        peak_to_trough=o["peak_to_trough"],
        period_s=o["period"],
        spikes=_pairs(o["spike"] or [], ("START_S", "DURATION_S", "MULTIPLIER"), "--spike"),  # type: ignore[arg-type]
        arrival=o["arrival"],
        burstiness=o["burstiness"],
        isl=_length(
            o["isl"], o["isl_mean"], o["isl_std"], sample.isl_tokens if sample else None, "--isl"
        ),
        osl=_length(
            o["osl"], o["osl_mean"], o["osl_std"], sample.osl_tokens if sample else None, "--osl"
        ),
        trace_block_size=o["block_size"],
        prefix_groups=o["prefix_groups"],
        shared_prefix_ratio=o["shared_prefix_ratio"],
        turns_per_session=o["turns"],
        inter_turn_delay_s=o["inter_turn_delay"],
        closed_loop=o["closed_loop"],
    )
    try:
        return synthesize(spec, seed=seed)
    except InputError as exc:
        option = _SPEC_OPTIONS.get(exc.field or "", f"--{(exc.field or '').replace('_', '-')}")
        raise InputError(exc.message, field=option) from None
