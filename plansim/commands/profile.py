"""`plansim profile` commands: engine timing profiles without a GPU.

``plansim profile aic --model M --system S [--backend B] [--tp-size N] ... -o profile.npz``
``plansim profile aic --config deploy.yaml [--pool agg|prefill|decode] -o profile.npz``

writes AIConfigurator's estimates for that model, GPU system, backend and parallelism as the
reference mocker's NPZ profile (``plansim.sim.timing.aic_profile``): what
``timing_model: {type: npz}``, ``planner_profile_data``, Dynamo's ``--planner-profile-data`` and
the planner's ``profile_results_dir`` read, so the planner's pre-deployment perf model can
bootstrap from it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from plansim.commands import console
from plansim.commands.console import QuietOption
from plansim.commands.progress import Progress
from plansim.errors import InputError
from plansim.roles import Role

app = typer.Typer(help="Write engine timing profiles without a GPU.", no_args_is_help=True)

# AicSpec field -> the option that sets it.
SPEC_OPTIONS = {
    "model": "--model",
    "system": "--system",
    "backend": "--backend",
    "backend_version": "--backend-version",
    "tp_size": "--tp-size",
    "attention_dp_size": "--attention-dp-size",
    "moe_tp_size": "--moe-tp-size",
    "moe_ep_size": "--moe-ep-size",
    "gemm_quant_mode": "--gemm-quant-mode",
    "kvcache_quant_mode": "--kvcache-quant-mode",
    "fmha_quant_mode": "--fmha-quant-mode",
    "moe_quant_mode": "--moe-quant-mode",
    "comm_quant_mode": "--comm-quant-mode",
}
DEFAULT_MAX_NUM_SEQS = 256


@app.callback()
def _group() -> None:
    """Write engine timing profiles without a GPU."""


@app.command()
def aic(
    output: Annotated[Path, typer.Option("--output", "-o", help="NPZ file to write.")],
    config: Annotated[
        Path | None,
        typer.Option(
            "--config",
            help="Deployment file whose engine has an aic timing model (instead of "
            "--model, --system, ...).",
        ),
    ] = None,
    pool: Annotated[
        str, typer.Option(help="With --config: the engine of pool agg, prefill or decode.")
    ] = "agg",
    model: Annotated[str | None, typer.Option(help="HuggingFace id, e.g. Qwen/Qwen3-32B.")] = None,
    system: Annotated[str | None, typer.Option(help="GPU system, e.g. h200_sxm.")] = None,
    backend: Annotated[str | None, typer.Option(help="vllm (default), sglang or trtllm.")] = None,
    backend_version: Annotated[
        str | None,
        typer.Option(help="current (default), previous, next, or the version one of them names."),
    ] = None,
    tp_size: Annotated[int | None, typer.Option(help="Tensor parallel size (default 1).")] = None,
    attention_dp_size: Annotated[
        int | None, typer.Option(help="Attention data-parallel size.")
    ] = None,
    moe_tp_size: Annotated[int | None, typer.Option(help="MoE tensor-parallel size.")] = None,
    moe_ep_size: Annotated[int | None, typer.Option(help="MoE expert-parallel size.")] = None,
    gemm_quant_mode: Annotated[str | None, typer.Option(help="GEMM precision, e.g. fp8.")] = None,
    kvcache_quant_mode: Annotated[
        str | None, typer.Option(help="KV cache precision, e.g. fp8.")
    ] = None,
    fmha_quant_mode: Annotated[str | None, typer.Option(help="Attention precision.")] = None,
    moe_quant_mode: Annotated[str | None, typer.Option(help="MoE precision.")] = None,
    comm_quant_mode: Annotated[str | None, typer.Option(help="Communication precision.")] = None,
    max_num_seqs: Annotated[
        int | None,
        typer.Option(
            min=1,
            help=f"Largest decode batch the profile covers (default: the engine's, else "
            f"{DEFAULT_MAX_NUM_SEQS}).",
        ),
    ] = None,
    max_context: Annotated[
        int | None,
        typer.Option(
            min=1,
            help="Longest context the profile covers (default: the engine's max_model_len, "
            "else the model's context length).",
        ),
    ] = None,
    quiet: QuietOption = False,
) -> int:
    """Write AIConfigurator's estimates for a model on a GPU as an NPZ timing profile."""
    from plansim.aic.sdk import require_sdk, sdk_version
    from plansim.aic.table import grid_bounds, load_table
    from plansim.sim.timing.aic_profile import profile_arrays, write_profile

    given = {
        field: value
        for field, value in (
            ("model", model),
            ("system", system),
            ("backend", backend),
            ("backend_version", backend_version),
            ("tp_size", tp_size),
            ("attention_dp_size", attention_dp_size),
            ("moe_tp_size", moe_tp_size),
            ("moe_ep_size", moe_ep_size),
            ("gemm_quant_mode", gemm_quant_mode),
            ("kvcache_quant_mode", kvcache_quant_mode),
            ("fmha_quant_mode", fmha_quant_mode),
            ("moe_quant_mode", moe_quant_mode),
            ("comm_quant_mode", comm_quant_mode),
        )
        if value is not None
    }
    require_sdk()
    engine_seqs = engine_context = None
    if config is not None:
        if given:
            raise InputError(
                f"give --config or {SPEC_OPTIONS[next(iter(given))]}, not both", field="--config"
            )
        spec, engine_seqs, engine_context = _spec_from_config(config, pool)
    else:
        spec = _spec_from_options(given)
    # Only a table not in the cache yet is asked of the SDK, row by row (seconds to minutes).
    with Progress("aic table", total=None, unit="rows", quiet=quiet) as bar:
        table = load_table(spec, on_rows=lambda done, total: bar.update(done, total=total))
    context = max_context or engine_context or grid_bounds(spec).max_context
    arrays = profile_arrays(
        table, max_batch=max_num_seqs or engine_seqs or DEFAULT_MAX_NUM_SEQS, max_context=context
    )
    write_profile(output, arrays)
    kv, ctx = arrays["decode_itl"].shape
    console.result(
        f"wrote {output}: {spec.label}, AIConfigurator {sdk_version()}; prefill "
        f"{arrays['prefill_isl'].size} ISLs up to {int(arrays['prefill_isl'][-1]):,}, "
        f"decode {kv} active-KV x {ctx} context points"
    )
    return console.finish(
        {
            "output": str(output),
            "model": spec.label,
            "aiconfigurator": sdk_version(),
            "prefill_isl_points": int(arrays["prefill_isl"].size),
            "max_isl_tokens": int(arrays["prefill_isl"][-1]),
            "decode_active_kv_points": int(kv),
            "decode_context_points": int(ctx),
        }
    )


def _spec_from_options(given: dict):
    from plansim.aic.spec import parse_aic_spec

    for needed in ("model", "system"):
        if needed not in given:
            raise InputError("required without --config", field=SPEC_OPTIONS[needed])
    try:
        return parse_aic_spec(given)
    except ValueError as exc:
        field, _, reason = str(exc).partition(": ")
        raise InputError(reason, field=SPEC_OPTIONS.get(field, field)) from None


def _spec_from_config(config: Path, pool: str):
    from plansim.sim.deployment import load_deployment

    if pool not in tuple(Role):
        raise InputError(f"unknown pool {pool!r}; choose {', '.join(Role)}", field="--pool")
    args = load_deployment(config).pool_args(pool)
    timing = args.effective_timing
    if timing.aic is None:
        raise InputError(
            f"the {pool} engine's timing model is {timing.type!r}, not aic",
            source=str(config),
            field="timing_model",
        )
    return timing.aic, args.max_num_seqs, args.max_model_len
