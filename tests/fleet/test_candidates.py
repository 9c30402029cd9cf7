"""A model's front (``plansim.fleet.candidates``): the candidates meeting its target that no
other beats on GPUs of every system and on cost per hour."""

from __future__ import annotations

from plansim.fleet.candidates import Candidate, cheapest, closest, front, usage_of


def candidate(
    usage: dict[str, int], rate: float, good: int = 95, label: str = "v", tier: str = "on_demand"
) -> Candidate:
    return Candidate(
        model="m",
        variant=label,
        overrides=(),
        mode="agg",
        counts=(1,),
        tier=tier,
        usage=tuple(sorted(usage.items())),
        cost_per_hour=rate,
        cost=rate,
        gpu_hours=1.0,
        requests=100,
        good_requests=good,
        meets_target=good >= 95,
    )


def test_pools_on_one_system_add_up_and_systems_are_sorted():
    assert usage_of(["h200_sxm", "h100_sxm", "h200_sxm"], [2, 1, 1], [3, 4, 2]) == (
        ("h100_sxm", 4),
        ("h200_sxm", 8),
    )


def test_the_front_keeps_what_no_other_candidate_beats_on_every_gpu_type_and_cost():
    h100_4 = candidate({"h100": 4}, 8.8, label="h100 x4")
    h100_6 = candidate({"h100": 6}, 13.2, label="h100 x6")  # more of the same, dearer
    h200_2 = candidate({"h200": 2}, 7.0, label="h200 x2")  # other type: kept
    spot_4 = candidate({"h100": 4}, 3.6, label="h100 x4", tier="spot")  # same GPUs, cheaper
    missed = candidate({"h200": 1}, 3.5, good=80, label="h200 x1")
    kept = front([h100_4, h100_6, h200_2, spot_4, missed])
    assert [(c.variant, c.tier) for c in kept] == [("h100 x4", "spot"), ("h200 x2", "on_demand")]


def test_equal_candidates_are_kept_once_and_the_cheapest_comes_first():
    a, b = candidate({"h100": 2}, 4.4, label="a"), candidate({"h100": 2}, 4.4, label="b")
    assert [c.variant for c in front([b, a])] == ["a"]
    assert cheapest([b, a]).variant == "a"


def test_without_a_candidate_meeting_the_target_the_closest_has_the_most_good_requests():
    low = candidate({"h100": 1}, 2.2, good=50)
    high = candidate({"h100": 2}, 4.4, good=90)
    assert front([low, high]) == [] and cheapest([low, high]) is None
    assert closest([low, high]) is high
