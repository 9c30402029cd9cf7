"""What the retune commands print: numbers, the score legend and scoring SLA, one line per
decided window, and a window's ranked candidates."""

from __future__ import annotations

import math
from typing import Any


def format_number(value: float | None, fmt: str = "{:.4g}") -> str:
    """``value`` in ``fmt``, or "-" when it is missing or not finite."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return fmt.format(value)


def score_legend(retune: Any) -> str:
    """What a retune score is (``retune``: the run's ``RetuneSetup``): the objective, its unit,
    which way is better and, for the Goodput objectives, the SLA a token must meet to count."""
    from plansim.retune import scoring
    from plansim.schema import objective_unit, sla_text

    cfg = retune.config
    text = (
        f"scores: {cfg.objective} in {objective_unit(cfg.objective)} "
        f"({'higher' if cfg.maximize else 'lower'} is better)"
    )
    if cfg.objective in scoring.GOODPUT:
        text += f"; goodput counts requests that met {sla_text(scoring_sla(retune))}"
    return text


def scoring_sla(retune: Any) -> dict[str, Any]:
    """The SLA retune scores goodput against: ``retune.sla``, else the planner's targets."""
    return retune.sla.model_dump()


def window_line(event: dict[str, Any]) -> str:
    """One line per window: index, bounds, outcome, current and best score, improvement and
    what changed (or would change, in advisory mode)."""
    from plansim.retune.record import what_changed

    pct = event.get("improvement_percentage")
    outcome = event["outcome"]
    if event.get("reason"):
        outcome = f"{outcome} ({event['reason']})"
    bounds = f"[{event['window_start_s']:g}, {event['window_end_s']:g}) s"
    return (
        f"window {event['window']:>3}  {bounds:<16}  {outcome:<16}"
        f"  current {format_number(event.get('current_score')):>9}"
        f"  best {format_number(event.get('best_score')):>9}"
        f"  {format_number(pct, '{:+.1f}%'):>7}  {what_changed(event)}"
    )


def ranked_table(report: Any, cfg: Any, index: int) -> list[str]:
    """The window's candidates, best first (failed ones last), with the decision below (the
    scores' unit is ``score_legend``'s, printed once above the tables)."""
    from plansim.retune_runs.batch import candidate_order

    maximize = cfg.maximize
    lines = [
        f"window {index}: {report.window_requests} requests, {report.replays} replays, "
        f"sweep {report.wall_s:.1f} s"
    ]
    if report.presweep is not None:
        for i, (cand, loss, err) in enumerate(
            zip(report.presweep.candidates, report.presweep.losses, report.presweep.errors)
        ):
            mark = "*" if i == report.presweep.winner else " "
            lines.append(
                f"  presweep {mark} {cand['load_predictor']:<10} loss "
                f"{format_number(loss)} {err or ''}".rstrip()
            )
    lines.append(f"{'rank':>4}  {'score':>10}  {'status':<8}  candidate")
    for rank, i in enumerate(candidate_order(report, maximize), start=1):
        cand = report.candidates[i]
        tag = " (current)" if cand.is_current else ""
        error = f"  {cand.error}" if cand.error else ""
        lines.append(
            f"{rank:>4}  {format_number(cand.score):>10}  {cand.status:<8}  "
            f"{cand.point.label()}{tag}{error}"
        )
    verdict = (
        report.outcome if report.outcome != "apply" else ("advisory" if cfg.advisory else "apply")
    )
    reason = f" ({report.reason})" if report.reason else ""
    lines.append(
        f"decision: {verdict}{reason}; current {format_number(report.current_score)}, best "
        f"{format_number(report.best_score)}, improvement "
        f"{format_number(report.improvement_percentage, '{:+.1f}%')} "
        f"(threshold {cfg.min_improvement_percentage:g}%)"
    )
    return lines
