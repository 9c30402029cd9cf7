"""Deployment config: reference engine keys and defaults, Dynamo engine-args files accepted
unchanged, overrides, and every bad value failing with the key named."""

from __future__ import annotations

import json

import pytest

from plansim.errors import ConfigError
from plansim.sim.deployment import (
    EngineArgs,
    build_deployment,
    load_deployment,
    load_engine_args,
    with_overrides,
)


def test_engine_defaults_are_the_reference_mocker_defaults():
    e = EngineArgs()
    assert (e.block_size, e.num_gpu_blocks, e.max_num_seqs, e.max_num_batched_tokens) == (
        64,
        16384,
        256,
        8192,
    )
    assert e.enable_prefix_caching and e.enable_chunked_prefill
    assert (e.preemption_mode, e.speedup_ratio, e.decode_speedup_ratio, e.dp_size) == (
        "lifo",
        1.0,
        1.0,
        1,
    )
    assert e.effective_timing.type == "polynomial"


def test_dynamo_extra_engine_args_file_loads_unchanged(tmp_path):
    path = tmp_path / "args.json"
    path.write_text(
        json.dumps(
            {
                "num_gpu_blocks": 2048,
                "block_size": 32,
                "watermark": 0.01,
                "aic_tp_size": 4,
                "dp_size": 2,
                "zmq_kv_events_port": 5557,
                "kv_transfer_bytes_per_token": 1024,
            }
        )
    )
    e = load_engine_args(path)
    assert (e.num_gpu_blocks, e.block_size, e.kv_bytes_per_token) == (2048, 32, 1024)
    assert e.gpus_per_worker == 8
    assert "watermark" in e.no_effect_keys and "dynamo.zmq_kv_events_port" in e.no_effect_keys


def test_wrapped_engine_form_and_overrides(tmp_path):
    path = tmp_path / "dep.yaml"
    path.write_text("mode: agg\nnum_workers: 2\nengine:\n  engine:\n    max_num_seqs: 8\n")
    d = load_deployment(path, {"router.mode": "kv_router", "engine.num_gpu_blocks": 100})
    assert (d.num_workers, d.engine.max_num_seqs, d.engine.num_gpu_blocks) == (2, 8, 100)
    assert d.router.mode == "kv_router"


def test_engine_may_name_an_engine_args_file(tmp_path):
    (tmp_path / "e.json").write_text('{"max_num_seqs": 4}')
    (tmp_path / "dep.yaml").write_text("engine: e.json\n")
    assert load_deployment(tmp_path / "dep.yaml").engine.max_num_seqs == 4


@pytest.mark.parametrize(
    "raw, field",
    [
        ({"num_workers": 0}, "num_workers"),
        ({"engine": {"block_size": 0}}, "engine.block_size"),
        ({"engine": {"speedup_ratio": -1}}, "engine.speedup_ratio"),
        ({"arrival_speedup_ratio": -2}, "arrival_speedup_ratio"),
        ({"engine": {"no_such_key": 1}}, "engine.no_such_key"),
        ({"surprise": 1}, "surprise"),
        ({"router": {"mode": "nearest"}}, "router.mode"),
        ({"engine": {"preemption_mode": "random"}}, "engine.preemption_mode"),
        ({"engine": {"planner_profile_data": "/missing.npz"}}, "engine.planner_profile_data"),
    ],
)
def test_bad_values_fail_naming_the_key(raw, field):
    with pytest.raises(ConfigError) as err:
        build_deployment(raw)
    assert err.value.field == field
    assert field in str(err.value)


@pytest.mark.parametrize(
    "timing, field",
    [
        ({"type": "polynomial", "path": "p.npz"}, "engine.timing_model.path"),
        (
            {"type": "fixed", "prefill_ms": 3, "decode_ms": 2, "callable": "m:f"},
            "engine.timing_model.callable",
        ),
        ({"type": "npz", "path": "p.npz", "decode_ms": 2}, "engine.timing_model.decode_ms"),
        (
            {"type": "python", "callable": "m:f", "provider": "dynamo_profile"},
            "engine.timing_model.provider",
        ),
    ],
)
def test_a_key_of_another_timing_type_is_refused(timing, field):
    with pytest.raises(ConfigError) as err:
        build_deployment({"engine": {"timing_model": timing}})
    assert err.value.field == field
    assert "not read by a timing model of type" in str(err.value)


