"""The public traces carried in tests/data/traces (gzip copies of the shared traces) load with the
figures their SOURCES.md states."""

from __future__ import annotations

from pathlib import Path

import pytest

from plansim.traces import load_workload
from plansim.traces.stats import describe

TRACES = Path(__file__).resolve().parents[1] / "data" / "traces"


def test_azure_code_trace():
    d = describe(load_workload(TRACES / "AzureLLMInferenceTrace_code.csv.gz"))
    # SOURCES.md: 8,819 rows, ~57 min, 2.57 req/s; ContextTokens mean 2,048, median 1,469,
    # max 7,437; GeneratedTokens mean 28, median 13, max 1,899.
    assert d["requests"] == 8_819
    assert d["span_s"] == pytest.approx(3_436, abs=1)
    assert d["mean_rate_rps"] == pytest.approx(2.57, abs=0.01)
    assert d["isl_tokens"]["mean"] == pytest.approx(2_048, abs=1)
    assert (d["isl_tokens"]["p50"], d["isl_tokens"]["max"]) == (1_469, 7_437)
    assert d["osl_tokens"]["mean"] == pytest.approx(28, abs=0.5)
    assert (d["osl_tokens"]["p50"], d["osl_tokens"]["max"]) == (13, 1_899)
    assert d["prefix_reuse_upper_bound"] == 0.0


@pytest.mark.parametrize(
    "name", ["mooncake_synthetic_trace.jsonl.gz", "mooncake_synthetic.dynamo.jsonl.gz"]
)
def test_mooncake_synthetic_trace_in_both_formats(name):
    d = describe(load_workload(TRACES / name))
    # SOURCES.md: 3,993 rows, ~17 min, 3.91 req/s, input mean 15,325, median 11,587, max
    # 191,378; output mean 149, median 69, max 893; 64% of block references repeat.
    assert d["requests"] == 3_993
    assert d["span_s"] == pytest.approx(17 * 60, abs=30)
    assert d["mean_rate_rps"] == pytest.approx(3.91, abs=0.01)
    assert d["isl_tokens"]["mean"] == pytest.approx(15_325, abs=1)
    assert (d["isl_tokens"]["p50"], d["isl_tokens"]["max"]) == (11_587, 191_378)
    assert d["osl_tokens"]["mean"] == pytest.approx(149, abs=0.5)
    assert (d["osl_tokens"]["p50"], d["osl_tokens"]["max"]) == (69, 893)
    assert d["prefix_reuse_upper_bound"] == pytest.approx(0.64, abs=0.005)
    assert d["trace_block_size"] == 512


def test_both_mooncake_copies_share_the_same_prefix_structure():
    a = load_workload(TRACES / "mooncake_synthetic_trace.jsonl.gz")
    b = load_workload(TRACES / "mooncake_synthetic.dynamo.jsonl.gz")
    assert (b.arrival_ms - 1_764_000_000_000).tolist() == a.arrival_ms.tolist()
    assert a.hash_ids.tolist() == b.hash_ids.tolist()
