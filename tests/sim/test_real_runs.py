"""Real runs files: reading them, the workload a run describes, the recorder's TPOT, and the
statistics of a stage."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from plansim.errors import ConfigError
from plansim.sim.real_runs import (
    StageStats,
    load_runs,
    measured_gap_ms,
    measured_stats,
    simulated_stats,
)

PUBLISHED = Path(__file__).resolve().parents[1] / "data" / "real_runs" / "real_runs.json"


def test_the_published_runs_read_as_their_configs_say():
    runs = {run.model: run for run in load_runs(PUBLISHED)}
    assert len(runs) == 4
    llama = runs["meta-llama/Llama-2-7b-hf"]
    assert (llama.tp, llama.server.max_num_batched_tokens, llama.server.max_num_seqs) == (
        1,
        2048,
        128,
    )
    resolved, profile = llama.workload_spec("resolved"), llama.workload_spec("profile")
    # results/config.yaml: 10 x 10; profile.yaml: 11 systems x 4 users; both 100 + 466 tokens.
    assert (resolved.num_groups, resolved.prompts_per_group) == (10, 10)
    assert (profile.num_groups, profile.prompts_per_group) == (11, 4)
    # Measured prompts of 591.63 tokens: round(591.63 - 100 - 466) = 26 template tokens.
    assert (resolved.template_tokens, resolved.prompt_tokens, resolved.output_tokens) == (
        26,
        592,
        247,
    )
    assert [(s.rate_rps, s.duration_s, s.requests) for s in llama.rate_stages()] == [
        (5, 600, 3000),
        (10, 600, 6000),
    ]
    code = runs["codellama/CodeLlama-34b-Instruct-hf"]
    # 150 + 600 tokens, 786.73 measured: 37 template tokens; one stage of 6 rps for 1,200 s.
    assert code.workload_spec("resolved").prompt_tokens == 787
    assert [s.requests for s in code.rate_stages()] == [7200]
    assert not any(run.overloaded(i) for run in runs.values() for i in range(len(run.stages)))


def test_the_recovered_gap_agrees_with_e2e_less_ttft_on_every_published_stage():
    # A request's mean gap is also (E2E - TTFT) / (n - 1); on the means of a stage the two
    # agree to within 1 % once the recorder's double count is undone (it halves TPOT).
    for run in load_runs(PUBLISHED):
        n = run.resolved_client_config_shared_prefix.output_len
        for i, stage in enumerate(run.stages):
            m = stage.measured
            from_e2e = (m.e2e_ms.mean - m.ttft_ms.mean) / (n - 1)
            assert measured_stats(run, i).tpot_mean == pytest.approx(from_e2e, rel=0.01)
            assert m.tpot_ms.mean == pytest.approx(from_e2e / 2, rel=0.01)


def _dist(mean, **more):
    return {"mean": mean, **more}


def _measured(requests=10, successes=10, failures=0, tpot=3.0):
    return {
        "requests": requests,
        "successes": successes,
        "failures": failures,
        "prompt_len_tokens": _dist(140.0),
        "output_len_tokens": _dist(9.0),
        "e2e_ms": _dist(500.0, median=490.0, p90=600.0),
        "ttft_ms": _dist(20.0, median=19.0, p90=30.0),
        "tpot_ms": _dist(tpot, median=tpot, p90=2 * tpot),
        "itl_ms": _dist(tpot, median=0.0),
        "throughput": {
            "input_tokens_per_sec": 1.0,
            "output_tokens_per_sec": 1.0,
            "total_tokens_per_sec": 2.0,
            "requests_per_sec": 2.0,
        },
    }


RUN = {
    "id": "r1",
    "source": "s",
    "model": "org/m",
    "gpu": "NVIDIA H100 80GB HBM3 (SXM)",
    "tp": 1,
    "engine": "vLLM",
    "dtype": "fp16",
    "server": {"max_model_len": 4096, "max_num_batched_tokens": 2048, "max_num_seqs": 128},
    "server_source": "x",
    "server_notes": "x",
    "client": "x",
    "workload_profile_yaml": {
        "type": "shared_prefix",
        "shared_prefix": {
            "enable_multi_turn_chat": True,
            "num_unique_system_prompts": 3,
            "num_users_per_system_prompt": 4,
            "output_len": 10,
            "question_len": 100,
            "system_prompt_len": 32,
        },
    },
    "load": {"type": "constant", "stages": [{"duration": 5, "rate": 2}]},
    "resolved_client_config_shared_prefix": {
        "num_groups": 10,
        "num_prompts_per_group": 10,
        "system_prompt_len": 32,
        "question_len": 100,
        "output_len": 10,
    },
    "stages": [{"stage_index": 0, "duration": 5, "rate": 2, "measured": _measured()}],
    "summary_measured": _measured(),
    "replay_caveats": [],
}


def _write(tmp_path, runs, about="a"):
    path = tmp_path / "runs.json"
    path.write_text(json.dumps({"about": about, "runs": runs}))
    return path


def test_the_two_prefix_group_readings_and_the_template_overhead(tmp_path):
    run = load_runs(_write(tmp_path, [RUN]))[0]
    resolved = run.workload_spec("resolved")
    profile = run.workload_spec("profile", "fresh")
    assert (resolved.num_groups, resolved.prompts_per_group) == (10, 10)
    assert (profile.num_groups, profile.prompts_per_group, profile.questions) == (3, 4, "fresh")
    # Measured prompts of 140 tokens less 32 system and 100 question tokens.
    assert resolved.template_tokens == 8 and resolved.prompt_tokens == 140
    assert resolved.output_tokens == 10
    assert [(s.rate_rps, s.duration_s, s.requests) for s in run.rate_stages()] == [(2, 5, 10)]


def test_an_unknown_reading_is_refused_and_a_short_prompt_has_no_template(tmp_path):
    short = copy.deepcopy(RUN)
    short["stages"][0]["measured"]["prompt_len_tokens"] = _dist(120.0)  # under 32 + 100
    run = load_runs(_write(tmp_path, [short]))[0]
    assert run.workload_spec("resolved").template_tokens == 0
    with pytest.raises(ValueError, match="reading must be one of resolved, profile"):
        run.workload_spec("config")


def test_the_recorders_double_count_is_undone():
    # n = 10 tokens with gaps g: recorded (n - 1) g / (2n - 1) = 9 g / 19.
    assert measured_gap_ms(9.0 / 19.0 * 4.0, 10) == pytest.approx(4.0)
    assert measured_gap_ms(4.0, 10, timestamps_per_token=1.0) == pytest.approx(4.0)
    assert np.isnan(measured_gap_ms(1.0, 1))


def test_measured_stats_and_lost_requests(tmp_path):
    lossy = copy.deepcopy(RUN)
    lossy["stages"][0]["measured"] = _measured(requests=10, successes=8, failures=2)
    run = load_runs(_write(tmp_path, [lossy]))[0]
    stats = measured_stats(run, 0)
    assert run.overloaded(0)
    assert stats.lost == pytest.approx(0.2)
    assert stats.tpot_mean == pytest.approx(3.0 * 19 / 9)
    assert stats.tpot_p90 == pytest.approx(6.0 * 19 / 9)  # the p90 is undone the same way
    assert (stats.ttft_mean, stats.e2e_p90, stats.requests_per_s) == (20.0, 600.0, 2.0)


def test_simulated_stats_take_the_stage_window_and_drop_timeouts():
    table = pd.DataFrame(
        {
            "arrival_ms": [0.0, 1000.0, 2000.0, 3000.0, 5000.0],
            "ttft_ms": [10.0, 20.0, 30.0, 40.0, 99.0],
            "tpot_ms": [1.0, 2.0, 3.0, 4.0, 9.0],
            "e2e_latency_ms": [100.0, 200.0, 9000.0, np.nan, 999.0],
        }
    )
    stats = simulated_stats(table, 0.0, 4.0, timeout_s=5.0)
    # Window [0, 4 s): four requests; one over the 5 s timeout, one unfinished.
    assert stats.lost == pytest.approx(0.5)
    assert (stats.ttft_mean, stats.tpot_mean, stats.e2e_mean) == (15.0, 1.5, 150.0)
    # Throughput as the client's: 2 finished from the first arrival (0) to the last end (1.2 s).
    assert stats.requests_per_s == pytest.approx(2 / 1.2)


def test_errors_and_a_first_token_delay():
    a = StageStats(10, 10, 20, 2, 3, 100, 200, 5, 0)
    b = StageStats(12, 9, 20, 3, 3, 110, 220, 5, 0)
    errors = b.errors(a)
    assert errors["ttft_mean"] == pytest.approx(20.0)
    assert errors["tpot_mean"] == pytest.approx(50.0)
    assert errors["e2e_p90"] == pytest.approx(10.0)
    later = a.delayed(5.0)
    assert (later.ttft_mean, later.ttft_p90, later.e2e_mean, later.tpot_mean) == (15, 25, 105, 2)


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda r: r.pop("tp"), "runs.0.tp"),
        (lambda r: r.update(extra=1), "runs.0.extra"),
        (lambda r: r["stages"][0]["measured"].update(requests=True), "runs.0.stages.0.measured"),
        (lambda r: r["stages"][0].update(rate=3), "runs.0.stages"),
    ],
)
def test_bad_runs_files_name_the_field(tmp_path, change, field):
    bad = copy.deepcopy(RUN)
    change(bad)
    with pytest.raises(ConfigError) as info:
        load_runs(_write(tmp_path, [bad]))
    assert field in str(info.value) and str(tmp_path) in str(info.value)


def test_an_unreadable_file_is_one_line(tmp_path):
    path = tmp_path / "runs.json"
    path.write_text("{not json")
    with pytest.raises(ConfigError, match=str(path)):
        load_runs(path)
    with pytest.raises(ConfigError, match="cannot read runs file"):
        load_runs(tmp_path / "missing.json")