def test_a_timing_key_left_null_is_not_a_foreign_key():
    # The reference's normaliser writes unset keys as null.
    d = build_deployment(
        {
            "engine": {
                "timing_model": {"type": "fixed", "prefill_ms": 3, "decode_ms": 2, "path": None}
            }
        }
    )
    assert d.engine.effective_timing.type == "fixed"


def test_disagg_pools_must_share_block_size():
    with pytest.raises(ConfigError):
        build_deployment(
            {
                "mode": "disagg",
                "prefill_engine": {"block_size": 32},
                "decode_engine": {"block_size": 64},
            }
        )


def test_unreadable_file_names_the_file(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_deployment(tmp_path / "nope.yaml")
    assert "nope.yaml" in str(err.value)


def _yaml(tmp_path, text):
    path = tmp_path / "deploy.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "mode: agg\nnum_prefill_workers: 3\n",
            "num_prefill_workers: only with mode disagg (the mode is agg)",
        ),
        ("num_decode_workers: 3\n", "num_decode_workers: only with mode disagg (the mode is agg)"),
        ("mode: disagg\nnum_workers: 4\n", "num_workers: only with mode agg (the mode is disagg)"),
    ],
)
def test_pool_keys_of_the_other_mode_contradict_the_file(tmp_path, text, message):
    path = _yaml(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_deployment(path)
    assert str(err.value) == f"{path}: {message}"


def test_a_flag_for_the_other_mode_names_the_flag(tmp_path):
    with pytest.raises(ConfigError) as err:
        load_deployment(
            None,
            {"mode": "agg", "num_prefill_workers": 2},
            flags={"num_prefill_workers": "--num-prefill-workers", "mode": "--mode"},
        )
    assert str(err.value) == "--num-prefill-workers: only with mode disagg (the mode is agg)"


def test_switching_to_disagg_needs_the_pool_sizes_when_the_file_sized_the_agg_pool(tmp_path):
    path = _yaml(tmp_path, "num_workers: 4\n")
    flags = {
        "mode": "--mode",
        "num_prefill_workers": "--num-prefill-workers",
        "num_decode_workers": "--num-decode-workers",
    }
    with pytest.raises(ConfigError) as err:
        load_deployment(path, {"mode": "disagg"}, flags=flags)
    assert str(err.value) == (
        f"--mode: {path} sizes the agg pools (num_workers 4), which mean nothing in disagg mode; "
        "give the disagg pool sizes with --num-prefill-workers and --num-decode-workers"
    )


def test_switching_mode_drops_the_files_other_pool_keys_with_a_warning(tmp_path, caplog):
    path = _yaml(tmp_path, "num_workers: 4\n")
    d = load_deployment(
        path,
        {"mode": "disagg", "num_prefill_workers": 2, "num_decode_workers": 3},
        flags={"mode": "--mode"},
    )
    assert d.pool_sizes() == {"prefill": 2, "decode": 3}
    assert f"{path}: num_workers: no effect with --mode disagg" in caplog.text


def test_flag_errors_name_the_flag_not_the_file(tmp_path):
    path = _yaml(tmp_path, "num_workers: 2\n")
    with pytest.raises(ConfigError) as err:
        load_deployment(path, {"num_workers": 0}, flags={"num_workers": "--num-workers"})
    assert str(err.value) == "--num-workers: input should be greater than or equal to 1, got 0"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("num_workers: true\n", "num_workers: expected a number, got true"),
        (
            "engine: {speedup_ratio: .inf}\n",
            "engine.speedup_ratio: input should be a finite number, got inf",
        ),
        ("sla: {ttft_ms: .nan}\n", "sla.ttft_ms: input should be a finite number, got NaN"),
        (
            "num_workers: 100000000\n",
            "num_workers: input should be less than or equal to 4096, got 100000000",
        ),
        (
            "seed: 99999999999999999999999\n",
            "seed: input should be less than or equal to "
            "9223372036854775807, got 99999999999999999999999",
        ),
        ("seed: -1\n", "seed: input should be greater than or equal to 0, got -1"),
    ],
)
def test_values_a_replay_cannot_use_are_refused(tmp_path, text, message):
    path = _yaml(tmp_path, text)
    with pytest.raises(ConfigError) as err:
        load_deployment(path)
    assert str(err.value) == f"{path}: {message}"


