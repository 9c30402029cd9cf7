"""``--search`` dimensions: parsing, the keys a search may and may not vary, validation of every
variant before a replay, and each variant's pools."""

from __future__ import annotations

import pytest
from capacity_workloads import agg_deployment

from plansim.capacity.variants import build_variants, layout_of, parse_search
from plansim.errors import InputError
from plansim.sim.deployment import build_deployment


def test_values_are_yaml_scalars_in_the_given_order():
    dim = parse_search("engine.max_num_batched_tokens=4096, 8192")
    assert dim.key == "engine.max_num_batched_tokens" and dim.values == (4096, 8192)
    assert parse_search("router.mode=kv_router,round_robin").values == ("kv_router", "round_robin")
    assert parse_search("router.overlap_score_weight=0.5,1e3").values == (0.5, 1000.0)
    assert parse_search("engine.enable_prefix_caching=true,false").values == (True, False)


@pytest.mark.parametrize(
    "spec",
    [
        "engine.max_num_seqs",
        "=1,2",
        "engine.max_num_seqs=",
        "engine.max_num_seqs=1,,2",
        "engine.max_num_seqs=1,1",
    ],
)
def test_malformed_dimensions_name_the_option(spec):
    with pytest.raises(InputError, match="--search"):
        parse_search(spec)


def test_variants_are_the_cartesian_product_first_dimension_slowest():
    dims = [parse_search("engine.max_num_seqs=1,2"), parse_search("router.mode=random,kv_router")]
    variants = build_variants(agg_deployment(), dims, max_gpu_budget=8)
    assert [v.label for v in variants] == [
        "engine.max_num_seqs=1, router.mode=random",
        "engine.max_num_seqs=1, router.mode=kv_router",
        "engine.max_num_seqs=2, router.mode=random",
        "engine.max_num_seqs=2, router.mode=kv_router",
    ]
    assert variants[3].deployment.engine.max_num_seqs == 2
    assert variants[3].deployment.router.mode == "kv_router"


def test_without_dimensions_the_base_is_the_only_variant():
    (variant,) = build_variants(agg_deployment(), [], max_gpu_budget=8)
    assert variant.label == "base" and variant.overrides == ()


def test_values_giving_the_same_deployment_are_searched_once():
    dims = [parse_search("router.mode=kv,kv_router")]  # "kv" is an alias of kv_router
    assert len(build_variants(agg_deployment(), dims, max_gpu_budget=8)) == 1


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("engine.nope=1,2", "engine.nope: not a deployment key"),
        ("nope=1,2", "nope: not a deployment key"),
        ("num_workers=1,2", "worker counts are what plansim capacity searches"),
        ("sla.ttft_ms=100,200", "the SLA is the goodput criterion"),
        ("seed=1,2", "--seeds"),
        ("arrival_speedup_ratio=1,2", "changes the traffic"),
        ("engine.emit_kv_events=true,false", "accepted for compatibility but not simulated"),
        ("engine.max_num_seqs=0,4", "engine.max_num_seqs=0"),
    ],
)
def test_bad_dimensions_fail_before_any_replay_naming_the_key(spec, message):
    with pytest.raises(InputError, match="--search") as info:
        build_variants(agg_deployment(), [parse_search(spec)], max_gpu_budget=8)
    assert message in str(info.value)


def test_a_key_searched_twice_is_refused():
    dims = [parse_search("engine.max_num_seqs=1,2"), parse_search("engine.max_num_seqs=3")]
    with pytest.raises(InputError, match="searched twice"):
        build_variants(agg_deployment(), dims, max_gpu_budget=8)


def test_a_budget_that_cannot_hold_one_worker_per_pool_names_the_option():
    dep = build_deployment({"engine": {"tensor_parallel_size": 4}, "sla": {"ttft_ms": 100}})
    with pytest.raises(InputError, match="--max-gpu-budget"):
        build_variants(dep, [], max_gpu_budget=2)


def test_pool_layout_counts_gpus_and_the_most_workers_each_pool_may_have():
    dep = build_deployment(
        {
            "mode": "disagg",
            "prefill_engine": {"tensor_parallel_size": 2},
            "decode_engine": {"tensor_parallel_size": 4, "startup_time": 30},
            "sla": {"ttft_ms": 100},
        }
    )
    layout = layout_of(dep)
    assert layout.names == ("prefill", "decode") and layout.gpus_per_worker == (2, 4)
    assert layout.startup_s == (0.0, 30.0)
    assert layout.gpus((3, 2)) == 14
    # 32 GPUs: prefill up to (32 - 4) / 2 = 14 with one decode worker; decode (32 - 2) / 4 = 7
    assert layout.max_counts(32) == (14, 7)


def test_counts_over_the_budget_lose_workers_from_the_pool_holding_most_gpus():
    dep = build_deployment(
        {"mode": "disagg", "decode_engine": {"tensor_parallel_size": 2}, "sla": {"ttft_ms": 100}}
    )
    layout = layout_of(dep)
    # 3P x 1 + 4D x 2 = 11 GPUs; decode holds the most until 3P + 1D x 2 = 5 <= 6
    assert layout.fit((3, 4), 6) == (3, 1)
    assert layout.fit((3, 4), 11) == (3, 4)
    # equal pools: the first of equals gives a worker first, 4+4 -> 3+4 -> 3+3 -> 2+3
    even = layout_of(build_deployment({"mode": "disagg", "sla": {"ttft_ms": 100}}))
    assert even.fit((4, 4), 5) == (2, 3)
    # every pool keeps one worker even when that is over the budget
    assert layout.fit((2, 2), 1) == (1, 1)


def test_a_router_knob_the_router_mode_does_not_use_is_refused():
    with pytest.raises(InputError, match="accepted for compatibility but not simulated"):
        build_variants(
            agg_deployment(router="round_robin"),
            [parse_search("router.overlap_score_weight=0.5,1")],
            max_gpu_budget=8,
        )


def test_router_modes_can_be_searched_from_a_kv_router_base():
    base = agg_deployment(router="kv_router")
    variants = build_variants(
        base, [parse_search("router.mode=round_robin,kv_router")], max_gpu_budget=8
    )
    assert [v.deployment.router.mode for v in variants] == ["round_robin", "kv_router"]
    assert variants[0].deployment.no_effect_keys() == ()
