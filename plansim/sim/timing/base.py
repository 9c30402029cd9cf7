"""What a pass-time model is, and what a ``timing_model.type`` contributes.

A ``TimingModel`` has ``prefill_ms(new_tokens, batch_size, mean_isl, mean_prefix)`` (0 when there
are no new tokens) and ``decode_ms(batch_size, active_kv_tokens, mean_context, total_kv_tokens)``
(never under ``MIN_DECODE_MS``), plus ``decode_ms_bulk`` taking numpy arrays of the same
arguments, which the engine uses to time a run of decode-only passes in one call. Times are
milliseconds, before the engine's speedup ratios.

A model whose decode time depends on a pass's KV tokens alone may also offer
``decode_ms_by_kv(active_kv_tokens, total_kv_tokens)``: ``decode_ms`` of an array of KV token
counts, whatever the batch and mean context (the engine then tabulates quantised decode times
by KV tokens, ``plansim.sim.decode_table``, and times decode runs from the table). A model
whose decode time depends on the batch size too may offer ``decode_ms_by_batch(batch_size,
active_kv_tokens, total_kv_tokens)``: ``decode_ms`` of one batch size over an array of KV token
counts, each with mean context ``kv // batch_size`` (tabulated by batch size and KV tokens).

A model may also offer ``mixed_decode_ms(batch_size, active_kv_tokens, mean_context,
total_kv_tokens, prefill_tokens)``: the time decode requests add to a pass that also prefills
``prefill_tokens`` tokens. Without it a mixed pass costs ``prefill_ms + decode_ms``.

A ``TimingKind`` is one ``timing_model.type`` of the engine args: it checks that a spec
(``plansim.sim.deployment.TimingModelSpec``) has what the type needs, names the NPZ file it
reads (checked when the deployment is built), and builds the model; keys of its own are
declared once, as its ``Params``, and become ``timing_model`` fields. A type whose settings are a
model of their own, written beside ``type`` (``aic``), turns them into its shared key and back
(``from_written``, ``to_written``) and may take defaults from the engine (``engine_defaults``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, Protocol

import numpy as np

from plansim.params import NoParams

MIN_DECODE_MS = 1.0


class TimingModel(Protocol):
    def prefill_ms(
        self, new_tokens: int, batch_size: int, mean_isl: float, mean_prefix: float
    ) -> float: ...

    def decode_ms(
        self, batch_size: int, active_kv_tokens: int, mean_context: float, total_kv_tokens: int
    ) -> float: ...

    def decode_ms_bulk(
        self,
        batch_size: np.ndarray,
        active_kv_tokens: np.ndarray,
        mean_context: np.ndarray,
        total_kv_tokens: int,
    ) -> np.ndarray: ...


class TimingKind:
    """Base of a ``timing_model.type``; see the module docstring. ``Params``: the keys of its own
    the type adds to ``timing_model`` (a parameter dataclass, ``plansim.params``; ``fixed``
    declares ``prefill_ms`` and ``decode_ms``), beyond the shared ``type``, ``path``,
    ``provider``, ``config`` and ``aic``. ``shared_keys``: which of those shared keys the type
    reads; a spec that sets any other key (its own or another type's) is refused."""

    Params: ClassVar[type] = NoParams
    shared_keys: ClassVar[frozenset[str]] = frozenset()

    def from_written(self, data: Mapping[str, Any]) -> Mapping[str, Any]:
        """The spec's fields from a ``timing_model`` mapping as written (``ValueError`` when
        the type cannot be used); the default: as written."""
        return data

    def to_written(self, spec: Any, data: dict[str, Any]) -> dict[str, Any]:
        """A dump of ``spec`` (``data``) as it would be written; the default: the dump."""
        return data

    def engine_defaults(self, data: Mapping[str, Any], backend: Any) -> Mapping[str, Any]:
        """A ``timing_model`` mapping as written, with what the type takes from the engine when
        the mapping leaves it out (``backend``: the engine's); the default: nothing."""
        return data

    def check(self, spec: Any) -> None:
        """Raise ``ValueError`` (its message says what is missing) for an incomplete spec."""
        return None

    def npz_path(self, spec: Any) -> str | None:
        """The NPZ profile the model reads, if any."""
        return None

    def build(self, spec: Any) -> TimingModel:
        raise NotImplementedError
