"""The routing registry: round robin and seeded random, and how each policy's declared knobs
become the deployment's router fields, their validation and their no-effect warning."""

from __future__ import annotations

import logging

import pytest
from simkit import run

from plansim.errors import ConfigError
from plansim.params import Param
from plansim.sim.deployment import build_deployment
from plansim.sim.routing import ROUTERS, all_router_knobs, router_knobs


def _spaced(n, gap_ms=2000.0):
    return [(i * gap_ms, 600, 3, [100 + i, 200 + i]) for i in range(n)]


def test_round_robin_cycles_through_workers_in_order():
    r = run(_spaced(6), num_workers=3)
    assert r.requests["decode_worker"].tolist() == [0, 1, 2, 0, 1, 2]


def test_random_routing_is_seeded_and_reaches_every_worker():
    a = run(_spaced(30, 10.0), num_workers=3, router={"mode": "random"}, seed=5)
    b = run(_spaced(30, 10.0), num_workers=3, router={"mode": "random"}, seed=5)
    assert a.requests["decode_worker"].tolist() == b.requests["decode_worker"].tolist()
    assert set(a.requests["decode_worker"]) == {0, 1, 2}


def test_the_registry_names_the_three_modes_and_their_knobs():
    assert ROUTERS.names() == ("round_robin", "random", "kv_router")
    assert router_knobs("round_robin") == router_knobs("random") == ()
    assert [k.name for k in router_knobs("kv_router")] == [
        "overlap_score_weight",
        "prefill_load_scale",
        "overlap_score_credit",
        "overlap_score_credit_decay",
        "decode_active_request_weight",
        "host_cache_hit_weight",
        "router_temperature",
        "router_queue_threshold",
        "router_queue_policy",
        "router_track_active_blocks",
        "router_track_prefill_tokens",
        "router_assume_kv_reuse",
    ]
    scale = all_router_knobs()["prefill_load_scale"]
    assert (scale.default, scale.ge, scale.kind, scale.patchable) == (1.0, 0, float, True)
    alias = all_router_knobs()["overlap_score_weight"]
    assert (alias.default, alias.alias_of) == (None, "prefill_load_scale")
    assert not all_router_knobs()["host_cache_hit_weight"].patchable


def test_deployment_router_fields_are_the_declared_knobs_with_their_bounds():
    router = build_deployment({"router": {"mode": "kv_router"}}).router
    assert (router.prefill_load_scale, router.router_temperature) == (1.0, 0.0)
    assert router.overlap_score_weight is None and router.router_queue_threshold is None
    # The deprecated spelling becomes the scale (and wins over it).
    router = build_deployment(
        {"router": {"mode": "kv_router", "overlap_score_weight": 2.0, "prefill_load_scale": 0.5}}
    ).router
    assert (router.prefill_load_scale, router.overlap_score_weight) == (2.0, None)
    with pytest.raises(ConfigError) as err:
        build_deployment({"router": {"mode": "kv_router", "router_temperature": -0.1}})
    assert err.value.field == "router.router_temperature"


def test_an_unknown_mode_fails_listing_the_registered_ones():
    with pytest.raises(
        ConfigError,
        match="unknown router mode 'least_loaded' "
        r"\(known: round_robin, random, kv_router\)",
    ):
        build_deployment({"router": {"mode": "least_loaded"}})


def test_a_knob_the_chosen_mode_does_not_use_is_named_in_the_no_effect_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="plansim.sim.deployment"):
        dep = build_deployment({"router": {"mode": "round_robin", "overlap_score_weight": 2.0}})
    assert dep.router.no_effect_keys == ("overlap_score_weight",)
    (warning,) = [r.getMessage() for r in caplog.records]
    assert "router.overlap_score_weight (a knob of router mode kv_router only)" in warning


def test_a_declared_knob_checks_values_from_files_flags_and_patches():
    knob = Param("w", 1.0, "a weight", ge=0.0, le=2.0)
    assert knob.check("0.5") == 0.5 and knob.check(2) == 2
    for bad in ("x", -1, 2.5, float("nan"), True):
        with pytest.raises(ConfigError) as err:
            knob.check(bad, field="--router-param w")
        assert err.value.field == "--router-param w"
    assert knob.describe() == "w (>= 0, <= 2, default 1): a weight"
    off = Param("t", None, "a threshold", ge=0.0, optional=True)
    assert off.check("null") is None and off.check("None") is None and off.check("0.5") == 0.5
