"""The per-pass table: the SDK's answers on the grid, monotone, cached on disk by every input."""

from __future__ import annotations

import numpy as np
import pytest

from plansim.aic import sdk, table
from plansim.aic.spec import parse_aic_spec
from plansim.aic.table import GridBounds, build_table, load_table, monotone, octave_axis, table_key
from plansim.sim.timing.aic import AicTiming


class FakeHandle:
    """A monotone stand-in for the SDK's engine: simple closed forms, so every grid point's
    expected value is known without the SDK."""

    def __init__(self) -> None:
        self.calls = 0

    def predict_prefill_latency(self, bs: int, isl: int, prefix: int) -> float:
        self.calls += 1
        n = isl - prefix
        return 10.0 + 0.01 * bs * n + 1e-5 * bs * n * (prefix + n)

    def predict_decode_latency(self, bs: int, isl: int) -> float:
        self.calls += 1
        return 5.0 + 0.1 * bs + 1e-4 * bs * isl

    def mixed_step_breakdown(self, ctx: int, gen: int, isl: int, osl: int) -> tuple:
        self.calls += 1
        return (0.0, 4.0 + 0.01 * ctx, 0.0, 0.0)


SMALL = GridBounds(max_batch=8, max_pass_tokens=64, max_context=64)


def test_octave_axis_has_four_points_an_octave_and_each_successor():
    assert octave_axis(1, 16, 4).tolist() == [1, 2, 3, 4, 5, 6, 7, 8, 10, 12, 14, 16]
    assert octave_axis(16, 40, 4, successors=True).tolist() == [
        16,
        17,
        20,
        21,
        24,
        25,
        28,
        29,
        32,
        33,
        40,
    ]


def test_monotone_leaves_monotone_values_alone():
    v = np.array([[1.0, 2.0, 5.0], [3.0, 3.0, 6.0]])
    assert monotone(v, axes=(0, 1)).tolist() == v.tolist()


def test_monotone_moves_a_dip_to_the_midpoint_of_its_envelopes():
    # Running max [10, 12, 12, 13], running min from above [10, 11, 11, 13]: midpoints.
    assert monotone(np.array([10.0, 12.0, 11.0, 13.0]), axes=(0,)).tolist() == [10, 11.5, 11.5, 13]


def test_monotone_keeps_earlier_axes_monotone():
    rng = np.random.default_rng(3)
    v = monotone(rng.random((6, 7, 5)), axes=(0, 1))
    assert (np.diff(v, axis=0) >= 0).all() and (np.diff(v, axis=1) >= 0).all()


def test_table_holds_the_sdk_answers_at_every_grid_point(monkeypatch, qwen_spec):
    fake = FakeHandle()
    monkeypatch.setattr(sdk, "engine", lambda spec: fake)
    t = build_table(qwen_spec, SMALL)
    for i, b in enumerate(t.prefill_batch):
        for j, n in enumerate(t.prefill_tokens):
            for k, p in enumerate(t.prefill_prefix):
                expected = (
                    fake.predict_prefill_latency(int(b), int(n + p), int(p))
                    if b * n <= SMALL.max_pass_tokens
                    else None
                )
                if expected is not None:
                    assert t.prefill_ms[i, j, k] == expected
    for i, b in enumerate(t.decode_batch):
        for j, c in enumerate(t.decode_context):
            assert t.decode_ms[i, j] == fake.predict_decode_latency(int(b), int(c))
    assert t.shared_ms.tolist() == [4.0 + 0.01 * x for x in t.shared_tokens]


def test_on_rows_counts_the_grid_rows_asked_of_the_sdk(monkeypatch, qwen_spec):
    monkeypatch.setattr(sdk, "engine", lambda spec: FakeHandle())
    seen = []
    t = build_table(qwen_spec, SMALL, on_rows=lambda done, total: seen.append((done, total)))
    # A prefill row per token count, a decode row per batch size, the shared-pass row.
    total = t.prefill_tokens.size + t.decode_batch.size + 1
    assert seen == [(k, total) for k in range(1, total + 1)]


def test_prefill_beyond_the_largest_pass_is_linear_in_batch(monkeypatch, qwen_spec):
    monkeypatch.setattr(sdk, "engine", lambda spec: FakeHandle())
    t = build_table(qwen_spec, SMALL)
    j = int(np.flatnonzero(t.prefill_tokens == 32)[0])  # 2 x 32 = 64 tokens is the largest pass
    i2 = int(np.flatnonzero(t.prefill_batch == 2)[0])
    i8 = int(np.flatnonzero(t.prefill_batch == 8)[0])
    assert t.prefill_ms[i8, j, 0] == pytest.approx(t.prefill_ms[i2, j, 0] * 4)


def test_interpolation_hits_the_grid_and_is_linear_between_points(monkeypatch, qwen_spec):
    monkeypatch.setattr(sdk, "engine", lambda spec: FakeHandle())
    timing = AicTiming(build_table(qwen_spec, SMALL))
    fake = FakeHandle()
    assert timing.decode_ms(4, 0, 48.0, 0) == fake.predict_decode_latency(4, 48)
    # Decode is bilinear in (batch, context): exact between grid points too.
    assert timing.decode_ms(5, 0, 41.0, 0) == pytest.approx(fake.predict_decode_latency(5, 41))
    assert timing.prefill_ms(3 * 12, 3, 12 + 16, 16) == fake.predict_prefill_latency(3, 28, 16)


