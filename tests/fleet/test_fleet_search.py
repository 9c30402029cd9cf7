"""A fleet run (``plansim.fleet.run``) in this process: fleets no inventory or budget holds are
answers naming the model and constraint that bind; spot candidates are replayed with seeded,
reproducible preemptions; the autoscaled fleet shares one inventory on one clock."""

from __future__ import annotations

import pytest
from fleet_cases import deployment, on_demand, write_fleet

from plansim import fleet
from plansim.fleet.ledger import PoolSupply
from plansim.fleet.plan import Tier
from plansim.fleet.tasks import MemberTask, replay_member_task
from plansim.retune.tasks import save_window
from plansim.roles import Role
from plansim.sim.deployment import build_deployment
from plansim.traces import load_workload
from plansim.workers.executor import InProcessExecutor, TaskContext


def run(path) -> fleet.FleetResult:
    plan = fleet.prepare(fleet.load_fleet(path), source=str(path))
    workloads = [load_workload(list(m.traces)) for m in plan.models]
    return fleet.run(plan, workloads, executor=InProcessExecutor())


def test_a_budget_no_fleet_fits_names_the_budget_and_the_model(tmp_path):
    result = run(write_fleet(tmp_path, on_demand(16, 16), budget_per_hour=5.0))
    report = result.to_json()
    assert not result.feasible
    (binding,) = report["bindings"]
    assert binding["constraint"] == "budget_per_hour" and binding["has"] == 5.0
    # The closest fleet is the cheapest one, every model's cheapest answer; neither model
    # alone fits $5 per hour, so the binding model is the one that costs the more.
    alone = {m["name"]: m["cheapest_alone"]["cost_per_hour"] for m in report["models"]}
    assert binding["needs"] == pytest.approx(sum(alone.values()))
    assert min(alone.values()) > 5.0
    assert binding["model"] == max(alone, key=alone.get)
    assert any("binds: budget_per_hour" in note for note in report["notes"])


def test_an_inventory_no_fleet_fits_names_the_gpu_type_and_the_model(tmp_path):
    # Both models on H100 only, 5 of them: each fits alone, not together.
    path = write_fleet(tmp_path, on_demand(5, 4), search={"timing_model.system": ["h100_sxm"]})
    report = run(path).to_json()
    assert not report["feasible"]
    use = {m["name"]: m["cheapest_alone"]["gpus"]["h100_sxm"] for m in report["models"]}
    assert max(use.values()) <= 5 < sum(use.values())
    (binding,) = report["bindings"]
    # The closest fleet holds each model's fewest H100s; without the larger, the other fits.
    assert (binding["constraint"], binding["needs"], binding["has"]) == (
        "inventory.h100_sxm",
        sum(use.values()),
        5,
    )
    assert binding["model"] == max(use, key=use.get)


def test_a_model_that_cannot_meet_its_target_within_the_inventory_binds(tmp_path):
    path = write_fleet(
        tmp_path, on_demand(1, 1), models=("light",), search={"timing_model.system": ["h100_sxm"]}
    )
    report = run(path).to_json()
    assert not report["feasible"]
    (binding,) = report["bindings"]
    assert (binding["constraint"], binding["model"], binding["needs"]) == ("target", "light", 0.9)
    assert binding["has"] < 0.9
    assert report["models"][0]["cheapest_alone"] is None


def _spot_member(tmp_path, rate: float) -> MemberTask:
    trace = write_fleet(tmp_path, on_demand(8, 8), models=("light",)).parent / "light.jsonl"
    window = str(tmp_path / "light.npz")
    save_window(window, load_workload([trace]))
    deployment = build_deployment(
        {
            "mode": "agg",
            "num_workers": 4,
            "engine": {
                "timing_model": {"type": "aic", "model": "Qwen/Qwen3-0.6B", "system": "h100_sxm"},
                "startup_time": 2.0,
            },
            "router": {"mode": "round_robin"},
            "sla": {"ttft_ms": 150.0, "itl_ms": 4.0},
        }
    )
    spot = Tier("h100_sxm", "spot", 0.9, preemptions_per_gpu_hour=rate)
    return MemberTask(window, deployment, ((Role.AGG, PoolSupply("h100_sxm", 1, spot)),))


def test_spot_preemptions_are_seeded_and_reproducible(tmp_path):
    # 4 workers for 20 s at 360 preemptions per GPU-hour: about 8 preemptions a replay.
    member = _spot_member(tmp_path, 360.0)
    context = TaskContext(str(tmp_path))
    first = replay_member_task(context, member, seed=5, index=0)
    again = replay_member_task(context, member, seed=5, index=0)
    other = replay_member_task(context, member, seed=6, index=0)
    assert first.preemptions > 0 and first.migrated > 0
    assert first == again
    assert (other.preemptions, other.full.summary) != (first.preemptions, first.full.summary)
    # Every preempted worker was replaced: more workers were provisioned than ran at once.
    assert first.full.summary["decode_worker_seconds"] > 0


def test_without_preemptions_a_spot_replay_is_the_on_demand_replay(tmp_path):
    member = _spot_member(tmp_path, 0.0)
    spot = replay_member_task(TaskContext(str(tmp_path)), member, seed=5, index=0)
    on_demand_run = replay_member_task(
        TaskContext(str(tmp_path)),
        MemberTask(
            member.trace_path,
            member.deployment,
            ((Role.AGG, PoolSupply("h100_sxm", 1, Tier("h100_sxm", "on_demand", 2.2))),),
        ),
        seed=5,
        index=0,
    )
    assert spot.preemptions == 0
    assert spot.full == on_demand_run.full


def test_the_autoscaled_fleet_shares_the_inventory_and_counts_refused_scale_ups(tmp_path):
    # heavy's target is so low that its static answer is badly overloaded, so its planner
    # scales up; light has no planner. With an inventory of exactly the static fleet's GPUs
    # every scale-up is refused, and heavy alone (unbounded GPUs) gets what it asks for.
    options = {
        "models": ("heavy", "light"),
        "planner": True,
        "target": 0.05,
        "search": {"timing_model.system": ["h100_sxm"]},
        "deployments": {"light": deployment()},
    }
    loose = run(write_fleet(tmp_path, on_demand(16, 4), **options))
    held = sum(p.uses("h100_sxm") for p in loose.picks)
    tight = run(write_fleet(tmp_path, on_demand(held, 4), **options))
    auto = tight.to_json()["autoscaled"]
    heavy, light = auto["models"]
    assert heavy["planner"] and not light["planner"] and "alone" not in light
    assert heavy["refused_scale_ups"] > 0
    for refusal in heavy["refusals"]:
        assert refusal["granted"] < refusal["wanted"]
        assert refusal["reason"] == "inventory.h100_sxm"
    assert auto["refused_scale_ups"] == heavy["refused_scale_ups"]
    # What the refusals cost: heavy's good requests alone minus in the fleet, more than none.
    assert (
        heavy["sla_cost"]["good_requests"]
        == (heavy["alone"]["good_requests"] - heavy["good_requests"])
        > 0
    )
    assert auto["sla_cost_good_requests"] == heavy["sla_cost"]["good_requests"]
    # Never more GPUs at once than the inventory holds.
    peak: dict[float, float] = {}
    for entry in auto["models"]:
        for t, gpus in entry["gpus"]:
            peak[t] = peak.get(t, 0.0) + gpus
    assert max(peak.values()) <= held
    assert set(tight.points["kind"]) == {"static", "fleet", "alone"}
