"""Workloads of inference-perf's ``shared_prefix`` generator at constant-rate stages.

The generator (kubernetes-sigs/inference-perf, ``datagen/shared_prefix_datagen.py``) makes
``num_groups`` system prompts of ``system_prompt_tokens`` random tokens and, for each, the
questions of ``prompts_per_group`` users of ``question_tokens``; a prompt is its group's system
prompt then a user's question. The prompt list is shuffled once and request ``i`` of a stage
sends prompt ``i mod (num_groups x prompts_per_group)`` (every stage starts again at prompt 0),
each asking for ``output_tokens`` tokens (the server ignores end-of-sequence, so every request
generates them all).

A ``constant`` load stage (inference-perf's ``loadgen/load_timer.py``, ``ConstantLoadTimer``)
sends ``floor(rate x duration)`` requests whose gaps are exponential draws of mean ``1 / rate``
scaled to add up to the duration: the last request goes at the stage's end (``spacing=
"exponential"``; ``"even"``: ``1 / rate`` apart from the stage's start). The client waits for a
stage's requests to finish, and its ``interval``, before the next stage starts: ``gap_s``
after the stage's end.

``SharedPrefixSpec.questions`` says what repeats: ``repeat`` (the generator's rule: a prompt
comes back whole every ``num_groups x prompts_per_group`` requests, so a prefix cache that keeps
it serves all of it again) or ``fresh`` (every request has a question of its own and shares only
its group's system prompt). ``template_tokens`` are the tokens a measured prompt has beyond
system prompt and question (a template, re-tokenisation); they sit after the system prompt and
are not shared.

Blocks of ``block_size`` tokens get prefix-chain ids (``plansim.traces.workload``): the
``floor(system_prompt_tokens / block_size)`` whole system-prompt blocks are shared by the group,
every later block belongs to its prompt (``repeat``) or its request (``fresh``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import numpy as np

from plansim.traces.request_ids import ordinal_ids
from plansim.traces.workload import Workload


@dataclass(frozen=True, slots=True)
class SharedPrefixSpec:
    """One shared-prefix data config (token counts per prompt part)."""

    num_groups: int
    prompts_per_group: int
    system_prompt_tokens: int
    question_tokens: int
    output_tokens: int
    template_tokens: int = 0
    questions: Literal["repeat", "fresh"] = "repeat"

    def __post_init__(self) -> None:
        for name in ("num_groups", "prompts_per_group", "output_tokens"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        for name in ("system_prompt_tokens", "question_tokens", "template_tokens"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be at least 0, got {getattr(self, name)}")
        if self.questions not in ("repeat", "fresh"):
            raise ValueError(f"questions must be repeat or fresh, got {self.questions!r}")

    @property
    def prompt_tokens(self) -> int:
        return self.system_prompt_tokens + self.template_tokens + self.question_tokens

    @property
    def prompts(self) -> int:
        return self.num_groups * self.prompts_per_group


@dataclass(frozen=True, slots=True)
class RateStage:
    """A constant-rate load stage: ``rate_rps`` for ``duration_s``."""

    rate_rps: float
    duration_s: float

    @property
    def requests(self) -> int:
        return int(self.rate_rps * self.duration_s)


Spacing = Literal["exponential", "even"]


def stage_starts_s(
    stages: list[RateStage] | tuple[RateStage, ...], gap_s: float = 0.0
) -> np.ndarray:
    """When each stage starts (s from 0), ``gap_s`` after the end of the one before, and when
    the last one's gap ends: ``len(stages) + 1`` values."""
    return np.concatenate([[0.0], np.cumsum([s.duration_s + gap_s for s in stages])])


def _stage_offsets_s(stage: RateStage, spacing: Spacing, rng: np.random.Generator) -> np.ndarray:
    n = stage.requests
    if spacing == "even":
        return np.arange(n, dtype=np.float64) / stage.rate_rps
    gaps = rng.exponential(1.0 / stage.rate_rps, n)
    return np.cumsum(gaps * (stage.duration_s / gaps.sum())) if n else gaps


def shared_prefix_workload(
    spec: SharedPrefixSpec,
    stages: list[RateStage] | tuple[RateStage, ...],
    *,
    block_size: int = 16,
    seed: int = 0,
    spacing: Spacing = "exponential",
    gap_s: float = 0.0,
) -> Workload:
    """The requests the generator sends over ``stages`` (module docstring); the prompt order
    and the exponential gaps are drawn with ``seed``. Request ids are ``"0"``, ``"1"``, ... in
    arrival order."""
    if block_size < 1:
        raise ValueError(f"block_size must be at least 1, got {block_size}")
    if spacing not in ("exponential", "even"):
        raise ValueError(f"spacing must be exponential or even, got {spacing!r}")
    if gap_s < 0:
        raise ValueError(f"gap_s must be at least 0, got {gap_s}")
    rng = np.random.default_rng(seed)
    order = rng.permutation(spec.prompts)
    starts = stage_starts_s(stages, gap_s)
    arrival_s = np.concatenate(
        [start + _stage_offsets_s(stage, spacing, rng) for start, stage in zip(starts, stages)]
        or [np.zeros(0)]
    )
    n = arrival_s.size
    index = np.concatenate([np.arange(stage.requests) for stage in stages] or [np.zeros(0, int)])
    prompt = order[index % spec.prompts]
    group = prompt // spec.prompts_per_group

    shared = spec.system_prompt_tokens // block_size
    blocks = -(-spec.prompt_tokens // block_size)
    own = blocks - shared
    # Shared blocks: ids 0 .. G*shared-1; a prompt's own blocks (or a request's, for fresh
    # questions) follow. Each id names its whole prefix, so these are prefix-chain ids.
    owner = prompt if spec.questions == "repeat" else np.arange(n)
    base_own = spec.num_groups * shared
    ids = np.empty((n, blocks), dtype=np.int64)
    ids[:, :shared] = group[:, None] * shared + np.arange(shared)
    ids[:, shared:] = base_own + owner[:, None] * own + np.arange(own)
    return Workload(
        arrival_ms=arrival_s * 1000.0,
        isl_tokens=np.full(n, spec.prompt_tokens, dtype=np.int64),
        osl_tokens=np.full(n, spec.output_tokens, dtype=np.int64),
        request_id=ordinal_ids(0, n),
        hash_offsets=np.arange(n + 1, dtype=np.int64) * blocks,
        hash_ids=ids.ravel(),
        trace_block_size=block_size,
        sources=(f"shared_prefix:seed={seed}",),
    )
