"""The planner knob search: monotone knobs by the static search's doubling and bisection, the
others one value at a time, pruning by cost; the written Dynamo planner file."""

from __future__ import annotations

import pytest
import yaml

from plansim.capacity import planner_search as ps
from plansim.errors import InputError
from plansim.planner_core import parse_planner_config


def run(knobs, outcome):
    """Drive ``ps.search`` with ``outcome(setting) -> (meets_target, cost)``; returns the
    answer and the settings replayed, in order."""
    asked = []

    def replay(settings):
        trials = []
        for s in settings:
            asked.append(dict(s))
            ok, cost = outcome(dict(s))
            trials.append(ps.Trial(s, 95 if ok else 50, 100, cost, ok))
        return trials
        yield  # a generator in the scheduler protocol

    gen = ps.drive(ps.search(knobs), replay)
    try:
        next(gen)
    except StopIteration as stop:
        return stop.value[0], asked
    raise AssertionError("the fake replay never yields")


def test_monotone_knob_stops_at_the_first_feasible_value():
    # min_endpoint 1..8, feasible from 5 on. Doubling from the cheapest (as the static search:
    # 1, 2, 4, 8) then bisection between 4 (missed) and 8 (met): 6, then 5. The answer is 5
    # and nothing past the bisection is replayed.
    knob = ps.parse_knob("min_endpoint", [8, 3, 1, 5, 2, 7, 4, 6])
    assert knob.values == (1, 2, 3, 4, 5, 6, 7, 8) and knob.monotone
    answer, asked = run([knob], lambda s: (s["min_endpoint"] >= 5, float(s["min_endpoint"])))
    assert [a["min_endpoint"] for a in asked] == [1, 2, 4, 8, 6, 5]
    assert dict(answer.setting) == {"min_endpoint": 5}


def test_safer_direction_of_a_descending_knob():
    # sla_fraction: smaller is safer, so the cheapest value (1.0) comes first.
    knob = ps.parse_knob("sla_fraction", [0.25, 1.0, 0.5])
    assert knob.values == (1.0, 0.5, 0.25)
    answer, asked = run([knob], lambda s: (s["sla_fraction"] <= 0.5, 1.0 / s["sla_fraction"]))
    assert [a["sla_fraction"] for a in asked] == [1.0, 0.5]
    assert dict(answer.setting) == {"sla_fraction": 0.5}


def test_each_knob_alone_from_the_cheapest_corner_then_a_step_back_rescued():
    # Feasible when f <= 0.5 and m >= 2, or m >= 3 at any f. Cost: m + 0.5 / f.
    # From the corner (1.0, 1): f alone along 1.0, 0.5, 0.25 misses throughout; m alone:
    # (1.0, 2) misses, (1.0, 3) holds at 3.5. m one value back (2), rescued along f: (1.0, 2)
    # known, (0.5, 2) holds at 3.0, the cheapest. Minimising from there replays nothing new.
    f = ps.parse_knob("sla_fraction", [1.0, 0.5, 0.25])
    m = ps.parse_knob("min_endpoint", [1, 2, 3])

    def outcome(s):
        ok = (s["sla_fraction"] <= 0.5 and s["min_endpoint"] >= 2) or s["min_endpoint"] >= 3
        return ok, s["min_endpoint"] + 0.5 / s["sla_fraction"]

    answer, asked = run([f, m], outcome)
    assert [(a["sla_fraction"], a["min_endpoint"]) for a in asked] == [
        (1.0, 1),
        (0.5, 1),
        (0.25, 1),
        (1.0, 2),
        (1.0, 3),
        (0.5, 2),
    ]
    assert dict(answer.setting) == {"sla_fraction": 0.5, "min_endpoint": 2}


def test_other_knob_value_pruned_when_it_misses_at_no_lower_cost():
    # m feasible from 2 (cost 2 under kalman). constant misses at m=2 with cost 3 >= 2: pruned
    # after one replay. arima holds at m=2 at cost 1.5 and holds at m=1 too (cost 0.75).
    m = ps.parse_knob("min_endpoint", [1, 2, 3])
    p = ps.Knob("load_predictor", ("kalman", "constant", "arima"), False)
    cost = {"kalman": 1.0, "constant": 1.5, "arima": 0.75}

    def outcome(s):
        pred, n = s["load_predictor"], s["min_endpoint"]
        ok = {"kalman": n >= 2, "constant": False, "arima": True}[pred]
        return ok, cost[pred] * n

    answer, asked = run([m, p], outcome)
    assert [(a["load_predictor"], a["min_endpoint"]) for a in asked] == [
        ("kalman", 1),
        ("kalman", 2),
        ("constant", 2),
        ("arima", 2),
        ("arima", 1),
    ]
    assert dict(answer.setting) == {"min_endpoint": 1, "load_predictor": "arima"}


