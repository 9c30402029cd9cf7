"""Seeded synthetic workloads.

``synthesize(SynthSpec(...), seed)`` returns a ``Workload`` (arrivals in ms from 0, ids "0",
"1", ... in arrival order). The same spec and seed give the same workload, bit for bit.

Arrivals follow a rate schedule ``r(t)`` (requests/s) over ``[0, duration_s)``:

- ``constant``: ``rate_rps``;
- ``steps``: ``rate_rps`` until the first ``(start_s, rate_rps)`` step, then each step's rate;
- ``diurnal`` (sinusoidal): mean ``rate_rps``, peak / trough = ``peak_to_trough``, period
  ``period_s`` (default: the duration, so one trough-peak-trough cycle), starting at the trough;
- ``spikes`` (on top of any schedule): each ``(start_s, duration_s, multiplier)`` multiplies
  the rate inside its span.

The process is Poisson (``arrival="poisson"``) or a gamma renewal process with squared
coefficient of variation ``burstiness`` of the gaps (``arrival="gamma"``; 1 is Poisson, above 1
is burstier), run in operational time ``Lambda(t) = integral of r`` so the expected count in any
span is the integral of the rate over it.

Lengths (``LengthSpec``): fixed, normal, lognormal (by mean and standard deviation of the
tokens, not of the log), or resampled from given values (e.g. a loaded trace's ``isl_tokens``);
rounded and clipped to ``[minimum, maximum]``.

Prefix sharing: with ``prefix_groups > 0`` each session (each request without sessions) joins a
random group and shares its first ``floor(shared_prefix_ratio * isl / block)`` blocks with the
group's fixed prefix (``isl`` of the session's first prompt).
Sessions: with ``turns_per_session > 1``, ``rate_rps`` is the request rate and sessions start at
``rate_rps / turns_per_session``; turn n+1 arrives ``inter_turn_delay_s`` after turn n and its
prompt is turn n's prompt, turn n's output and a new input drawn from ``isl``, so it repeats all
complete blocks of turn n's prompt (rolling hashes: equal leading ids). Turns that would arrive
after ``duration_s`` are dropped. Hash ids are compact prefix-chain ids, as from a trace. With
``closed_loop``, turn n+1 is instead released ``inter_turn_delay_s`` after turn n *finishes*
(the Mooncake session form: the workload carries a ``graph``; ``arrival_ms`` stays the open-loop
estimate above, which decides which turns are kept).

``max_requests`` keeps the first N arrivals, for an exact request count: e.g. 200,000 requests
at 100 rps is ``SynthSpec(rate_rps=100, duration_s=2_100, max_requests=200_000)`` (the duration
only has to be long enough). A 2-hour diurnal day with a 4x swing, ISL ~ lognormal 3000 and OSL
~ lognormal 300 (the defaults) is ``SynthSpec(duration_s=7_200, rate_rps=10,
schedule="diurnal", peak_to_trough=4)``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from plansim.errors import InputError, describe_value
from plansim.limits import MAX_REQUEST_TOKENS, MAX_SPAN_S, MAX_SYNTH_REQUESTS, check_count
from plansim.traces.graph import TERMINAL, Edges, RequestGraph, build_graph
from plansim.traces.prefix import prefix_chain_ids
from plansim.traces.request_ids import ordinal_ids
from plansim.traces.workload import Workload

Schedule = Literal["constant", "steps", "diurnal", "sinusoidal"]


@dataclass(frozen=True, slots=True)
class LengthSpec:
    """A token-length distribution; build with ``fixed``, ``normal``, ``lognormal``,
    ``resample``."""

    kind: Literal["fixed", "normal", "lognormal", "resample"]
    mean: float = 0.0
    std: float = 0.0
    values: tuple[int, ...] = ()
    minimum: int = 1
    maximum: int | None = None

    @classmethod
    def fixed(cls, tokens: int) -> LengthSpec:
        return cls("fixed", mean=float(tokens), minimum=0)

    @classmethod
    def normal(
        cls, mean: float, std: float, *, minimum: int = 1, maximum: int | None = None
    ) -> LengthSpec:
        return cls("normal", mean=mean, std=std, minimum=minimum, maximum=maximum)

    @classmethod
    def lognormal(
        cls, mean: float, std: float, *, minimum: int = 1, maximum: int | None = None
    ) -> LengthSpec:
        return cls("lognormal", mean=mean, std=std, minimum=minimum, maximum=maximum)

    @classmethod
    def resample(cls, values: np.ndarray | list[int]) -> LengthSpec:
        vals = tuple(int(v) for v in np.asarray(values).ravel())
        return cls("resample", values=vals, minimum=0)

    def check(self, name: str) -> None:
        if self.kind == "resample":
            if not self.values:
                raise InputError("resample needs at least one value", field=name)
            return
        if not (math.isfinite(self.mean) and 0 <= self.mean <= MAX_REQUEST_TOKENS):
            raise InputError(
                f"mean must be in [0, {MAX_REQUEST_TOKENS:,}] tokens, got "
                f"{describe_value(self.mean)}",
                field=name,
            )
        if self.kind in ("normal", "lognormal") and not (
            math.isfinite(self.std) and 0 <= self.std <= MAX_REQUEST_TOKENS
        ):
            raise InputError(
                f"std must be in [0, {MAX_REQUEST_TOKENS:,}] tokens, got "
                f"{describe_value(self.std)}",
                field=name,
            )
        if self.kind == "lognormal" and self.mean <= 0:
            raise InputError("lognormal mean must be > 0", field=name)
        if self.maximum is not None and self.maximum < self.minimum:
            raise InputError("maximum is below minimum", field=name)

    def draw(self, rng: np.random.Generator, n: int) -> np.ndarray:
        if self.kind == "fixed":
            out = np.full(n, self.mean)
        elif self.kind == "normal":
            out = rng.normal(self.mean, self.std, size=n)
        elif self.kind == "lognormal":
            sigma2 = math.log1p((self.std / self.mean) ** 2)
            out = rng.lognormal(math.log(self.mean) - sigma2 / 2, math.sqrt(sigma2), size=n)
        else:
            out = rng.choice(np.asarray(self.values, dtype=np.float64), size=n, replace=True)
        out = np.rint(out)
        # A heavy tail is cut at the per-request bound (limits.MAX_REQUEST_TOKENS).
        hi = MAX_REQUEST_TOKENS if self.maximum is None else min(self.maximum, MAX_REQUEST_TOKENS)
        return np.clip(out, self.minimum, hi).astype(np.int64)


@dataclass(frozen=True, slots=True)
class SynthSpec:
    """What to generate; every field has a working default (10 rps for 10 minutes)."""

    duration_s: float = 600.0
    rate_rps: float = 10.0
    schedule: Schedule = "constant"
    steps: tuple[tuple[float, float], ...] = ()  # (start_s, rate_rps)
    peak_to_trough: float = 4.0
    period_s: float | None = None
    spikes: tuple[tuple[float, float, float], ...] = ()  # (start_s, duration_s, multiplier)
    arrival: Literal["poisson", "gamma"] = "poisson"
    burstiness: float = 1.0
    isl: LengthSpec = field(default_factory=lambda: LengthSpec.lognormal(3000, 1500))
    osl: LengthSpec = field(default_factory=lambda: LengthSpec.lognormal(300, 150))
    trace_block_size: int = 512
    prefix_groups: int = 0
    shared_prefix_ratio: float = 0.0
    turns_per_session: int = 1
    inter_turn_delay_s: float = 30.0
    closed_loop: bool = False  # later turns follow the previous turn's end (session form)
    max_requests: int | None = None  # keep only the first N arrivals (an exact request count)

    def check(self) -> None:
        def bad(name: str, msg: str) -> InputError:
            return InputError(msg, field=name)

        if not (math.isfinite(self.duration_s) and 0 < self.duration_s <= MAX_SPAN_S):
            raise bad(
                "duration_s",
                f"must be in (0, {MAX_SPAN_S:,.0f}] s (31 days), got "
                f"{describe_value(self.duration_s)}",
            )
        if not (math.isfinite(self.rate_rps) and self.rate_rps >= 0):
            raise bad(
                "rate_rps", f"must be a finite number >= 0, got {describe_value(self.rate_rps)}"
            )
        if self.schedule not in ("constant", "steps", "diurnal", "sinusoidal"):
            raise bad(
                "schedule", f"unknown schedule {self.schedule!r}; use constant, steps, diurnal"
            )
        if self.schedule == "steps" and not self.steps:
            raise bad("steps", "a steps schedule needs at least one (start_s, rate_rps) step")
        for start, rate in self.steps:
            if not (start >= 0 and rate >= 0):
                raise bad("steps", f"step ({start}, {rate}) needs start_s >= 0 and rate_rps >= 0")
        if not (self.peak_to_trough >= 1):
            raise bad("peak_to_trough", f"must be >= 1, got {self.peak_to_trough}")
        if self.period_s is not None and not self.period_s > 0:
            raise bad("period_s", f"must be > 0, got {self.period_s}")
        for start, span, mult in self.spikes:
            if not (start >= 0 and span > 0 and mult >= 0):
                raise bad(
                    "spikes",
                    f"spike ({start}, {span}, {mult}) needs start >= 0, span > 0, multiplier >= 0",
                )
        if self.arrival not in ("poisson", "gamma"):
            raise bad("arrival", f"unknown arrival process {self.arrival!r}; use poisson or gamma")
        if not (math.isfinite(self.burstiness) and self.burstiness > 0):
            raise bad("burstiness", f"must be > 0, got {self.burstiness}")
        if self.trace_block_size <= 0:
            raise bad("trace_block_size", f"must be > 0, got {self.trace_block_size}")
        if not 0 <= self.prefix_groups <= MAX_SYNTH_REQUESTS:
            raise bad(
                "prefix_groups", f"must be in [0, {MAX_SYNTH_REQUESTS:,}], got {self.prefix_groups}"
            )
        if not 0 <= self.shared_prefix_ratio <= 1:
            raise bad("shared_prefix_ratio", f"must be in [0, 1], got {self.shared_prefix_ratio}")
        if self.turns_per_session < 1:
            raise bad("turns_per_session", f"must be >= 1, got {self.turns_per_session}")
        if not (math.isfinite(self.inter_turn_delay_s) and self.inter_turn_delay_s >= 0):
            raise bad(
                "inter_turn_delay_s",
                f"must be a finite number >= 0, got {describe_value(self.inter_turn_delay_s)}",
            )
        if self.max_requests is not None and self.max_requests < 0:
            raise bad("max_requests", f"must be >= 0, got {self.max_requests}")
        self.isl.check("isl")
        self.osl.check("osl")

    def rate_at(self, t_s: np.ndarray) -> np.ndarray:
        """The scheduled request rate (requests/s) at times ``t_s``."""
        t = np.asarray(t_s, dtype=np.float64)
        rate = np.full(t.shape, float(self.rate_rps))
        if self.schedule == "steps":
            for start, step_rate in sorted(self.steps):
                rate = np.where(t >= start, step_rate, rate)
        elif self.schedule in ("diurnal", "sinusoidal"):
            period = self.period_s or self.duration_s
            amp = (self.peak_to_trough - 1) / (self.peak_to_trough + 1)
            rate = self.rate_rps * (1 - amp * np.cos(2 * np.pi * t / period))
        for start, span, mult in self.spikes:
            rate = np.where((t >= start) & (t < start + span), rate * mult, rate)
        return rate


def synthesize(spec: SynthSpec, seed: int = 0) -> Workload:
    """Generate the workload ``spec`` describes; deterministic in ``(spec, seed)``."""
    spec.check()
    rng = np.random.default_rng(seed)
    turns = spec.turns_per_session
    starts_s = _arrivals(spec, rng, scale=1.0 / turns)
    n_sessions = starts_s.size
    bs = spec.trace_block_size
    if turns == 1:
        arrival_s = starts_s
        isl = spec.isl.draw(rng, n_sessions)
        osl = spec.osl.draw(rng, n_sessions)
        counts = -(-isl // bs)
        raw = _fresh_hashes(counts)
        session = np.arange(n_sessions)
    else:
        arrival_s, isl, osl, counts, raw, session = _sessions(spec, rng, starts_s)
    if spec.prefix_groups > 0 and spec.shared_prefix_ratio > 0:
        _share_group_prefixes(spec, rng, isl, counts, raw, session)
    order = np.argsort(arrival_s, kind="stable")[: spec.max_requests]
    offsets = np.zeros(counts.size + 1, dtype=np.int64)
    np.cumsum(counts, out=offsets[1:])
    sorted_counts = counts[order]
    within = np.arange(int(sorted_counts.sum()), dtype=np.int64) - np.repeat(
        np.cumsum(sorted_counts) - sorted_counts, sorted_counts
    )
    raw_sorted = raw[np.repeat(offsets[:-1][order], sorted_counts) + within]
    new_offsets = np.zeros(order.size + 1, dtype=np.int64)
    np.cumsum(sorted_counts, out=new_offsets[1:])
    n = order.size
    graph = None
    if spec.closed_loop and turns > 1:
        graph = session_graph(
            session[order], arrival_s[order] * 1000.0, spec.inter_turn_delay_s * 1000.0
        )
    return Workload(
        graph=graph,
        arrival_ms=arrival_s[order] * 1000.0,
        isl_tokens=isl[order],
        osl_tokens=osl[order],
        request_id=ordinal_ids(0, n),
        hash_offsets=new_offsets,
        hash_ids=prefix_chain_ids(raw_sorted.astype(np.uint64), sorted_counts),
        trace_block_size=bs,
        sources=(f"synth:seed={seed}",),
    )


def session_graph(session: np.ndarray, arrival_ms: np.ndarray, delay_ms: float) -> RequestGraph:
    """Mooncake-session graph of rows in arrival order: each turn follows the previous turn of
    its session (``session``: ordinal per row) ``delay_ms`` after it finishes."""
    n = session.size
    codes, first_seen = np.unique(session, return_index=True)
    rank = np.empty(codes.size, dtype=np.int64)
    rank[np.argsort(first_seen, kind="stable")] = np.arange(codes.size)
    ordinal = rank[np.searchsorted(codes, session)]
    rows = np.argsort(ordinal, kind="stable")
    later = np.flatnonzero(np.r_[False, ordinal[rows[1:]] == ordinal[rows[:-1]]])
    target, source = rows[later], rows[later - 1]
    not_before = arrival_ms.astype(np.float64).copy()
    not_before[target] = np.nan
    edges = Edges(
        target,
        source,
        np.full(target.size, float(delay_ms)),
        np.full(target.size, TERMINAL, dtype=np.int8),
    )
    ids = np.array([f"s{k}" for k in range(codes.size)], dtype=object)
    return build_graph(
        n,
        not_before,
        edges,
        ordinal,
        ids,
        request_id=np.arange(n),
        locate=lambda row: ("synth", row + 1),
    )


def _arrivals(spec: SynthSpec, rng: np.random.Generator, scale: float) -> np.ndarray:
    """Arrival times (s) in ``[0, duration)`` for rate ``scale * r(t)``, by time rescaling."""
    grid_n = int(min(max(spec.duration_s * 20, 2000), 2_000_000))
    grid = np.linspace(0.0, spec.duration_s, grid_n + 1)
    mid = (grid[:-1] + grid[1:]) / 2
    rate = np.maximum(spec.rate_at(mid), 0.0) * scale
    with np.errstate(over="ignore", invalid="ignore"):
        cum = np.concatenate(([0.0], np.cumsum(rate * np.diff(grid))))
    total = cum[-1]
    check_count(
        total / scale,
        MAX_SYNTH_REQUESTS,
        what="the expected number of requests (the rate schedule over the duration)",
        field="rate_rps",
        hint="lower the rate or the duration",
    )
    if total <= 0:
        return np.zeros(0)
    # Draw unit-mean gaps until past the total operational time, in blocks.
    expected = int(total * 1.1) + 64
    if spec.arrival == "gamma":
        shape = 1.0 / spec.burstiness
        draw = lambda k: rng.gamma(shape, 1.0 / shape, size=k)  # noqa: E731
    else:
        draw = lambda k: rng.exponential(1.0, size=k)  # noqa: E731
    points = np.cumsum(draw(expected))
    while points[-1] < total:
        points = np.concatenate((points, points[-1] + np.cumsum(draw(expected))))
    points = points[points < total]
    # Invert Lambda (piecewise linear; flat stretches of zero rate are skipped by interp).
    return np.interp(points, cum, grid)


def _fresh_hashes(counts: np.ndarray) -> np.ndarray:
    return np.arange(int(counts.sum()), dtype=np.int64)


def _sessions(spec: SynthSpec, rng: np.random.Generator, starts_s: np.ndarray):
    turns = spec.turns_per_session
    arrival, isl_l, osl_l, counts_l, session_l = [], [], [], [], []
    hashes: list[np.ndarray] = []
    next_id = 0
    bs = spec.trace_block_size
    new_input = spec.isl.draw(rng, starts_s.size * turns).reshape(-1, turns)
    outputs = spec.osl.draw(rng, starts_s.size * turns).reshape(-1, turns)
    for s, t0 in enumerate(starts_s.tolist()):
        prev_ids = np.zeros(0, dtype=np.int64)
        prev_isl = prev_osl = 0
        for k in range(turns):
            t = t0 + k * spec.inter_turn_delay_s
            if t >= spec.duration_s:
                break
            isl = prev_isl + prev_osl + int(new_input[s, k])
            n_blocks = -(-isl // bs)
            keep = min(prev_isl // bs, n_blocks)  # complete blocks of the previous prompt
            fresh = np.arange(next_id, next_id + n_blocks - keep, dtype=np.int64)
            next_id += fresh.size
            ids = np.concatenate((prev_ids[:keep], fresh))
            arrival.append(t)
            isl_l.append(isl)
            osl_l.append(int(outputs[s, k]))
            counts_l.append(n_blocks)
            session_l.append(s)
            hashes.append(ids)
            prev_ids, prev_isl, prev_osl = ids, isl, int(outputs[s, k])
    raw = np.concatenate(hashes) if hashes else np.zeros(0, dtype=np.int64)
    return (
        np.asarray(arrival, dtype=np.float64),
        np.asarray(isl_l, dtype=np.int64),
        np.asarray(osl_l, dtype=np.int64),
        np.asarray(counts_l, dtype=np.int64),
        raw,
        np.asarray(session_l, dtype=np.int64),
    )


def _share_group_prefixes(
    spec: SynthSpec,
    rng: np.random.Generator,
    isl: np.ndarray,
    counts: np.ndarray,
    raw: np.ndarray,
    session: np.ndarray,
) -> None:
    """Overwrite the leading blocks of each request with its group's prefix ids (in place).

    Group prefix ids are negative (-(group * max_blocks + t) - 1), disjoint from the
    non-negative fresh ids; ``prefix_chain_ids`` compacts them afterwards. A session keeps one
    group for all its turns.
    """
    bs = spec.trace_block_size
    n_sessions = int(session.max()) + 1 if session.size else 0
    group = rng.integers(0, spec.prefix_groups, size=n_sessions)[session]
    # The shared part is sized on the session's first prompt, so later turns (which repeat it)
    # share exactly the same group blocks.
    first_row = np.zeros(n_sessions, dtype=np.int64)
    first_row[session[::-1]] = np.arange(session.size)[::-1]
    base_isl = isl[first_row][session]
    shared = np.minimum(np.floor(spec.shared_prefix_ratio * base_isl / bs).astype(np.int64), counts)
    max_blocks = int(counts.max()) if counts.size else 0
    starts = np.zeros(counts.size, dtype=np.int64)
    np.cumsum(counts[:-1], out=starts[1:])
    within = np.arange(int(shared.sum()), dtype=np.int64) - np.repeat(
        np.cumsum(shared) - shared, shared
    )
    pos = np.repeat(starts, shared) + within
    raw[pos] = -(np.repeat(group, shared) * max_blocks + within) - 1