def test_engine_args_file_errors_name_that_file(tmp_path):
    args = tmp_path / "args.json"
    args.write_text('{"num_gpu_blocks": 0}')
    with pytest.raises(ConfigError) as err:
        load_deployment(None, {"engine": str(args)}, flags={"engine": "--extra-engine-args"})
    assert str(err.value) == (
        f"{args}: num_gpu_blocks: input should be greater than or equal to 1, got 0"
    )


def test_with_overrides_applies_dotted_keys_and_validates_again():
    base = build_deployment({"mode": "agg", "num_workers": 2, "engine": {"max_num_seqs": 8}})
    d = with_overrides(base, {"num_workers": 5, "engine.max_num_batched_tokens": 4096})
    assert (d.num_workers, d.engine.max_num_seqs, d.engine.max_num_batched_tokens) == (5, 8, 4096)
    assert base.num_workers == 2
    with pytest.raises(ConfigError, match=r"engine.nope: unknown key"):
        with_overrides(base, {"engine.nope": 1})
    with pytest.raises(ConfigError, match=r"engine.max_num_seqs"):
        with_overrides(base, {"engine.max_num_seqs": 0})


def test_with_overrides_on_an_inherited_pool_starts_from_engine():
    base = build_deployment({"mode": "disagg", "engine": {"max_num_seqs": 8, "block_size": 32}})
    d = with_overrides(base, {"prefill_engine.max_num_batched_tokens": 1024})
    assert d.prefill_args.max_num_batched_tokens == 1024
    assert (d.prefill_args.max_num_seqs, d.prefill_args.block_size) == (8, 32)
    assert d.decode_engine is None and d.decode_args.max_num_batched_tokens == 8192


def test_with_overrides_keeps_what_was_given_and_derives_the_rest_again():
    base = build_deployment({"mode": "disagg", "sla": {"ttft_ms": 100}})
    d = with_overrides(base, {"decode_engine.max_num_seqs": 4, "router.mode": "kv_router"})
    assert d.decode_args.max_num_seqs == 4 and d.prefill_engine is None
    assert d.no_effect_keys() == ()


def test_the_tpot_bound_is_also_read_under_the_reference_s_name():
    from plansim.sim.deployment import build_deployment

    assert build_deployment({"sla": {"itl_ms": 20}}).sla.tpot_ms == 20.0
    assert build_deployment({"sla": {"tpot_ms": 20, "itl_ms": 20}}).sla.tpot_ms == 20.0
    with pytest.raises(ConfigError, match=r"sla.itl_ms: the older spelling of tpot_ms"):
        build_deployment({"sla": {"tpot_ms": 20, "itl_ms": 30}})
    with pytest.raises(ConfigError, match=r"sla.itl_ms: expected a number, got true"):
        build_deployment({"sla": {"itl_ms": True}})


def test_a_knob_given_in_its_deprecated_spelling_survives_a_revalidation():
    from plansim.sim.deployment import (
        build_deployment,
        deployment_mapping,
        with_overrides,
    )

    dep = build_deployment({"router": {"mode": "kv_router", "overlap_score_weight": 2.0}})
    assert deployment_mapping(dep)["router"] == {"mode": "kv_router", "prefill_load_scale": 2.0}
    # A capacity variant or a recommended deployment is a revalidated copy: it keeps the weight.
    assert with_overrides(dep, {"num_workers": 3}).router.prefill_load_scale == 2.0