def test_real_table_is_monotone_in_tokens_and_batch(qwen_spec):
    t = load_table(qwen_spec)
    assert (np.diff(t.prefill_ms, axis=0) >= 0).all()  # batch
    assert (np.diff(t.prefill_ms, axis=1) >= 0).all()  # tokens per request
    assert (np.diff(t.decode_ms, axis=0) >= 0).all()  # batch
    assert (np.diff(t.decode_ms, axis=1) >= 0).all()  # context
    timing = AicTiming(t)
    batches = np.arange(1, 300)
    decode = timing.decode_ms_bulk(batches, None, np.full(batches.size, 3000.0), 0)
    prefill = np.array([timing.prefill_ms(n, 1, n, 0) for n in range(1, 9000, 7)])
    for between in (decode, prefill):  # up to floating-point rounding inside flat cells
        assert (np.diff(between) >= -1e-12 * between[1:]).all()


def test_real_table_hits_the_sdk_where_the_sdk_is_monotone(qwen_spec):
    """On the 1-D weights-pass table: a grid point keeps the SDK's answer exactly when no
    earlier point is above it and no later point below it; elsewhere it moves by at most half
    that dip."""
    t = load_table(qwen_spec)
    handle = sdk.engine(qwen_spec)
    with sdk.quiet():
        answers = [handle.mixed_step_breakdown(int(x), 0, int(x), 2)[1] for x in t.shared_tokens]
    for i, answer in enumerate(answers):
        upper, lower = max(answers[: i + 1]), min(answers[i:])
        if upper == lower == answer:
            assert t.shared_ms[i] == answer
        else:
            assert abs(t.shared_ms[i] - answer) <= (upper - lower) / 2 + 1e-12


def test_real_table_at_static_batch_grid_points_is_close_to_direct_sdk_calls(qwen_spec):
    # Batches and context lengths of a static parity run, all on the grid.
    timing = AicTiming(load_table(qwen_spec))
    handle = sdk.engine(qwen_spec)
    with sdk.quiet():
        for batch, isl in ((1, 4096), (8, 1024), (64, 256)):
            assert timing.prefill_ms(batch * isl, batch, isl, 0) == pytest.approx(
                handle.predict_prefill_latency(batch, isl, 0), rel=0.03
            )
            assert timing.decode_ms(batch, 0, float(isl), 0) == pytest.approx(
                handle.predict_decode_latency(batch, isl), rel=0.03
            )


@pytest.mark.parametrize(
    "change",
    [
        {"system": "b200_sxm"},
        {"backend": "sglang"},
        {"backend_version": "next"},
        {"model": "Qwen/Qwen3-8B"},
        {"tp_size": 2},
        {"kvcache_quant_mode": "fp8"},
        {"gemm_quant_mode": "fp8"},
        {"fmha_quant_mode": "fp8"},
        {"comm_quant_mode": "fp8"},
    ],
)
def test_cache_key_changes_with_every_spec_field(change):
    base = {"model": "Qwen/Qwen3-32B", "system": "h200_sxm"}
    a, b = parse_aic_spec(base), parse_aic_spec({**base, **change})
    bounds = GridBounds(1024, 1 << 18, 65536)
    assert table_key(a, bounds) != table_key(b, bounds)


def test_cache_key_changes_with_moe_split_bounds_format_and_sdk_version(monkeypatch):
    moe = {"model": "Qwen/Qwen3-30B-A3B", "system": "h200_sxm", "tp_size": 2}
    bounds = GridBounds(1024, 1 << 18, 65536)
    tp_split = parse_aic_spec(moe)
    ep_split = parse_aic_spec({**moe, "moe_ep_size": 2})
    assert table_key(tp_split, bounds) != table_key(ep_split, bounds)
    key = table_key(tp_split, bounds)
    assert table_key(tp_split, GridBounds(2048, 1 << 18, 65536)) != key
    assert table_key(tp_split, GridBounds(1024, 1 << 19, 65536)) != key
    assert table_key(tp_split, GridBounds(1024, 1 << 18, 131072)) != key
    monkeypatch.setattr(table, "TABLE_FORMAT", table.TABLE_FORMAT + 1)
    assert table_key(tp_split, bounds) != key
    monkeypatch.setattr(table, "TABLE_FORMAT", table.TABLE_FORMAT - 1)
    monkeypatch.setattr(sdk, "sdk_version", lambda: "0.0.1")
    assert table_key(tp_split, bounds) != key


def test_a_cached_table_is_read_back_without_the_sdk(monkeypatch, tmp_path, qwen_spec):
    monkeypatch.setenv("PLANSIM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(table, "grid_bounds", lambda spec: SMALL)
    fake = FakeHandle()
    monkeypatch.setattr(sdk, "engine", lambda spec: fake)
    first = load_table(qwen_spec)
    calls = fake.calls
    second = load_table(qwen_spec)
    assert fake.calls == calls  # no SDK call the second time
    assert second.key == first.key and np.array_equal(second.decode_ms, first.decode_ms)
    assert len(list((tmp_path / "aic").glob("*.npz"))) == 1


def test_an_unreadable_cache_file_is_rebuilt(monkeypatch, tmp_path, qwen_spec):
    monkeypatch.setenv("PLANSIM_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(table, "grid_bounds", lambda spec: SMALL)
    monkeypatch.setattr(sdk, "engine", lambda spec: FakeHandle())
    path = table.cache_path(qwen_spec, table_key(qwen_spec, SMALL))
    path.parent.mkdir(parents=True)
    path.write_bytes(b"not an npz")
    assert load_table(qwen_spec).decode_ms.shape == (
        octave_axis(1, 8, 4, successors=True).size,
        octave_axis(1, 64, 4).size,
    )
