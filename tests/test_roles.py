"""Roles and modes: which pools a deployment has, what each pool's workers do, and how the
planner sees them (an aggregated pool is decode)."""

from __future__ import annotations

import pytest

from plansim.roles import (
    PLANNER_ROLES,
    Mode,
    Role,
    planner_mode_deployment,
    planner_mode_roles,
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


@pytest.mark.parametrize(("role", "prefills", "decodes", "hands_off", "receives"), [
    (Role.AGG, True, True, False, False),
    (Role.PREFILL, True, False, True, False),
    (Role.DECODE, False, True, False, True),
])
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
    assert planner_mode_roles("disagg") == (Role.PREFILL, Role.DECODE)
    assert planner_mode_roles("prefill") == (Role.PREFILL,)
    assert planner_mode_roles("agg") == planner_mode_roles("decode") == (Role.DECODE,)
    assert planner_mode_deployment("agg") is Mode.AGG
    assert planner_mode_deployment("decode") is Mode.DISAGG


def test_a_disaggregated_pool_imposes_its_role_on_its_ranks():
    assert rank_role(Role.PREFILL, Role.AGG) is Role.PREFILL
    assert rank_role(Role.DECODE, Role.PREFILL) is Role.DECODE
    assert rank_role(Role.AGG, Role.AGG) is Role.AGG
