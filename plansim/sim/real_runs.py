"""Real serving runs (``shared/reference/real_runs.json``): read them, build the workload and the
one-worker deployment each describes, and compare a replay's statistics with the measured ones.

A runs file holds ``about`` and ``runs``; a run names its model, GPU, TP, engine limits
(``server``), the client's shared-prefix data config as the profile asked for it
(``workload_profile_yaml``) and as the client resolved it
(``resolved_client_config_shared_prefix``), its constant-rate ``load.stages`` and, per stage,
the ``measured`` statistics (ms). The two data configs are the two prefix-group readings
(``READINGS``).

Measured TPOT: the client that recorded these runs stamped every streamed one-token chunk
``recorded_timestamps_per_token`` times (inference-perf counted each chunk's tokens with a BOS,
fixed upstream in its PR #566), so its TPOT of a request of ``n`` tokens with mean gap ``g`` is
``(n - 1) g / (k n - 1)``, and half its ITLs are 0. :func:`measured_gap_ms` undoes that, so
TPOT is compared as plansim defines it: a request's mean inter-token gap.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import ValidationError

from plansim.configfile import read_config
from plansim.errors import ConfigError
from plansim.traces.shared_prefix import RateStage, SharedPrefixSpec
from plansim.validation import StrictModel, config_error

READINGS = ("resolved", "profile")
STATS = ("mean", "median", "p90")


class _Dist(StrictModel):
    mean: float
    median: float | None = None
    min: float | None = None
    max: float | None = None
    p10: float | None = None
    p90: float | None = None
    p95: float | None = None
    p99: float | None = None


class _Throughput(StrictModel):
    input_tokens_per_sec: float
    output_tokens_per_sec: float
    total_tokens_per_sec: float
    requests_per_sec: float


class Measured(StrictModel):
    """One stage's measured statistics (latencies in ms)."""

    requests: int
    successes: int
    failures: int
    requested_rate_rps: float | None = None
    achieved_rate_rps: float | None = None
    send_duration_s: float | None = None
    prompt_len_tokens: _Dist
    output_len_tokens: _Dist
    e2e_ms: _Dist
    ttft_ms: _Dist
    tpot_ms: _Dist
    itl_ms: _Dist
    throughput: _Throughput


class _Stage(StrictModel):
    stage_index: int
    duration: float
    rate: float
    measured: Measured


class _Server(StrictModel):
    max_model_len: int
    max_num_batched_tokens: int
    max_num_seqs: int


class _ProfilePrefix(StrictModel):
    enable_multi_turn_chat: bool = False
    num_unique_system_prompts: int
    num_users_per_system_prompt: int
    output_len: int
    question_len: int
    system_prompt_len: int


class _Profile(StrictModel):
    shared_prefix: _ProfilePrefix
    type: str


class _ResolvedPrefix(StrictModel):
    num_groups: int
    num_prompts_per_group: int
    system_prompt_len: int
    question_len: int
    output_len: int


class _LoadStage(StrictModel):
    duration: float
    rate: float


class _Load(StrictModel):
    stages: list[_LoadStage]
    type: str


class RealRun(StrictModel):
    """One run of a runs file (descriptive keys are read and kept, not interpreted)."""

    id: str
    source: str
    model: str
    gpu: str
    tp: int
    engine: str
    dtype: str
    server: _Server
    server_source: str
    server_notes: str
    client: str
    workload_profile_yaml: _Profile
    load: _Load
    resolved_client_config_shared_prefix: _ResolvedPrefix
    stages: list[_Stage]
    summary_measured: Measured
    replay_caveats: list[str]

    def rate_stages(self) -> list[RateStage]:
        return [RateStage(s.rate, s.duration) for s in self.stages]

    def workload_spec(self, reading: str, questions: str = "repeat") -> SharedPrefixSpec:
        """The shared-prefix config of ``reading`` (``resolved`` or ``profile``), with the
        measured template overhead: the first stage's mean prompt length less system prompt
        and question."""
        resolved = self.resolved_client_config_shared_prefix
        profile = self.workload_profile_yaml.shared_prefix
        if reading == "resolved":
            groups, users = resolved.num_groups, resolved.num_prompts_per_group
        elif reading == "profile":
            groups, users = profile.num_unique_system_prompts, profile.num_users_per_system_prompt
        else:
            raise ValueError(f"reading must be one of {', '.join(READINGS)}, got {reading!r}")
        template = round(
            self.stages[0].measured.prompt_len_tokens.mean
            - resolved.system_prompt_len
            - resolved.question_len
        )
        return SharedPrefixSpec(
            groups,
            users,
            resolved.system_prompt_len,
            resolved.question_len,
            resolved.output_len,
            template_tokens=max(0, template),
            questions=questions,
        )

    def overloaded(self, stage: int) -> bool:
        """Whether the stage's measurement lost requests (timeouts under overload)."""
        m = self.stages[stage].measured
        return m.failures > 0 or m.successes < m.requests


