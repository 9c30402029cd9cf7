"""Synthetic workloads: determinism, rates and schedules, lengths, prefixes and sessions."""

from __future__ import annotations

import numpy as np
import pytest

from plansim.errors import InputError
from plansim.traces.synth import LengthSpec, SynthSpec, synthesize


def _counts(w, bins: int, duration_s: float) -> np.ndarray:
    return np.histogram(w.arrival_ms / 1000, bins=bins, range=(0, duration_s))[0]


def test_same_seed_same_workload_other_seed_differs():
    spec = SynthSpec(
        duration_s=300, rate_rps=5, prefix_groups=3, shared_prefix_ratio=0.5, turns_per_session=2
    )
    a, b, c = synthesize(spec, seed=4), synthesize(spec, seed=4), synthesize(spec, seed=5)
    for name in ("arrival_ms", "isl_tokens", "osl_tokens", "hash_offsets", "hash_ids"):
        assert np.array_equal(getattr(a, name), getattr(b, name))
    assert not np.array_equal(a.arrival_ms[:10], c.arrival_ms[:10])


def test_constant_poisson_rate_and_ordering():
    # 20 rps for 1000 s: 20,000 expected, Poisson sd ~141; 5 sd is 707.
    w = synthesize(SynthSpec(duration_s=1000, rate_rps=20), seed=1)
    assert abs(len(w) - 20_000) < 707
    assert np.all(np.diff(w.arrival_ms) >= 0)
    assert w.arrival_ms[0] >= 0 and w.arrival_ms[-1] < 1_000_000
    assert w.request_id[:3].tolist() == ["0", "1", "2"]
    gaps = np.diff(w.arrival_ms)
    assert (gaps.std() / gaps.mean()) ** 2 == pytest.approx(1.0, abs=0.1)


def test_gamma_burstiness_sets_gap_variability():
    w = synthesize(SynthSpec(duration_s=2000, rate_rps=10, arrival="gamma", burstiness=4.0), seed=2)
    gaps = np.diff(w.arrival_ms)
    assert (gaps.std() / gaps.mean()) ** 2 == pytest.approx(4.0, rel=0.2)
    assert abs(len(w) - 20_000) < 2_000  # burstier counts vary more


def test_diurnal_swing_between_trough_and_peak():
    # Mean 10 rps, peak/trough 4: rate 10 * (1 - 0.6 cos(2 pi t / T)): 4 rps at t=0, 16 at T/2.
    w = synthesize(
        SynthSpec(duration_s=7200, rate_rps=10, schedule="diurnal", peak_to_trough=4), seed=3
    )
    counts = _counts(w, 24, 7200)  # 300 s bins
    assert abs(len(w) - 72_000) < 1_500
    assert counts.max() / counts.min() == pytest.approx(4.0, rel=0.2)
    assert np.argmax(counts) in (11, 12)


def test_steps_and_spikes():
    spec = SynthSpec(
        duration_s=600, rate_rps=2, schedule="steps", steps=((300, 10),), spikes=((100, 100, 5),)
    )
    counts = _counts(
        synthesize(spec, seed=5), 6, 600
    )  # 100 s bins: 200, 1000, 200, 1000, 1000, 1000
    expected = np.array([200, 1000, 200, 1000, 1000, 1000])
    assert np.all(np.abs(counts - expected) < 5 * np.sqrt(expected))


def test_length_distributions():
    n = SynthSpec(
        duration_s=1000,
        rate_rps=20,
        isl=LengthSpec.lognormal(3000, 1500),
        osl=LengthSpec.normal(300, 50),
    )
    w = synthesize(n, seed=6)
    assert w.isl_tokens.mean() == pytest.approx(3000, rel=0.05)
    assert w.isl_tokens.std() == pytest.approx(1500, rel=0.1)
    assert w.osl_tokens.mean() == pytest.approx(300, rel=0.02)
    f = synthesize(
        SynthSpec(
            duration_s=10, rate_rps=5, isl=LengthSpec.fixed(700), osl=LengthSpec.resample([3, 9])
        ),
        seed=1,
    )
    assert set(f.isl_tokens.tolist()) == {700} and set(f.osl_tokens.tolist()) <= {3, 9}
    assert f.hash_offsets[1] == 2  # ceil(700 / 512) blocks each


