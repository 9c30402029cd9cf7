"""`plansim profile aic`: an NPZ profile from flags or a deployment file; one-line mistakes."""

from __future__ import annotations

from pathlib import Path

import numpy as np

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_profile_aic_writes_the_npz_the_npz_model_reads(run_cli, tmp_path):
    out = tmp_path / "qwen.npz"
    code, stdout, err = run_cli(
        "profile",
        "aic",
        "--model",
        "Qwen/Qwen3-32B",
        "--system",
        "h200_sxm",
        "--max-num-seqs",
        "16",
        "--max-context",
        "4096",
        "-o",
        str(out),
    )
    assert code == 0, err
    assert stdout.startswith(f"wrote {out}: Qwen/Qwen3-32B on h200_sxm (vllm ")
    with np.load(out) as z:
        assert set(z.files) == {
            "prefill_isl",
            "prefill_ttft_ms",
            "decode_active_kv_tokens",
            "decode_context_length",
            "decode_itl",
        }
        assert z["decode_active_kv_tokens"][-1] == 16 * z["decode_context_length"][-1]


def test_profile_aic_takes_the_engine_of_a_deployment_file(run_cli, tmp_path):
    out = tmp_path / "deploy.npz"
    code, stdout, err = run_cli(
        "profile", "aic", "--config", str(EXAMPLES / "deploy-aic.yaml"), "-o", str(out)
    )
    assert code == 0, err
    assert "Qwen/Qwen3-32B on h200_sxm (vllm" in stdout and "TP 2" in stdout and out.is_file()


def test_a_bad_flag_value_is_one_line_naming_the_flag(run_cli, tmp_path):
    code, _, err = run_cli(
        "profile",
        "aic",
        "--model",
        "Qwen/Qwen3-32B",
        "--system",
        "h300",
        "-o",
        str(tmp_path / "x.npz"),
    )
    assert code == 2 and err.startswith("plansim: --system: 'h300' is not in AIConfigurator")
    assert err.count("\n") == 1 and not (tmp_path / "x.npz").exists()


def test_a_deployment_without_an_aic_model_is_refused(run_cli, tmp_path):
    code, _, err = run_cli(
        "profile", "aic", "--config", str(EXAMPLES / "deploy.yaml"), "-o", str(tmp_path / "x.npz")
    )
    assert code == 2
    assert err == (
        f"plansim: {EXAMPLES / 'deploy.yaml'}: timing_model: the agg engine's timing "
        "model is 'polynomial', not aic\n"
    )


def test_config_and_spec_flags_do_not_mix(run_cli, tmp_path):
    code, _, err = run_cli(
        "profile",
        "aic",
        "--config",
        str(EXAMPLES / "deploy-aic.yaml"),
        "--model",
        "Qwen/Qwen3-8B",
        "-o",
        str(tmp_path / "x.npz"),
    )
    assert code == 2 and err == "plansim: --config: give --config or --model, not both\n"
