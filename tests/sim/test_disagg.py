"""Disaggregated prefill -> decode: the prefill worker's token is internal, the decode worker's
first pass makes the first visible token (decode-visible TTFT), plus the KV handoff delay."""

from __future__ import annotations

import pytest
from simkit import decode_ms, prefill_ms, req, run

DISAGG = {"mode": "disagg", "num_prefill_workers": 1, "num_decode_workers": 1}


def test_ttft_is_prefill_then_one_decode_pass_on_the_decode_worker():
    r = run([(0.0, 2000, 30, [1, 2, 3, 4])], **DISAGG)
    row = req(r, 0)
    ttft = prefill_ms(2000) + decode_ms(2000)
    assert row.ttft_ms == pytest.approx(ttft, abs=1e-6)
    assert row.ttst_ms == pytest.approx(decode_ms(2001), abs=1e-6)
    assert row.output_length == 30
    assert row.admission_count == 2
    assert (row.prefill_worker, row.decode_worker) == (0, 1)


def test_kv_handoff_delay_is_input_tokens_times_bytes_over_bandwidth():
    engine = {"kv_bytes_per_token": 1000, "kv_transfer_bandwidth": 10.0}
    r = run(
        [(0.0, 2000, 5, [1, 2, 3, 4])],
        **DISAGG,
        prefill_engine={**engine, "worker_type": "prefill"},
        decode_engine={"worker_type": "decode"},
    )
    delay = 2000 * 1000 / (10.0 * 1e9) * 1000  # 0.2 ms
    assert req(r, 0).ttft_ms == pytest.approx(prefill_ms(2000) + delay + decode_ms(2000), abs=1e-6)


def test_worker_seconds_count_both_pools():
    r = run([(0.0, 1000, 3, [1, 2])], **DISAGG)
    duration_s = r.summary["duration_ms"] / 1000
    assert r.summary["prefill_worker_seconds"] == pytest.approx(duration_s)
    assert r.summary["decode_worker_seconds"] == pytest.approx(duration_s)
    assert r.summary["gpu_hours"] == pytest.approx(2 * duration_s / 3600)


def test_reuse_is_what_the_prefill_admission_found_not_the_decode_cache():
    # Round robin sends B to the second prefill worker (nothing cached there); the one decode
    # worker still holds A's prompt blocks when B's transferred prompt arrives.
    rows = [(0.0, 2048, 2, [1, 2, 3, 4]), (1000.0, 2048, 2, [1, 2, 3, 5])]
    r = run(rows, mode="disagg", num_prefill_workers=2, num_decode_workers=1)
    assert req(r, 1).prefill_worker != req(r, 0).prefill_worker
    assert req(r, 1).reused_input_tokens == 0
    assert r.summary["prefix_cache_reused_ratio"] == 0.0


def test_destination_missing_charges_only_the_prompt_blocks_the_decode_rank_lacks():
    # The decode rank still caches A's prompt when B arrives: B shares A's first three
    # 512-token blocks, so its handoff moves 2048 - 1536 = 512 tokens instead of 2048.
    rows = [(0.0, 2048, 2, [1, 2, 3, 4]), (1000.0, 2048, 2, [1, 2, 3, 5])]
    engine = {"kv_bytes_per_token": 1000, "kv_transfer_bandwidth": 10.0}

    def ttfts(mode: str) -> tuple[float, float]:
        prefill = {**engine, "worker_type": "prefill", "kv_transfer_timing_mode": mode}
        r = run(rows, **DISAGG, prefill_engine=prefill, decode_engine={"worker_type": "decode"})
        return req(r, 0).ttft_ms, req(r, 1).ttft_ms

    full_a, full_b = ttfts("full_prompt")
    missing_a, missing_b = ttfts("destination_missing")
    ms_per_token = 1000 / (10.0 * 1e9) * 1000
    assert missing_a == pytest.approx(full_a, abs=1e-9)  # nothing cached on arrival: all moves
    assert full_b - missing_b == pytest.approx(1536 * ms_per_token, abs=1e-9)


def test_the_decode_rank_is_chosen_and_loaded_as_the_prefill_ends():
    # A's 8192-token handoff takes 81.92 ms; B's and C's 512-token ones 5.12 ms and land first.
    # A is counted on its decode rank from its prefill's end, so load-only decode routing sends
    # B and then C (8 blocks beside A's 128) to the other rank; routed on landing, C would go
    # to the rank without B.
    rows = [(0.0, 8192, 200, list(range(1, 17))), (1.0, 512, 200, [100]), (2.0, 512, 200, [200])]
    prefill = {"kv_bytes_per_token": 10_000, "kv_transfer_bandwidth": 1.0, "worker_type": "prefill"}
    r = run(
        rows,
        mode="disagg",
        num_prefill_workers=1,
        num_decode_workers=2,
        router={"mode": "kv_router"},
        prefill_engine=prefill,
        decode_engine={"worker_type": "decode"},
    )
    a, b, c = (req(r, i).decode_worker for i in range(3))
    assert b == c != a
