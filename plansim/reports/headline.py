"""Headline cards: the figures a run answers, computed from its tables.

``replay_cards`` (replay and planner reports): goodput with the SLA it was scored against,
GPU-hours, p90 TTFT and p90 per-request ITL against their bounds, peak and mean workers, and
the requests that did not complete when there are any (first, with the reason, when every
request was rejected). ``scaling_cards`` adds the planner's
scaling events and, when a reference figure is known (a static deployment or the hindsight
lower bound), the GPU-hour gap to it.

A card says ``n/a`` for a figure with no samples, never a made-up zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd

from plansim.reports.format import NO_SAMPLES, duration, number, percent
from plansim.reports.page import Card
from plansim.reports.tables import finite_number, first_bounds, floats, has
from plansim.roles import POOL_COUNT_FIELDS, Mode, Role
from plansim.schema import all_rejected_text, sla_text

_PROVISIONED = ("ready", "starting", "draining")


def goodput_sla(inputs: Mapping[str, Any] | None) -> dict[str, float]:
    """The SLA the replay scored goodput against: the run's ``sla`` block, else its
    deployment's (never the planner's targets, which size the deployment but score nothing)."""
    inputs = inputs or {}
    deployment = inputs.get("deployment")
    return first_bounds(
        [inputs.get("sla"), deployment.get("sla") if isinstance(deployment, Mapping) else None]
    )


def all_rejected(requests: pd.DataFrame | None, inputs: Mapping[str, Any] | None) -> str | None:
    """Why the replay did nothing, when every request in ``requests`` was rejected
    (``schema.all_rejected_text``, the sentence the command warned with); None otherwise, or
    when the tables do not say."""
    deployment = (inputs or {}).get("deployment")
    if not has(requests, "status", "reason", "input_length") or not isinstance(deployment,
                                                                                Mapping):
        return None
    if not (requests["status"].astype(str) == "rejected").all():
        return None
    reason = str(requests["reason"].astype(str).value_counts().index[0])
    return all_rejected_text(len(requests), reason, int(requests["input_length"].min()),
                             dict(deployment))


def replay_cards(
    summary: Mapping[str, Any],
    sla: Mapping[str, float],
    timeseries: pd.DataFrame | None = None,
    rejected: str | None = None,
) -> list[Card]:
    """The replay's headline: goodput, GPU-hours, p90 TTFT, p90 ITL, peak and mean workers, and
    rejected/incomplete requests when any. ``sla`` is the goodput SLA (``goodput_sla``). ITL is
    each request's mean token gap (TPOT), the quantity the SLA's ITL bound checks.
    ``rejected``: why every request was rejected (``all_rejected``), said first when given."""
    if not summary:
        return [Card("summary", "Summary", NO_SAMPLES, "summary.json is absent or empty")]
    n = int(finite_number(summary.get("num_requests")) or 0)
    done = int(finite_number(summary.get("completed_requests")) or 0)
    cards = [Card("all_rejected", "All rejected", f"{n:,}", rejected, "bad")] if rejected else []
    cards += [_goodput(summary, sla, n), _gpu_hours(summary)]
    cards.append(_latency(summary, sla, "ttft", "ttft_ms", "p90 TTFT", done))
    cards.append(_latency(summary, sla, "tpot", "itl_ms", "p90 ITL (per request)", done))
    cards += _workers(summary, timeseries)
    if done < n and not rejected:
        cards.append(
            Card(
                "not_completed",
                "Not completed",
                f"{n - done:,}",
                f"of {n:,} requests were rejected or still running at the end",
                "bad",
            )
        )
    return cards


def _goodput(summary: Mapping[str, Any], sla: Mapping[str, float], n: int) -> Card:
    good = finite_number(summary.get("goodput_completed_requests"))
    if good is None:
        return Card("goodput", "Goodput", "not scored", "no SLA set (sla.ttft_ms, sla.itl_ms or "
                    "sla.e2e_ms in the deployment)")
    text = sla_text(dict(sla)) or "the run's SLA (not recorded in inputs.json)"
    share = percent(good / n) if n else NO_SAMPLES
    return Card("goodput", "Goodput", share, f"{int(good):,} of {n:,} requests met {text}")


def _gpu_hours(summary: Mapping[str, Any]) -> Card:
    hours = finite_number(summary.get("gpu_hours"))
    if hours is None:
        return Card("gpu_hours", "GPU-hours", NO_SAMPLES, "summary.json has no gpu_hours")
    duration_ms = finite_number(summary.get("duration_ms")) or 0.0
    rate = ""
    if duration_ms > 0:
        rate = f"{number(hours / (duration_ms / 3.6e6), 2)} GPUs on average over "
    return Card("gpu_hours", "GPU-hours", number(hours), f"{rate}{duration(duration_ms / 1000)}")


def _latency(
    summary: Mapping[str, Any],
    sla: Mapping[str, float],
    stat: str,
    bound_key: str,
    label: str,
    done: int,
) -> Card:
    name = f"p90_{bound_key.removesuffix('_ms')}"
    value = finite_number(summary.get(f"p90_{stat}_ms"))
    if value is None or done == 0:
        return Card(name, label, NO_SAMPLES, "no completed request to measure")
    bound = sla.get(bound_key)
    spread = (
        f"p50 {number(summary.get(f'median_{stat}_ms', np.nan))}, "
        f"p99 {number(summary.get(f'p99_{stat}_ms', np.nan))} ms"
    )
    if bound is None:
        return Card(name, label, f"{number(value)} ms", f"no SLA bound; {spread}")
    within = value <= bound
    side = "within" if within else "above"
    return Card(
        name, label, f"{number(value)} ms", f"{side} the {bound:g} ms bound; {spread}",
        "good" if within else "bad",
    )


def _workers(summary: Mapping[str, Any], timeseries: pd.DataFrame | None) -> list[Card]:
    """Peak and time-weighted mean of provisioned workers (ready + starting + draining, the
    workers GPU-hours count), per pool when there are several."""
    present = [c for c in _PROVISIONED if has(timeseries, "time_s", "pool", c)]
    if not present:
        seconds = sum(
            finite_number(summary.get(k)) or 0.0
            for k in ("prefill_worker_seconds", "decode_worker_seconds")
        )
        duration_s = (finite_number(summary.get("duration_ms")) or 0.0) / 1000.0
        mean = number(seconds / duration_s) if duration_s > 0 else NO_SAMPLES
        return [Card("mean_workers", "Mean workers", mean, "worker-seconds over the run")]
    frame = timeseries.assign(
        _n=sum(np.nan_to_num(floats(timeseries, c)) for c in present),
        _pool=timeseries["pool"].astype(str),
    )
    per_time = frame.groupby("time_s", sort=True)["_n"].sum()
    per_pool = frame.pivot_table(index="time_s", columns="_pool", values="_n", aggfunc="sum")
    order = tuple(Role)
    pools = sorted(per_pool.columns, key=lambda p: (order.index(p) if p in order else 9, p))
    weights = _durations(per_time.index.to_numpy(dtype=np.float64))
    peak = int(per_time.max())
    mean = float(np.average(per_time.to_numpy(), weights=weights)) if weights.sum() else np.nan
    if len(pools) > 1:
        peak_detail = ", ".join(f"{p} {int(per_pool[p].max())}" for p in pools)
        mean_detail = ", ".join(
            f"{p} {number(float(np.average(per_pool[p].fillna(0), weights=weights)), 2)}"
            for p in pools
        )
    else:
        peak_detail = mean_detail = f"{pools[0]} pool" if pools else ""
    return [
        Card("peak_workers", "Peak workers", f"{peak:,}", peak_detail),
        Card("mean_workers", "Mean workers", number(mean, 2), f"time-weighted; {mean_detail}"),
    ]


def _durations(t: np.ndarray) -> np.ndarray:
    """How long each sample of a time series holds (until the next one; the last holds as long
    as the median step)."""
    if len(t) < 2:
        return np.ones(len(t))
    steps = np.diff(t)
    return np.append(steps, np.median(steps))


def static_reference(
    inputs: Mapping[str, Any] | None, summary: Mapping[str, Any] | None
) -> dict[str, float]:
    """The GPU-hours of the deployment's starting worker counts held for the whole run (the
    static deployment the planner scales from), keyed by its label; {} when the inputs do not
    say the counts or the summary the GPUs per worker."""
    deployment = (inputs or {}).get("deployment")
    summary = summary or {}
    duration_ms = finite_number(summary.get("duration_ms"))
    if not isinstance(deployment, Mapping) or not duration_ms:
        return {}
    # Per pool, its worker count and the planner role its GPUs are reported under (an
    # aggregated replay reports its GPUs as decode).
    pools = [(POOL_COUNT_FIELDS[pool], pool.planner_role)
             for pool in Mode(deployment.get("mode", Mode.AGG)).pools]
    counts = [(finite_number(deployment.get(k)), finite_number(summary.get(f"{p}_gpus_per_worker")))
              for k, p in pools]
    if any(c is None or g is None for c, g in counts):
        return {}
    gpus = sum(c * g for c, g in counts)
    label = "+".join(f"{int(c)}" for c, _ in counts)
    return {f"static {label} workers": gpus * duration_ms / 3.6e6}


def scaling_cards(
    events: Sequence[Mapping[str, Any]],
    summary: Mapping[str, Any] | None = None,
    references: Mapping[str, float] | None = None,
) -> list[Card]:
    """The planner's scaling events (applied, up and down; advisory ones apart) and, per known
    reference GPU-hours figure (``{"static 4 workers": 0.67}``, ``static_reference``), the
    planner run's GPU-hour gap to it."""
    applied = [e for e in events if bool(e.get("applied", True))]
    advisory = len(events) - len(applied)
    up = sum(
        1 for e in applied
        if (finite_number(e.get("to_count")) or 0) > (finite_number(e.get("from_count")) or 0)
    )
    detail = f"{up} up, {len(applied) - up} down"
    if advisory:
        detail += f"; {advisory} advisory (not applied)"
    cards = [Card("scaling_events", "Scaling events", f"{len(applied):,}", detail)]
    hours = finite_number((summary or {}).get("gpu_hours"))
    for label, reference in (references or {}).items():
        if hours is None or not reference or reference <= 0:
            continue
        gap = hours / reference - 1.0
        cards.append(
            Card(
                "gpu_hours_gap",
                f"GPU-hours vs {label}",
                f"{gap * 100:+.1f}%",
                f"{number(hours)} against {number(reference)} GPU-hours (cost only: the "
                "reference's goodput is not replayed here)",
            )
        )
    return cards