class _RunsFile(StrictModel):
    about: str
    runs: list[RealRun]


def load_runs(path: str | Path) -> list[RealRun]:
    """The runs of a runs file; ``ConfigError`` naming the file and field on bad input."""
    source = Path(path)
    data = read_config(source, what="runs file")
    try:
        runs = _RunsFile.model_validate(data).runs
    except ValidationError as exc:
        raise config_error(exc, source=str(source)) from None
    for i, run in enumerate(runs):
        if [(s.duration, s.rate) for s in run.stages] != [
            (s.duration, s.rate) for s in run.load.stages
        ]:
            raise ConfigError(
                "stages differ from load.stages", source=str(source), field=f"runs.{i}.stages"
            )
    return runs


def measured_gap_ms(
    recorded_tpot_ms: float, output_tokens: int, timestamps_per_token: float = 2.0
) -> float:
    """The mean inter-token gap behind a recorded TPOT (see the module docstring)."""
    n = output_tokens
    if n <= 1:
        return float("nan")
    return recorded_tpot_ms * (timestamps_per_token * n - 1) / (n - 1)


@dataclass(frozen=True, slots=True)
class StageStats:
    """One stage's statistics, measured or simulated (ms, requests/s); ``lost``: the share of
    its requests that did not finish (measured failures, or simulated requests over the
    client's timeout)."""

    ttft_mean: float
    ttft_median: float
    ttft_p90: float
    tpot_mean: float
    tpot_p90: float
    e2e_mean: float
    e2e_p90: float
    requests_per_s: float
    lost: float

    def delayed(self, first_token_ms: float) -> StageStats:
        """These statistics with every request's first token (so its last) ``first_token_ms``
        later: TTFT and E2E statistics move by it, TPOT and throughput stay."""
        d = first_token_ms
        return replace(
            self,
            ttft_mean=self.ttft_mean + d,
            ttft_median=self.ttft_median + d,
            ttft_p90=self.ttft_p90 + d,
            e2e_mean=self.e2e_mean + d,
            e2e_p90=self.e2e_p90 + d,
        )

    def errors(self, other: StageStats) -> dict[str, float]:
        """|self - other| / other in percent, per latency and throughput field."""
        out = {}
        for name in self.__dataclass_fields__:
            if name == "lost":
                continue
            ref = getattr(other, name)
            out[name] = abs(getattr(self, name) - ref) / ref * 100.0 if ref else float("nan")
        return out


def measured_stats(run: RealRun, stage: int, timestamps_per_token: float = 2.0) -> StageStats:
    m = run.stages[stage].measured
    n = run.resolved_client_config_shared_prefix.output_len
    return StageStats(
        m.ttft_ms.mean,
        float(m.ttft_ms.median),
        float(m.ttft_ms.p90),
        measured_gap_ms(m.tpot_ms.mean, n, timestamps_per_token),
        measured_gap_ms(float(m.tpot_ms.p90), n, timestamps_per_token),
        m.e2e_ms.mean,
        float(m.e2e_ms.p90),
        m.throughput.requests_per_sec,
        (m.requests - m.successes) / m.requests if m.requests else 0.0,
    )


def simulated_stats(
    requests: Any, start_s: float, end_s: float, *, timeout_s: float | None = None
) -> StageStats:
    """Statistics of the requests of a replay's ``requests`` table that arrived in
    ``[start_s, end_s)``; with ``timeout_s``, requests whose E2E exceeds it (or that never
    finished) count as lost and, as in the client, are left out of the latencies. Throughput
    as the client reports it: the finished requests over the time from the first arrival to
    the last completion."""
    arrival = requests["arrival_ms"].to_numpy() / 1000.0
    rows = requests[(arrival >= start_s) & (arrival < end_s)]
    e2e = rows["e2e_latency_ms"].to_numpy()
    ok = np.isfinite(e2e)
    if timeout_s is not None:
        ok &= e2e <= timeout_s * 1000.0
    good = rows[ok]
    ttft = good["ttft_ms"].to_numpy()
    tpot = good["tpot_ms"].to_numpy()
    e2e = good["e2e_latency_ms"].to_numpy()
    if ttft.size == 0:
        nan = float("nan")
        return StageStats(nan, nan, nan, nan, nan, nan, nan, 0.0, 1.0 if len(rows) else 0.0)
    arrival_ms = good["arrival_ms"].to_numpy()
    span_s = (float(np.max(arrival_ms + e2e)) - float(rows["arrival_ms"].min())) / 1000.0
    return StageStats(
        float(ttft.mean()),
        float(np.median(ttft)),
        float(np.percentile(ttft, 90)),
        float(np.nanmean(tpot)),
        float(np.nanpercentile(tpot, 90)),
        float(e2e.mean()),
        float(np.percentile(e2e, 90)),
        ttft.size / span_s,
        1.0 - ttft.size / len(rows),
    )