def test_prefix_groups_share_leading_blocks():
    spec = SynthSpec(
        duration_s=200,
        rate_rps=5,
        prefix_groups=2,
        shared_prefix_ratio=0.5,
        isl=LengthSpec.fixed(4096),
        osl=LengthSpec.fixed(1),
    )
    w = synthesize(spec, seed=7)
    # 0.5 * 4096 / 512 = 4 shared blocks out of 8; two groups -> two distinct 4-block prefixes.
    heads = {tuple(w.hashes(i)[:4].tolist()) for i in range(len(w))}
    tails = [int(w.hashes(i)[4]) for i in range(len(w))]
    assert len(heads) == 2
    assert len(set(tails)) == len(w)


def test_sessions_repeat_the_previous_turn_as_prefix():
    spec = SynthSpec(
        duration_s=1000,
        rate_rps=0.02,
        turns_per_session=3,
        inter_turn_delay_s=10,
        isl=LengthSpec.fixed(1000),
        osl=LengthSpec.fixed(100),
    )
    w = synthesize(spec, seed=8)
    first = int(np.flatnonzero(w.isl_tokens == 1000)[0])
    t0 = w.arrival_ms[first]
    turn2 = int(np.flatnonzero(np.isclose(w.arrival_ms, t0 + 10_000))[0])
    turn3 = int(np.flatnonzero(np.isclose(w.arrival_ms, t0 + 20_000))[0])
    # Turn 2: 1000 + 100 + 1000 = 2100 tokens; it repeats turn 1's one complete block.
    assert w.isl_tokens[turn2] == 2100 and w.isl_tokens[turn3] == 3200
    assert w.hashes(turn2)[0] == w.hashes(first)[0]
    assert w.hashes(turn2)[1] != w.hashes(first)[1]
    # Turn 3 repeats turn 2's four complete blocks (2100 // 512 = 4).
    assert w.hashes(turn3)[:4].tolist() == w.hashes(turn2)[:4].tolist()


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        (SynthSpec(duration_s=0), "duration_s"),
        (SynthSpec(rate_rps=-1), "rate_rps"),
        (SynthSpec(schedule="steps"), "steps"),
        (SynthSpec(peak_to_trough=0.5), "peak_to_trough"),
        (SynthSpec(arrival="uniform"), "arrival"),
        (SynthSpec(shared_prefix_ratio=2), "shared_prefix_ratio"),
        (SynthSpec(isl=LengthSpec.lognormal(0, 1)), "isl"),
    ],
)
def test_bad_specs_name_the_field(spec, field):
    with pytest.raises(InputError) as info:
        synthesize(spec)
    assert info.value.field == field


def test_max_requests_keeps_the_first_arrivals():
    spec = SynthSpec(duration_s=100, rate_rps=50)
    full = synthesize(spec, seed=9)
    cut = synthesize(SynthSpec(duration_s=100, rate_rps=50, max_requests=1_000), seed=9)
    assert len(cut) == 1_000
    assert cut.arrival_ms.tolist() == full.arrival_ms[:1_000].tolist()
    assert cut.hash_offsets[-1] == cut.hash_ids.size
    assert cut.hash_ids.max() + 1 == len(np.unique(cut.hash_ids))


def test_closed_loop_sessions_follow_the_previous_turns_end():
    spec = SynthSpec(
        duration_s=1000, rate_rps=0.02, turns_per_session=3, inter_turn_delay_s=10, closed_loop=True
    )
    w = synthesize(spec, seed=8)
    g = w.graph
    assert g.num_sessions == int(np.count_nonzero(g.turn_index == 0))
    later = np.flatnonzero(g.turn_index > 0)
    assert np.array_equal(np.flatnonzero(np.diff(g.dep_offsets)), later)
    src = g.dep_source[g.dep_offsets[later]]
    assert np.array_equal(g.session[src], g.session[later])
    assert np.array_equal(g.turn_index[src] + 1, g.turn_index[later])
    assert np.all(g.dep_delay_ms == 10_000.0)
    # Same rows as the open-loop form: the closed-loop flag adds the graph only.
    open_w = synthesize(
        SynthSpec(duration_s=1000, rate_rps=0.02, turns_per_session=3, inter_turn_delay_s=10),
        seed=8,
    )
    assert open_w.graph is None and np.array_equal(open_w.arrival_ms, w.arrival_ms)