def test_not_knobs_and_unknown_keys_are_refused():
    with pytest.raises(InputError, match=r"planner.max_gpu_budget: not a planner knob"):
        ps.parse_knob("max_gpu_budget", [8])
    with pytest.raises(InputError, match=r"planner.ttft: not a planner config key"):
        ps.parse_knob("ttft", [100])
    with pytest.raises(InputError, match="in \\(0, 1\\]"):
        ps.parse_knob("sla_fraction", [1.5])
    with pytest.raises(InputError, match="either"):
        ps.check_knobs([ps.parse_knob("sla_fraction", [1.0]), ps.parse_knob("ttft_ms", [100])])


BASE = {
    "mode": "agg",
    "optimization_target": "sla",
    "enable_throughput_scaling": True,
    "enable_load_scaling": True,
    "throughput_adjustment_interval_seconds": 60,
    "load_adjustment_interval_seconds": 5,
    "ttft_ms": 800.0,
    "itl_ms": 15.0,
    "load_predictor": "kalman",
    "max_gpu_budget": 32,
    "report_interval_hours": None,
}


def test_written_planner_file_loads_back_as_the_same_configuration():
    # sla_fraction 0.5 of an 800 ms / 15 ms SLA is ttft_ms 400, itl_ms 7.5; the interval 30.0
    # is written as Dynamo's integer 30; no plansim-only key is written for the dynamo policy.
    setting = (
        ("sla_fraction", 0.5),
        ("throughput_adjustment_interval_seconds", 30.0),
        ("min_endpoint", 3),
        ("load_predictor", "constant"),
    )
    from plansim.roles import Mode
    from plansim.sim.deployment import build_deployment

    # The SLA as capacity passes it (the deployment's, here in the reference's itl_ms spelling).
    sla = build_deployment({"sla": {"ttft_ms": 800, "itl_ms": 15}}).sla.model_dump()

    # The base mapping holds the deployment's mode as an enum (default_base): written as "agg".
    mapping = ps.planner_mapping(
        {**BASE, "mode": Mode.AGG, "scaling_policy": "dynamo"}, setting, sla
    )
    assert mapping["mode"] == "agg" and type(mapping["mode"]) is str
    assert mapping["ttft_ms"] == 400.0 and mapping["itl_ms"] == 7.5
    assert mapping["throughput_adjustment_interval_seconds"] == 30
    assert isinstance(mapping["throughput_adjustment_interval_seconds"], int)
    assert mapping["min_endpoint"] == 3 and mapping["load_predictor"] == "constant"
    assert "scaling_policy" not in mapping and "sla_fraction" not in mapping
    from plansim.capacity.result import PlannerTuning
    from plansim.commands.capacity import planner_file

    text = planner_file(PlannerTuning("base", (), (), dict(setting), mapping))
    loaded = parse_planner_config(yaml.safe_load(text))
    searched = ps.setting_config(BASE, setting, sla)
    assert loaded.model_dump() == searched.model_dump()
    assert loaded.scheduling.scale_interval_seconds == 5.0  # GCD of 5 s and 30 s


def test_preset_starts_at_the_base_values_and_goes_up_to_the_static_counts():
    knobs = {k.key: k for k in ps.preset(BASE, {"min_endpoint": 4})}
    # The base's own predictor first, then the others in their tune_order (prophet not tried).
    assert knobs["load_predictor"].values == ("kalman", "constant", "arima")
    assert knobs["throughput_adjustment_interval_seconds"].values[0] == 60
    assert knobs["min_endpoint"].values == (1, 2, 3, 4)
    assert knobs["sla_fraction"].values[0] == 1.0 and knobs["sla_fraction"].monotone
    assert knobs["load_scaling_down_sensitivity"].values == (100, 80, 50, 20, 0)
    user = [ps.parse_knob("ttft_ms", [400, 800])]
    assert "sla_fraction" not in {k.key for k in ps.merged(user, list(knobs.values()))}
