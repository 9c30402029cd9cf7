"""The aic spec: every field checked against AIConfigurator's support matrix, one line each."""

from __future__ import annotations

import csv
from pathlib import Path

import aiconfigurator_core
import pytest

from plansim.aic.spec import AicSpec, parse_aic_spec

MATRIX = Path(aiconfigurator_core.__file__).parent / "systems" / "support_matrix"


def _matrix_rows() -> list[dict[str, str]]:
    rows = []
    for path in MATRIX.glob("*.csv"):
        with path.open(newline="") as f:
            rows += [r for r in csv.DictReader(f) if r["Mode"] == "agg"]
    return rows


def test_an_unknown_system_lists_every_system_of_the_matrix():
    systems = sorted({r["System"] for r in _matrix_rows()})
    with pytest.raises(ValueError) as err:
        parse_aic_spec({"model": "Qwen/Qwen3-32B", "system": "h300"})
    message = str(err.value)
    assert message.startswith("system: 'h300' is not in AIConfigurator")
    assert message.endswith("supported systems: " + ", ".join(systems))
    assert "\n" not in message


def test_an_unknown_backend_lists_the_backends_of_that_system():
    backends = sorted({r["Backend"] for r in _matrix_rows() if r["System"] == "h200_sxm"})
    with pytest.raises(
        ValueError,
        match="^backend: 'tgi' is not supported on h200_sxm; "
        f"supported backends: {', '.join(backends)}$",
    ):
        parse_aic_spec({"model": "Qwen/Qwen3-32B", "system": "h200_sxm", "backend": "tgi"})


def test_an_unknown_model_lists_the_models_that_pass_on_that_system_and_backend():
    passing = sorted(
        {
            r["HuggingFaceID"]
            for r in _matrix_rows()
            if (r["System"], r["Backend"]) == ("b200_sxm", "sglang")
            and r["Status"] in ("PASS", "HYBRID_PASS")
        }
    )
    with pytest.raises(ValueError) as err:
        parse_aic_spec({"model": "acme/llm-1", "system": "b200_sxm", "backend": "sglang"})
    assert str(err.value).endswith("supported models: " + ", ".join(passing))


def test_a_version_outside_the_queryable_slots_names_the_slots():
    with pytest.raises(
        ValueError,
        match=r"^backend_version: '0\.1\.0' is not available for vllm "
        r"on h200_sxm; available: current \(",
    ):
        parse_aic_spec(
            {"model": "Qwen/Qwen3-32B", "system": "h200_sxm", "backend_version": "0.1.0"}
        )


def test_the_default_version_is_the_current_slot():
    spec = parse_aic_spec({"model": "Qwen/Qwen3-32B", "system": "h200_sxm"})
    current = {
        r["Version"] for r in _matrix_rows() if (r["System"], r["Backend"]) == ("h200_sxm", "vllm")
    }
    assert spec.backend_version == "current"
    assert spec.resolved_version in current


def test_tp_must_divide_the_published_attention_heads():
    # Qwen3-32B's config.json: num_attention_heads 64.
    with pytest.raises(
        ValueError, match="tp_size 3 does not divide Qwen/Qwen3-32B's 64 attention heads"
    ):
        parse_aic_spec({"model": "Qwen/Qwen3-32B", "system": "h200_sxm", "tp_size": 3})


def test_moe_split_defaults_to_tensor_parallel_experts_and_must_cover_the_width():
    spec = parse_aic_spec({"model": "Qwen/Qwen3-30B-A3B", "system": "h200_sxm", "tp_size": 4})
    assert spec.moe_split == (4, 1)
    spec = parse_aic_spec(
        {"model": "Qwen/Qwen3-30B-A3B", "system": "h200_sxm", "tp_size": 4, "moe_ep_size": 4}
    )
    assert spec.moe_split == (1, 4)
    with pytest.raises(ValueError, match="must equal tp_size x attention_dp_size = 4"):
        parse_aic_spec(
            {
                "model": "Qwen/Qwen3-30B-A3B",
                "system": "h200_sxm",
                "tp_size": 4,
                "moe_tp_size": 2,
                "moe_ep_size": 4,
            }
        )


def test_a_quant_mode_must_be_one_of_the_sdk_modes():
    with pytest.raises(
        ValueError, match=r"^gemm_quant_mode: 'fp9' is not a gemm_quant_mode; choose one of "
    ):
        parse_aic_spec({"model": "Qwen/Qwen3-32B", "system": "h200_sxm", "gemm_quant_mode": "fp9"})


def test_unknown_keys_are_refused():
    with pytest.raises(ValueError, match=r"^tensor_parallel: unknown key$"):
        parse_aic_spec({"model": "Qwen/Qwen3-32B", "system": "h200_sxm", "tensor_parallel": 2})


def test_specs_are_hashable_and_equal_by_value():
    a = parse_aic_spec({"model": "Qwen/Qwen3-32B", "system": "h200_sxm"})
    b = AicSpec(model="Qwen/Qwen3-32B", system="h200_sxm")
    assert a == b and hash(a) == hash(b)


CONFIGS = Path(__file__).resolve().parents[1] / "data" / "model_configs"


def test_a_local_config_folder_is_a_model_outside_the_matrix(tmp_path):
    # Llama-2-7B is in no support matrix; its config.json in a folder is accepted.
    folder = tmp_path / "llama"
    folder.mkdir()
    config = (CONFIGS / "meta-llama--Llama-2-7b-hf" / "config.json").read_bytes()
    (folder / "config.json").write_bytes(config)
    spec = parse_aic_spec({"model": str(folder), "system": "h100_sxm", "backend": "vllm"})
    first = spec.identity()["model_config_sha256"]
    # The table cache key follows the file's content, not only its path.
    (folder / "config.json").write_bytes(
        config.replace(b'"num_hidden_layers": 32', b'"num_hidden_layers": 16')
    )
    assert spec.identity()["model_config_sha256"] != first
    with pytest.raises(ValueError, match="tp_size 3 does not divide"):
        parse_aic_spec(
            {
                "model": str(CONFIGS / "meta-llama--Llama-2-7b-hf"),
                "system": "h100_sxm",
                "tp_size": 3,
            }
        )


def test_a_folder_without_a_config_is_still_checked_against_the_matrix(tmp_path):
    with pytest.raises(ValueError, match="is not supported by AIConfigurator"):
        parse_aic_spec({"model": str(tmp_path), "system": "h100_sxm", "backend": "vllm"})
