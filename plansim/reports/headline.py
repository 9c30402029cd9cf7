"""Headline cards: the figures a run answers, computed from its tables.

``replay_cards`` (replay and planner reports): goodput with the SLA it was scored against,
GPU-hours, p90 TTFT and p90 TPOT (each request's mean token gap, what the SLA's TPOT bound
checks; the card gives the p90 of every token gap, ITL, beside it) against their bounds, peak
and mean workers, and the requests that did not complete when there are any (first, with the
reason, when every request was rejected).
``scaling_cards`` adds the planner's scaling events, ``saving_card`` the GPU-hour gap to a
replayed reference (the starting counts held static) with both runs' goodput, so that a saving
is never shown without what it cost, and ``before_after_cards`` a run's goodput and GPU-hours
against such a reference (a retune run against the same replay without retune).

A card says ``n/a`` for a figure with no samples, never a made-up zero.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from plansim.reports.format import NO_SAMPLES, duration, number, percent
from plansim.reports.page import Card
from plansim.reports.tables import finite_number, first_bounds, floats, has
from plansim.roles import Role
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
    if not has(requests, "status", "reason", "input_length") or not isinstance(deployment, Mapping):
        return None
    if not (requests["status"].astype(str) == "rejected").all():
        return None
    reason = str(requests["reason"].astype(str).value_counts().index[0])
    return all_rejected_text(
        len(requests), reason, int(requests["input_length"].min()), dict(deployment)
    )


def replay_cards(
    summary: Mapping[str, Any],
    sla: Mapping[str, float],
    timeseries: pd.DataFrame | None = None,
    rejected: str | None = None,
) -> list[Card]:
    """The replay's headline: goodput, GPU-hours, p90 TTFT, p90 TPOT, peak and mean workers, and
    rejected/incomplete requests when any. ``sla`` is the goodput SLA (``goodput_sla``).
    ``rejected``: why every request was rejected (``all_rejected``), said first when given."""
    if not summary:
        return [Card("summary", "Summary", NO_SAMPLES, "summary.json is absent or empty")]
    n = int(finite_number(summary.get("num_requests")) or 0)
    done = int(finite_number(summary.get("completed_requests")) or 0)
    cards = [Card("all_rejected", "All rejected", f"{n:,}", rejected, "bad")] if rejected else []
    cards += [_goodput(summary, sla, n), _gpu_hours(summary)]
    cards.append(_latency(summary, sla, "ttft", "ttft_ms", "p90 TTFT", done))
    cards.append(_latency(summary, sla, "tpot", "tpot_ms", "p90 TPOT", done))
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
        return Card(
            "goodput",
            "Goodput",
            "not scored",
            "no SLA set (sla.ttft_ms, sla.tpot_ms or sla.e2e_ms in the deployment)",
        )
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
    if stat == "tpot" and finite_number(summary.get("p90_itl_ms")) is not None:
        spread += f"; ITL (every token gap) p90 {number(summary['p90_itl_ms'])} ms"
    if bound is None:
        return Card(name, label, f"{number(value)} ms", f"no SLA bound; {spread}")
    within = value <= bound
    side = "within" if within else "above"
    return Card(
        name,
        label,
        f"{number(value)} ms",
        f"{side} the {bound:g} ms bound; {spread}",
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


@dataclass(frozen=True, slots=True)
class Reference:
    """A deployment a planner run is compared with (the starting counts held static, replayed
    beside the planner run): its label, GPU-hours and goodput (good requests over all
    requests)."""

    label: str
    gpu_hours: float
    goodput: float


def baseline_reference(baseline: Mapping[str, Any] | None) -> Reference | None:
    """The ``Reference`` of a folder's ``baseline.json`` (its label and replay summary); None
    without one, or when the baseline's goodput was not scored."""
    if not isinstance(baseline, Mapping) or not isinstance(baseline.get("summary"), Mapping):
        return None
    summary = baseline["summary"]
    hours = finite_number(summary.get("gpu_hours"))
    share = _goodput_share(summary)
    if hours is None or share is None:
        return None
    return Reference(str(baseline.get("label", "static")), hours, share)


def _goodput_share(summary: Mapping[str, Any]) -> float | None:
    good = finite_number(summary.get("goodput_completed_requests"))
    n = finite_number(summary.get("num_requests"))
    return good / n if good is not None and n else None


def saving_card(summary: Mapping[str, Any] | None, reference: Reference | None) -> Card | None:
    """The planner run's GPU-hours against ``reference``, always with both goodputs: a saving
    bought with goodput says so. None when either goodput or GPU-hours is unknown, so that no
    saving is ever shown alone."""
    summary = summary or {}
    hours = finite_number(summary.get("gpu_hours"))
    share = _goodput_share(summary)
    if reference is None or hours is None or share is None or reference.gpu_hours <= 0:
        return None
    gap = hours / reference.gpu_hours - 1.0
    points = (share - reference.goodput) * 100.0
    if points < -0.05:
        tone, verdict = "bad", f"goodput {abs(points):.1f} points lower"
    elif gap <= 0:
        tone, verdict = "good", "at no loss of goodput"
    else:
        tone, verdict = "neutral", "for no loss of goodput"
    return Card(
        "gpu_hours_gap",
        f"GPU-hours vs {reference.label}",
        f"{gap * 100:+.1f}%",
        f"{verdict}: goodput {percent(share)} against {percent(reference.goodput)}; "
        f"{number(hours)} against {number(reference.gpu_hours)} GPU-hours",
        tone,
    )


def before_after_cards(
    summary: Mapping[str, Any] | None, reference: Reference | None
) -> list[Card]:
    """Goodput and GPU-hours of ``reference`` (before) and of the run (after), one card each;
    none unless both goodputs are known."""
    summary = summary or {}
    share, hours = _goodput_share(summary), finite_number(summary.get("gpu_hours"))
    if reference is None or share is None or hours is None:
        return []
    points = (share - reference.goodput) * 100.0
    cost = hours / reference.gpu_hours - 1.0 if reference.gpu_hours > 0 else float("nan")
    return [
        Card(
            "goodput_change",
            "Goodput before → after",
            f"{percent(reference.goodput)} → {percent(share)}",
            f"{points:+.1f} points: {reference.label}, then as run",
            "good" if points >= 0 else "bad",
        ),
        Card(
            "gpu_hours_change",
            "GPU-hours before → after",
            f"{number(reference.gpu_hours)} → {number(hours)}",
            f"{cost * 100:+.1f}%: {reference.label}, then as run",
            "good" if cost <= 0 and points >= 0 else "neutral",
        ),
    ]


def scaling_cards(events: Sequence[Mapping[str, Any]]) -> list[Card]:
    """The planner's scaling events (applied, up and down; advisory ones apart)."""
    applied = [e for e in events if bool(e.get("applied", True))]
    advisory = len(events) - len(applied)
    up = sum(
        1
        for e in applied
        if (finite_number(e.get("to_count")) or 0) > (finite_number(e.get("from_count")) or 0)
    )
    detail = f"{up} up, {len(applied) - up} down"
    if advisory:
        detail += f"; {advisory} advisory (not applied)"
    return [Card("scaling_events", "Scaling events", f"{len(applied):,}", detail)]
