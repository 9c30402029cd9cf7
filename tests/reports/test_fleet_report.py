"""The fleet report: its headline (fits or what binds), the cost breakdown by model and GPU
type, goodput against each target, the fronts and the autoscaled GPUs, from a hand-written
``fleet.json``; and ``plansim report`` re-rendering a fleet folder."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from reports_figures import chart_names, figures, trace, values

from plansim.reports import render_dir, render_fleet


def _point(system: str, workers: int, price: float, ratio: float, tier: str = "on_demand"):
    return {
        "deployment": {"engine.timing_model.system": system},
        "variant": f"engine.timing_model.system={system}",
        "mode": "agg",
        "num_workers": workers,
        "tier": tier,
        "gpus": {system: workers},
        "cost_per_hour": workers * price,
        "cost": workers * price,
        "gpu_hours": float(workers),
        "goodput_ratio": ratio,
        "good_requests": int(ratio * 100),
        "requests": 100,
        "meets_target": ratio >= 0.9,
        "preemptions": 0,
    }


# chat is cheapest on 3 H100s ($6.60) but the 4 H100s go to code; chat runs on 2 H200s ($7).
CHAT_H100, CHAT_H200 = _point("h100_sxm", 3, 2.2, 0.95), _point("h200_sxm", 2, 3.5, 0.97)
CODE_H100 = _point("h100_sxm", 4, 2.2, 0.93)
REPORT = {
    "feasible": True,
    "objective": {"name": "cost_per_hour", "then": "cost over the traces", "unit": "per hour"},
    "solver": {
        "name": "scipy.optimize.milp (HiGHS branch and bound, mip_rel_gap 0)",
        "status": "optimal",
        "proved_optimal": True,
        "mip_gap": 0.0,
        "nodes": 0,
        "variables": 4,
        "constraints": 2,
    },
    "inventory": {
        "h200_sxm": {
            "count": 8,
            "price_per_gpu_hour": 3.5,
            "spot": None,
            "used": 2,
            "used_spot": 0,
        },
        "h100_sxm": {
            "count": 4,
            "price_per_gpu_hour": 2.2,
            "spot": None,
            "used": 4,
            "used_spot": 0,
        },
    },
    "budget_per_hour": 20.0,
    "cost_per_hour": 15.8,
    "cost": 15.8,
    "gpu_hours": 6.0,
    "independent": {"cost_per_hour": 15.4, "fits": False, "over": {"inventory.h100_sxm": 3}},
    "bindings": [],
    "breakdown": [
        {
            "model": "chat",
            "system": "h200_sxm",
            "tier": "on_demand",
            "gpus": 2,
            "cost_per_hour": 7.0,
        },
        {
            "model": "code",
            "system": "h100_sxm",
            "tier": "on_demand",
            "gpus": 4,
            "cost_per_hour": 8.8,
        },
    ],
    "models": [
        {
            "name": "chat",
            "target": 0.9,
            "requests": 100,
            "traces": [],
            "deployment_file": "",
            "choice": {**CHAT_H200, "moved": True, "extra_cost_per_hour": 0.4},
            "cheapest_alone": CHAT_H100,
            "front": [CHAT_H100, CHAT_H200],
            "variants": [],
        },
        {
            "name": "code",
            "target": 0.9,
            "requests": 100,
            "traces": [],
            "deployment_file": "",
            "choice": {**CODE_H100, "moved": False, "extra_cost_per_hour": 0.0},
            "cheapest_alone": CODE_H100,
            "front": [CODE_H100],
            "variants": [],
        },
    ],
    "autoscaled": {
        "gpu_hours": 6.5,
        "cost": 16.0,
        "refused_scale_ups": 1,
        "sla_cost_good_requests": 3,
        "models": [
            {
                "name": "chat",
                "planner": True,
                "requests": 100,
                "good_requests": 94,
                "goodput_ratio": 0.94,
                "meets_target": True,
                "gpu_hours": 2.5,
                "cost": 8.75,
                "scaling_events": 2,
                "refused_scale_ups": 1,
                "refusals": [
                    {
                        "at_s": 60.0,
                        "pool": "agg",
                        "wanted": 3,
                        "granted": 2,
                        "reason": "inventory.h200_sxm",
                    }
                ],
                "preemptions": 0,
                "migrated_requests": 0,
                "gpus": [[0.0, 2.0], [60.0, 2.0], [120.0, 2.0]],
                "alone": {
                    "requests": 100,
                    "good_requests": 97,
                    "goodput_ratio": 0.97,
                    "meets_target": True,
                    "gpu_hours": 3.0,
                    "cost": 10.5,
                    "scaling_events": 2,
                },
                "sla_cost": {"good_requests": 3, "goodput_ratio": 0.03},
            },
            {
                "name": "code",
                "planner": False,
                "requests": 100,
                "good_requests": 93,
                "goodput_ratio": 0.93,
                "meets_target": True,
                "gpu_hours": 4.0,
                "cost": 8.8,
                "scaling_events": 0,
                "refused_scale_ups": 0,
                "refusals": [],
                "preemptions": 0,
                "migrated_requests": 0,
                "gpus": [[0.0, 4.0], [60.0, 4.0], [120.0, 4.0]],
            },
        ],
    },
    "replays": {"static": 9, "fleet": 1, "alone": 1, "total": 11, "rounds": 5},
    "notes": [],
}


def _lede(html: str) -> str:
    return html.split('<p class="lede">', 1)[1].split("</p>", 1)[0]


def test_the_headline_says_the_fleet_fits_and_which_model_moved():
    html = render_fleet(REPORT)
    assert _lede(html) == (
        "The cheapest fleet of 2 models costs 15.8 per hour and meets every "
        "target. The inventory moves chat off its cheapest answer on its own."
    )
    fleet_card = html.split('data-card="fleet"', 1)[1]
    assert fleet_card.split('<div class="value">', 1)[1].startswith("fits")
    assert "optimal" in html.split('data-card="solver"', 1)[1].split("</div></div>", 1)[0]


def test_a_fleet_that_does_not_fit_names_what_binds():
    report = copy.deepcopy(REPORT)
    sentence = (
        "budget_per_hour: the closest fleet costs 15.800 per hour, over the 10 budget; "
        "code binds it"
    )
    report.update(
        feasible=False,
        budget_per_hour=10.0,
        bindings=[
            {
                "constraint": "budget_per_hour",
                "model": "code",
                "needs": 15.8,
                "has": 10.0,
                "sentence": sentence,
            }
        ],
        autoscaled=None,
    )
    html = render_fleet(report)
    assert sentence in _lede(html)
    card = html.split('data-card="fleet"', 1)[1]
    assert card.split('<div class="value long">', 1)[1].startswith("does not fit")
    assert "What binds" in html


def test_the_charts_hold_the_breakdown_the_targets_the_fronts_and_the_autoscaled_gpus():
    html = render_fleet(REPORT)
    assert chart_names(html) == ["fleet_breakdown", "fleet_goodput", "fleet_fronts", "fleet_gpus"]
    figs = figures(html)
    breakdown = figs["fleet_breakdown"]
    assert list(values(trace(breakdown, "h200_sxm")["y"])) == [7.0]
    assert list(values(trace(breakdown, "h100_sxm")["y"])) == [8.8]
    goodput = figs["fleet_goodput"]
    assert list(values(trace(goodput, "target")["y"])) == [0.9, 0.9]
    assert list(values(trace(goodput, "autoscaled fleet")["y"])) == [0.94, 0.93]
    fronts = figs["fleet_fronts"]
    choices = [t for t in fronts["data"] if t.get("name") == "fleet's choice"]
    assert [list(values(t["x"])) for t in choices] == [[7.0], [8.8]]
    assert any(t.get("name") == "cheapest alone" for t in fronts["data"])  # chat moved
    gpus = figs["fleet_gpus"]
    assert list(values(trace(gpus, "code")["y"])) == [4.0, 4.0, 4.0]
    assert any(s.get("x0") == 1.0 for s in gpus["layout"]["shapes"])  # the refusal at 60 s


def test_plansim_report_renders_a_fleet_folder(tmp_path: Path):
    (tmp_path / "fleet.json").write_text(json.dumps(REPORT))
    written = render_dir(tmp_path)
    assert tmp_path / "fleet_report.html" in written
