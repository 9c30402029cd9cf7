"""Assembling a replay's result: the request overhead the client sees outside the engines."""

from __future__ import annotations

import pytest

from tests.sim.simkit import decode_ms, prefill_ms, req, run

LONE = [(0.0, 1000, 3, [1, 2])]  # one 1000-token prompt, three output tokens


def test_request_overhead_adds_to_ttft_and_e2e_but_not_to_tpot():
    plain = run(LONE)
    late = run(LONE, request_overhead_ms=30.0)
    # The engine is untouched: one prefill pass, then two decode passes.
    assert req(plain, 0)["ttft_ms"] == pytest.approx(prefill_ms(1000))
    assert req(late, 0)["ttft_ms"] == pytest.approx(prefill_ms(1000) + 30.0)
    assert req(late, 0)["e2e_latency_ms"] == pytest.approx(req(plain, 0)["e2e_latency_ms"] + 30.0)
    assert req(late, 0)["tpot_ms"] == pytest.approx(req(plain, 0)["tpot_ms"])
    assert req(late, 0)["tpot_ms"] == pytest.approx(
        (decode_ms(1001) + decode_ms(1002)) / 2, rel=1e-6
    )


def test_request_overhead_counts_against_the_ttft_bound_of_goodput():
    bound = prefill_ms(1000) + 20.0
    sla = {"ttft_ms": bound}
    assert run(LONE, sla=sla).summary["goodput_completed_requests"] == 1
    late = run(LONE, sla=sla, request_overhead_ms=30.0).summary
    assert late["goodput_completed_requests"] == 0
    assert late["median_ttft_ms"] == pytest.approx(prefill_ms(1000) + 30.0)
