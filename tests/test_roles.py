"""Roles and modes: which pools a deployment has, what each pool's workers do, and how the
planner sees them (an aggregated pool is decode)."""

from __future__ import annotations

import pytest

from plansim.roles import (
    PLANNER_ROLES,
    Mode,
    PlannerMode,
    Role,
    pools_doing,
    pools_seen_as,
    rank_role,
)


def test_an_aggregated_deployment_has_one_pool_the_planner_sees_as_decode():
    assert Mode.AGG.pools == (Role.AGG,)
    assert Mode.AGG.entry_pool is Role.AGG and Mode.AGG.visible_pool is Role.AGG
    assert Mode.AGG.planner_roles == (Role.DECODE,)
    assert Mode.AGG.pool_for(Role.DECODE) is Role.AGG
    assert Mode.AGG.pool_for("prefill") is None


def test_a_disaggregated_deployment_enters_at_prefill_and_is_seen_at_decode():
    assert Mode.DISAGG.pools == (Role.PREFILL, Role.DECODE)
    assert Mode.DISAGG.entry_pool is Role.PREFILL
    assert Mode.DISAGG.visible_pool is Role.DECODE
    assert Mode.DISAGG.planner_roles == PLANNER_ROLES
    assert [Mode.DISAGG.pool_for(r) for r in PLANNER_ROLES] == [Role.PREFILL, Role.DECODE]


@pytest.mark.parametrize(
    ("role", "prefills", "decodes", "hands_off", "receives"),
    [
        (Role.AGG, True, True, False, False),
        (Role.PREFILL, True, False, True, False),
        (Role.DECODE, False, True, False, True),
    ],
)
def test_what_each_role_computes(role, prefills, decodes, hands_off, receives):
    assert (role.prefills, role.decodes) == (prefills, decodes)
    assert (role.hands_off, role.receives_handoff) == (hands_off, receives)


def test_roles_and_modes_read_their_file_spellings_and_equal_them():
    assert Role("aggregated") is Role.AGG and Role.AGG.worker_type == "aggregated"
    assert Role("Prefill") is Role.PREFILL
    assert Mode("aggregated") is Mode.AGG and Mode("disaggregated") is Mode.DISAGG
    assert Role.DECODE == "decode" and {"decode": 1}[Role.DECODE] == 1
    with pytest.raises(ValueError):
        Role("encode")


def test_planner_modes_scale_their_roles_against_their_deployment_mode():
    assert PlannerMode("disagg").roles == (Role.PREFILL, Role.DECODE)
    assert PlannerMode.PREFILL.roles == (Role.PREFILL,)
    assert PlannerMode.AGG.roles == PlannerMode.DECODE.roles == (Role.DECODE,)
    assert PlannerMode.AGG.deployment_mode is Mode.AGG
    assert PlannerMode.DECODE.deployment_mode is Mode.DISAGG


def test_a_disaggregated_pool_imposes_its_role_on_its_ranks():
    assert rank_role(Role.PREFILL, Role.AGG) is Role.PREFILL
    assert rank_role(Role.DECODE, Role.PREFILL) is Role.DECODE
    assert rank_role(Role.AGG, Role.AGG) is Role.AGG


def test_an_aggregated_pool_counts_as_decode_but_does_both_kinds_of_work():
    assert pools_seen_as(Role.DECODE) == (Role.AGG, Role.DECODE)
    assert pools_seen_as("prefill") == (Role.PREFILL,)
    assert pools_doing(Role.PREFILL) == (Role.AGG, Role.PREFILL)
    assert pools_doing(Role.DECODE) == (Role.AGG, Role.DECODE)
    assert PlannerMode.AGG.pool_for(Role.DECODE) is Role.AGG
    assert PlannerMode.DISAGG.pool_for("prefill") is Role.PREFILL


def test_each_mode_names_the_deployment_keys_of_its_pools():
    assert Mode.AGG.size_keys == Mode.AGG.pool_keys == ("num_workers",)
    assert Mode.DISAGG.size_keys == ("num_prefill_workers", "num_decode_workers")
    assert Mode.DISAGG.pool_keys == (
        "num_prefill_workers",
        "num_decode_workers",
        "prefill_engine",
        "decode_engine",
    )
    assert Mode.AGG.other is Mode.DISAGG and Mode.DISAGG.other is Mode.AGG
