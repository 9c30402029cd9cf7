"""The ``aic`` table written, through the ``aic`` timing model, as the reference mocker's NPZ
profile.

Arrays (the form ``timing_model: {type: npz}``, ``planner_profile_data``, Dynamo's
``--planner-profile-data`` and the planner's ``profile_results_dir`` read):

- ``prefill_isl`` (tokens) and ``prefill_ttft_ms``: one request prefilled without a cached prefix,
  at the table's token points up to the context length;
- ``decode_active_kv_tokens`` x ``decode_context_length`` -> ``decode_itl`` (ms): a decode step of
  ``active / context`` requests (at least one) at that context, the table's batch interpolated.

The NPZ form has no batch or prefix axis for prefill and no mixed passes, so an engine timed by
the profile is coarser than one timed by ``type: aic`` itself.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from plansim.aic.table import PER_OCTAVE, AicTable, octave_axis
from plansim.io import atomic_open
from plansim.sim.timing.aic import AicTiming


def profile_arrays(table: AicTable, *, max_batch: int, max_context: int) -> dict[str, np.ndarray]:
    """The NPZ arrays of ``table`` for engines of up to ``max_batch`` requests and
    ``max_context`` tokens of context."""
    timing = AicTiming(table)
    isl = table.prefill_tokens[table.prefill_tokens <= max_context]
    ttft = np.array([timing.prefill_ms(int(n), 1, float(n), 0.0) for n in isl])
    context = table.decode_context[table.decode_context <= max_context]
    active = octave_axis(1, max_batch * int(context[-1]), PER_OCTAVE)
    kv, ctx = np.meshgrid(active, context, indexing="ij")
    batch = np.maximum(1.0, kv / ctx)
    itl = timing.decode_ms_bulk(batch.ravel(), kv.ravel(), ctx.ravel(), 0).reshape(kv.shape)
    return {
        "prefill_isl": isl,
        "prefill_ttft_ms": ttft,
        "decode_active_kv_tokens": active,
        "decode_context_length": context,
        "decode_itl": itl,
    }


def write_profile(path: str | Path, arrays: dict[str, np.ndarray]) -> Path:
    """Write ``arrays`` as an NPZ file atomically."""
    with atomic_open(path) as f:
        np.savez(f, **arrays)
    return Path(path)
