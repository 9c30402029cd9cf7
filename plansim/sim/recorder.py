"""What a replay records: per-request times and counts, token gaps as weighted samples, and the
per-second time series of each pool. Tokens are only recorded where the user sees them (the
aggregated or decode worker); a disaggregated prefill worker's token is internal.
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from plansim.result_table import Table
from plansim.roles import Role
from plansim.sim import batch as soa
from plansim.sim.cluster import DRAINING, READY, STARTING

NAN = float("nan")
_COMPACT_AT = 1 << 20
_FLUSH_RUNS_AT = 1 << 16
# Gap values up to this many microseconds per sample above the smallest are totalled by counting
# over their span (linear, and no more memory than the samples); the rest by sorting.
DENSE_SPAN_PER_SAMPLE = 1
# The time-series table's sampled columns (``plansim.sim.result``); ``output_tok_s`` follows.
TIMESERIES_DTYPES = (
    ("time_s", np.float64),
    ("pool", str),
    ("ready", np.int64),
    ("starting", np.int64),
    ("draining", np.int64),
    ("running", np.int64),
    ("waiting", np.int64),
    ("queued_prefill_tokens", np.int64),
    ("kv_usage", np.float64),
    ("prefix_reuse", np.float64),
    ("arrivals", np.int64),
)


def _mean(values: list[float]) -> float:
    """``np.mean`` of a list (0 for none), in plain Python up to 128 values with numpy's own
    summation order, so the float is the same: below 8 values one left-to-right sum; up to 128
    (numpy's pairwise block) eight running sums over the multiples of 8, combined as
    ``((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))``, then the rest added in order."""
    n = len(values)
    if not n:
        return 0.0
    if n < 8:
        return sum(values) / n
    if n > 128:
        return float(np.mean(values))
    r0, r1, r2, r3, r4, r5, r6, r7 = values[:8]
    whole = n - n % 8
    for i in range(8, whole, 8):
        a0, a1, a2, a3, a4, a5, a6, a7 = values[i : i + 8]
        r0 += a0
        r1 += a1
        r2 += a2
        r3 += a3
        r4 += a4
        r5 += a5
        r6 += a6
        r7 += a7
    total = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    for v in values[whole:]:
        total += v
    return total / n


@dataclass(frozen=True, slots=True)
class Completion:
    """One completed request as the planner observes it: prompt and output tokens, cached
    prompt tokens, TTFT and mean gap between its tokens (ms; NaN when undefined)."""

    rid: int
    isl_tokens: int
    output_tokens: int
    cached_tokens: int
    ttft_ms: float
    itl_ms: float


class Recorder:
    """Per-request lists indexed by request ordinal ``rid``; every time is virtual ms from the
    first arrival (NaN until it happens)."""

    def __init__(
        self,
        n: int,
        arrival_ms: np.ndarray,
        isl: np.ndarray,
        *,
        release_ms: np.ndarray | None = None,
    ) -> None:
        """``arrival_ms``: when each request enters the cluster (filled in as they do for a
        closed-loop or capped replay); ``release_ms``: when each became eligible (``None``:
        at its arrival)."""
        self.arrival = arrival_ms
        self.release = release_ms
        self.isl = isl
        self.keys: list[list[int] | None] = [None] * n
        self.first_admit = [NAN] * n
        # Token stamps are arrays: a pass stamps all its requests with a few array operations.
        self.first_token = np.full(n, NAN)
        self.second_token = np.full(n, NAN)
        self.last_token = np.full(n, NAN)
        self.n_tokens = np.zeros(n, dtype=np.int64)
        self.reused = [0] * n
        self.admissions = [0] * n
        self.readmissions = [0] * n
        self.prefill_worker = [-1] * n
        self.decode_worker = [-1] * n
        self.status = ["incomplete"] * n
        self.reason = [""] * n
        # Token gaps as weighted samples: gap value i occurred gap_count[i] times. Requests
        # that emitted in the same earlier pass share one sample.
        self.gap_value = array("d")
        self.gap_count = array("q")
        # Compacted gaps: distinct values in whole microseconds and their counts. The
        # reference keeps ITL in a DDSketch of 0.1% relative error; 1 us is finer for any gap
        # above 1 ms, and keeps memory bounded by the number of distinct gaps, not tokens.
        self._gap_us = np.zeros(0, dtype=np.int64)
        self._gap_us_count = np.zeros(0, dtype=np.int64)
        # Visible output tokens per virtual second (index = floor(ms / 1000)).
        self._tok_per_s = np.zeros(1024)
        # Time-series counters per pool, since the last sample: arrivals, admitted input
        # tokens, reused tokens.
        self._arrived: dict[str, int] = {}
        self._admitted_tokens: dict[str, int] = {}
        self._reused_tokens: dict[str, int] = {}
        # One tuple a pool a sample, in ``TIMESERIES_DTYPES``' column order.
        self._samples: list[tuple] = []
        # Runs not yet totalled (``_flush_runs``): their pass ends, how many and their requests,
        # and their passes in all.
        self._run_ends: list[list[float] | np.ndarray] = []
        self._run_lengths: list[int] = []
        self._run_requests: list[int] = []
        self._run_passes = 0

    # ---------------------------------------------------------------- events

    def arrived(self, pool: str) -> None:
        self._arrived[pool] = self._arrived.get(pool, 0) + 1

    def admitted(
        self, rid: int, pool: str, now: float, reused: int, readmission: bool, prebuilt: bool
    ) -> None:
        if math.isnan(self.first_admit[rid]):  # first admission of this request
            self.first_admit[rid] = now
        self.admissions[rid] += 1
        if readmission:
            self.readmissions[rid] += 1
        if not prebuilt:
            # Reuse is what a prompt admission found cached; a transferred prompt's decode
            # admission computes nothing, as the reference reports it.
            if reused > self.reused[rid]:
                self.reused[rid] = reused
            self._admitted_tokens[pool] = self._admitted_tokens.get(pool, 0) + self.isl.item(rid)
            self._reused_tokens[pool] = self._reused_tokens.get(pool, 0) + reused

    def tokens(
        self, rids: list[int] | np.ndarray, end: float, counts: list[int] | None = None
    ) -> list[int]:
        """One pass's visible tokens: one for each request of ``rids`` (distinct ids; a list or
        an int64 array), or ``counts[i]`` for ``rids[i]`` (a speculative pass; tokens emitted
        together are 0 ms apart); returns the ids whose first token this was."""
        if type(rids) is list:
            if counts is not None:
                return self._burst_tokens(rids, end, counts)
            if len(rids) < soa.SCALAR_ROWS:
                return self._few_tokens(rids, end)
            rids = np.array(rids, dtype=np.int64)
        elif counts is not None:
            return self._burst_tokens(rids.tolist(), end, counts)
        elif rids.shape[0] < soa.SCALAR_ROWS:
            return self._few_tokens(rids.tolist(), end)
        n_tokens = self.n_tokens
        k = n_tokens[rids]
        k += 1
        n_tokens[rids] = k
        last = self.last_token
        previous = last[rids]
        last[rids] = end
        first: list[int] = []
        # First and second tokens: a few of the pass's requests, taken one by one.
        early = np.flatnonzero(k <= 2)
        if early.shape[0]:
            once = []
            for i in early.tolist():
                rid = rids.item(i)
                if k.item(i) == 1:
                    self.first_token[rid] = end
                    first.append(rid)
                    once.append(i)
                else:
                    self.second_token[rid] = end
            if once:
                # A first token has no gap before it.
                keep = np.ones(previous.shape[0], dtype=bool)
                keep[once] = False
                previous = previous[keep]
        self._gaps(end, previous)
        self._count_tokens(end, rids.shape[0])
        return first

    def _few_tokens(self, rids: list[int], end: float) -> list[int]:
        """``tokens`` for a few requests, element by element (the same stamps and gaps)."""
        first = []
        n_tokens = self.n_tokens
        last = self.last_token
        previous = []
        for rid in rids:
            k = n_tokens.item(rid) + 1
            n_tokens[rid] = k
            if k == 1:
                self.first_token[rid] = end
                first.append(rid)
            else:
                if k == 2:
                    self.second_token[rid] = end
                previous.append(last.item(rid))
            last[rid] = end
        self._few_gaps(end, previous)
        self._count_tokens(end, len(rids))
        return first

    def _few_gaps(self, end: float, previous: list[float]) -> None:
        """``_gaps`` for a few previous times (a list): the same samples in the same order (one
        per distinct time, ascending)."""
        if not previous:
            return
        t0 = previous[0]
        if previous.count(t0) == len(previous):
            self.gap_value.append(end - t0)
            self.gap_count.append(len(previous))
            return
        counts: dict[float, int] = {}
        for t in previous:
            counts[t] = counts.get(t, 0) + 1
        for t in sorted(counts):
            self.gap_value.append(end - t)
            self.gap_count.append(counts[t])

    def _gaps(self, end: float, previous: np.ndarray) -> None:
        """Token gaps ending at ``end`` from the requests' previous token times: one weighted
        sample per distinct previous time (requests that emitted together share it)."""
        if not previous.shape[0]:
            return
        t0 = previous[0]
        if not np.count_nonzero(previous != t0):  # one previous time (count_nonzero: cheap)
            self.gap_value.append(end - float(t0))
            self.gap_count.append(previous.shape[0])
            return
        times, counts = np.unique(previous, return_counts=True)
        self.gap_value.frombytes((end - times).tobytes())
        self.gap_count.frombytes(counts.astype(np.int64).tobytes())

    def _burst_tokens(self, rids: list[int], end: float, counts: list[int]) -> list[int]:
        first = []
        n_tokens = self.n_tokens
        last = self.last_token
        zero_gaps = 0
        for rid, c in zip(rids, counts):
            k0 = int(n_tokens[rid])
            n_tokens[rid] = k0 + c
            if k0 == 0:
                self.first_token[rid] = end
                first.append(rid)
            else:
                self.gap_value.append(end - float(last[rid]))
                self.gap_count.append(1)
            if k0 < 2 <= k0 + c:
                self.second_token[rid] = end
            zero_gaps += c - 1
            last[rid] = end
        if zero_gaps:
            self.gap_value.append(0.0)
            self.gap_count.append(zero_gaps)
        self._count_tokens(end, sum(counts))
        return first

    def run(
        self,
        rids: list[int] | np.ndarray,
        ends: list[float] | np.ndarray,
        first_ms: float | None = None,
    ) -> None:
        """A run of passes: every request of ``rids`` (a list for a short batch, an int64
        array for a long one) emits one token at ``first_ms`` unless it is None, then one at
        each of ``ends`` (a list for a short run, an array for a long one); its first token
        possibly at the first of them."""
        n = len(rids)
        if first_ms is None:
            m = len(ends)
            e0 = float(ends[0])
            e1 = ends[1] if m > 1 else None
        else:
            # The first stamp's gap to the next and its tokens are counted here; the run's
            # own are totalled with the other runs' (``_flush_runs``: sums, in any order).
            m = len(ends) + 1
            e0 = first_ms
            e1 = float(ends[0])
            self.gap_value.append(e1 - e0)
            self.gap_count.append(n)
            self._count_tokens(e0, n)
        e_last = float(ends[-1])
        n_tokens = self.n_tokens
        if type(rids) is list:
            first = self.first_token
            second = self.second_token
            last = self.last_token
            previous = []
            for rid in rids:
                k = n_tokens.item(rid)
                if k == 0:
                    first[rid] = e0
                    if m > 1:
                        second[rid] = e1
                else:
                    if k == 1:
                        second[rid] = e0
                    previous.append(last.item(rid))
                n_tokens[rid] = k + m
                last[rid] = e_last
            self._few_gaps(e0, previous)
        else:
            k = n_tokens[rids]
            self.second_token[rids[k == 1]] = e0
            fresh = k == 0
            if np.count_nonzero(fresh):
                self.first_token[rids[fresh]] = e0
                if m > 1:
                    self.second_token[rids[fresh]] = e1
                self._gaps(e0, self.last_token[rids[~fresh]])
            else:
                self._gaps(e0, self.last_token[rids])
            n_tokens[rids] = k + m
            self.last_token[rids] = e_last
        # The gaps between the run's passes and its tokens per second are totalled for many
        # runs at once (``_flush_runs``): both are sums, whatever their order.
        passes = len(ends)
        self._run_ends.append(ends)
        self._run_lengths.append(passes)
        self._run_requests.append(n)
        self._run_passes += passes
        if self._run_passes >= _FLUSH_RUNS_AT:
            self._flush_runs()

    def _flush_runs(self) -> None:
        """The runs recorded since the last flush: each gap between consecutive passes of a run
        as a sample weighted by the run's requests, and their tokens per virtual second."""
        if not self._run_ends:
            return
        lengths = np.array(self._run_lengths, dtype=np.int64)
        ns = np.array(self._run_requests, dtype=np.int64)
        ends = np.concatenate(self._run_ends, dtype=np.float64)
        self._run_ends = []
        self._run_lengths = []
        self._run_requests = []
        self._run_passes = 0
        within = np.ones(ends.shape[0] - 1, dtype=bool)
        within[np.cumsum(lengths[:-1]) - 1] = False  # a run's last end to the next's first
        self.gap_value.frombytes(np.diff(ends)[within].tobytes())
        self.gap_count.frombytes(np.repeat(ns, lengths - 1).tobytes())
        if len(self.gap_value) >= _COMPACT_AT:
            self._compact_gaps()
        secs = (ends // 1000.0).astype(np.int64)
        per_s = np.bincount(secs, weights=np.repeat(ns, lengths))
        self._grow(per_s.shape[0] - 1)
        self._tok_per_s[: per_s.shape[0]] += per_s

    def _count_tokens(self, end: float, k: int) -> None:
        sec = int(end // 1000.0)
        if sec >= self._tok_per_s.shape[0]:
            self._grow(sec)
        per_s = self._tok_per_s
        per_s[sec] = per_s.item(sec) + k  # the same float sum, without numpy scalars

    def _grow(self, sec: int) -> None:
        if sec >= self._tok_per_s.shape[0]:
            bigger = np.zeros(max(2 * self._tok_per_s.shape[0], sec + 1))
            bigger[: self._tok_per_s.shape[0]] = self._tok_per_s
            self._tok_per_s = bigger

    def completion(self, rid: int) -> Completion:
        """Request ``rid``'s figures so far (for the planner host, at its completion)."""
        k = self.n_tokens[rid]
        itl = (self.last_token[rid] - self.first_token[rid]) / (k - 1) if k > 1 else NAN
        return Completion(
            rid=rid,
            isl_tokens=int(self.isl[rid]),
            output_tokens=k,
            cached_tokens=self.reused[rid],
            ttft_ms=self.first_token[rid] - self.arrival[rid],
            itl_ms=itl,
        )

    def completed(self, rid: int) -> None:
        self.status[rid] = "completed"

    def rejected(self, rid: int, reason: str) -> None:
        self.status[rid] = "rejected"
        self.reason[rid] = reason

    # ---------------------------------------------------------------- time series

    def sample(self, now: float, pools: Mapping[Role, Any]) -> None:
        """One time-series row per pool at virtual time ``now`` (ms; stored as ``time_s``):
        workers by state, and the ``occupancy`` of the ranks still serving (ready or draining;
        KV usage over ready ones)."""
        samples = self._samples
        arrived, admitted_tokens, reused_tokens = (
            self._arrived,
            self._admitted_tokens,
            self._reused_tokens,
        )
        for name, pool in pools.items():
            ready = starting = draining = running = waiting = queued = 0
            kv = []
            for w in pool.workers:
                state = w.state
                if state == READY:
                    ready += 1
                elif state == DRAINING:
                    draining += 1
                else:
                    starting += state == STARTING
                    continue
                for r in w.ranks:
                    n_running, n_waiting, n_queued, kv_usage = r.occupancy()
                    running += n_running
                    waiting += n_waiting
                    queued += n_queued
                    if state == READY:
                        kv.append(kv_usage)
            admitted = admitted_tokens.get(name, 0)
            # A row in ``TIMESERIES_DTYPES``' column order.
            samples.append(
                (
                    now / 1000.0,
                    name.value,
                    ready,
                    starting,
                    draining,
                    running,
                    waiting,
                    queued,
                    _mean(kv),
                    reused_tokens.get(name, 0) / admitted if admitted else 0.0,
                    arrived.get(name, 0),
                )
            )
        arrived.clear()
        admitted_tokens.clear()
        reused_tokens.clear()

    def timeseries_table(self, visible_pool: Role) -> Table:
        """The samples as a table; ``output_tok_s`` on ``visible_pool``'s rows (the pool whose
        tokens the user sees)."""
        self._flush_runs()
        samples = self._samples
        columns = list(zip(*samples)) if samples else [()] * len(TIMESERIES_DTYPES)
        table = Table(
            {
                name: np.array(column, dtype=dtype)
                for (name, dtype), column in zip(TIMESERIES_DTYPES, columns)
            }
        )
        rates = np.zeros(len(samples))
        if samples:
            # The sample at second s reports the tokens emitted during second s - 1.
            mask = table["pool"] == visible_pool.value
            sec = np.floor(table["time_s"][mask]).astype(np.int64) - 1
            counts = self._tok_per_s
            inside = (sec >= 0) & (sec < counts.shape[0])
            shown = np.zeros(sec.shape[0])
            shown[inside] = counts[sec[inside]]
            rates[mask] = shown
        table.columns["output_tok_s"] = rates
        return table

    # ---------------------------------------------------------------- tables

    def _compact_gaps(self) -> None:
        ms = np.frombuffer(self.gap_value, dtype=np.float64)
        counts = np.frombuffer(self.gap_count, dtype=np.int64)
        # The microseconds are scaled and rounded in the samples' own buffer (dropped below),
        # and nothing is concatenated while nothing is compacted yet (the usual replay): at
        # the end of a replay temporaries are fresh memory, whose page faults cost more than
        # the arithmetic.
        us = np.multiply(ms, 1000.0, out=ms)
        np.rint(us, out=us)
        values = us.astype(np.int64)
        weights = us  # that buffer again, now free: the counts as the floats bincount weighs
        np.copyto(weights, counts)
        if self._gap_us.shape[0]:
            values = np.concatenate((self._gap_us, values))
            weights = np.concatenate((self._gap_us_count, weights))
        self._gap_us, self._gap_us_count = _distinct_totals(values, weights)
        self.gap_value = array("d")
        self.gap_count = array("q")

    def itl_samples(self) -> tuple[np.ndarray, np.ndarray]:
        """Weighted token-gap samples: (values in ms, to the microsecond; counts)."""
        self._flush_runs()
        self._compact_gaps()
        return self._gap_us / 1000.0, self._gap_us_count.copy()

    def requests_table(self, request_id: np.ndarray) -> Table:
        arrival = self.arrival
        first = self.first_token
        second = self.second_token
        last = self.last_token
        n_tok = self.n_tokens
        status = np.array(self.status, dtype=object)
        done = status == "completed"
        ttft = np.where(done, first - arrival, np.nan)
        e2e = np.where(done, last - arrival, np.nan)
        ttst = np.where(done & (n_tok > 1), second - first, np.nan)
        with np.errstate(invalid="ignore", divide="ignore"):
            tpot = np.where(done & (n_tok > 1), (last - first) / (n_tok - 1), np.nan)
        return Table(
            {
                "request_id": np.asarray(request_id, dtype=object),
                "release_ms": arrival if self.release is None else self.release,
                "arrival_ms": arrival,
                "first_admit_ms": np.array(self.first_admit),
                "first_token_ms": np.where(done, first, np.nan),
                "last_token_ms": np.where(done, last, np.nan),
                "ttft_ms": ttft,
                "ttst_ms": ttst,
                "e2e_latency_ms": e2e,
                "tpot_ms": tpot,
                "input_length": np.asarray(self.isl, dtype=np.int64),
                "output_length": np.where(done, n_tok, 0),
                "reused_input_tokens": np.array(self.reused, dtype=np.int64),
                "prefill_worker": np.array(self.prefill_worker, dtype=np.int64),
                "decode_worker": np.array(self.decode_worker, dtype=np.int64),
                "admission_count": np.array(self.admissions, dtype=np.int64),
                "readmission_count": np.array(self.readmissions, dtype=np.int64),
                "status": status.astype(str),
                "reason": np.array(self.reason, dtype=object).astype(str),
            }
        )


def _distinct_totals(values: np.ndarray, weights: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The distinct ``values`` (int64; overwritten), ascending, and each one's total weight
    (int64; the weights are positive integers, as int64 or as float64, the form bincount weighs
    in): what ``np.unique(values, return_inverse=True)`` and a weighted bincount of the inverse
    give, in a fraction of their time on many samples of few values.

    Values less than ``DENSE_SPAN_PER_SAMPLE`` per sample above the smallest are totalled by
    counting over their span (a value is present when its total is, weights being positive);
    the others, a long tail of rare gaps (a preemption, a stall), by sorting them alone."""
    n = values.shape[0]
    if not n:
        return values, weights.astype(np.int64)
    lo = int(values.min())
    width = DENSE_SPAN_PER_SAMPLE * n
    offset = np.subtract(values, lo, out=values)
    tail = None
    if int(offset.max()) >= width:
        tail = np.flatnonzero(offset >= width)
        if tail.shape[0] == n:
            return _sorted_totals(offset, weights, lo)
        sparse = _sorted_totals(offset[tail], weights[tail], lo)
        np.minimum(offset, width, out=offset)  # the tail's weights fall in one bin past the span
    totals = np.bincount(offset, weights=weights)
    present = np.flatnonzero(totals[:width])
    dense = present + lo, totals[present].astype(np.int64)
    if tail is None:
        return dense
    return np.concatenate((dense[0], sparse[0])), np.concatenate((dense[1], sparse[1]))


def _sorted_totals(
    offset: np.ndarray, weights: np.ndarray, lo: int
) -> tuple[np.ndarray, np.ndarray]:
    """``_distinct_totals`` of ``offset + lo`` by sorting."""
    ordered = np.sort(offset)
    distinct = ordered[np.concatenate(([True], ordered[1:] != ordered[:-1]))]
    totals = np.bincount(
        np.searchsorted(distinct, offset), weights=weights, minlength=distinct.shape[0]
    )
    return distinct + lo, totals.astype(np.int64)
