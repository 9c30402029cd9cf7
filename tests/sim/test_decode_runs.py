"""The fast paths (decode runs, prompt runs, head runs, decoding rows granted in one vector step,
array token stamps, runs timed as lists or arrays) must give exactly what pass-by-pass,
request-by-request simulation gives, for every backend."""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import numpy as np
from hypothesis import example, given, settings
from hypothesis import strategies as st
from simkit import run

from plansim.sim import batch as soa
from plansim.sim.summary import without_host_keys

NPZ = Path(__file__).resolve().parent / "reference" / "profiles" / "sample_h200.npz"
COLUMNS = [
    "first_admit_ms",
    "first_token_ms",
    "last_token_ms",
    "ttst_ms",
    "output_length",
    "reused_input_tokens",
    "admission_count",
    "readmission_count",
    "decode_worker",
]


@st.composite
def scenario(draw, max_requests=6, max_seqs=4, max_blocks=120):
    n = draw(st.integers(1, max_requests))
    rows = []
    for i in range(n):
        isl = draw(st.integers(20, 1500))
        prefix = draw(st.integers(0, 2))
        n_ids = -(-isl // 256)
        base = prefix * 100 if prefix else 1000 + i * 10
        ids = [base + b for b in range(n_ids)]
        rows.append((draw(st.floats(0, 400)), isl, draw(st.integers(1, 80)), ids))
    rows.sort(key=lambda r: r[0])
    engine = {
        "backend": draw(st.sampled_from(["vllm", "vllm", "sglang", "trtllm"])),
        "num_gpu_blocks": draw(st.integers(30, max_blocks)),
        "block_size": draw(st.sampled_from([16, 64])),
        "max_num_seqs": draw(st.integers(1, max_seqs)),
        "max_num_batched_tokens": draw(st.sampled_from([256, 1024, 8192])),
        "enable_chunked_prefill": draw(st.booleans()),
        "preemption_mode": draw(st.sampled_from(["lifo", "fifo"])),
    }
    if draw(st.integers(0, 3)) == 0:
        # Pass times divided by speedups before they are quantised (the decode table's too).
        engine["speedup_ratio"] = draw(st.sampled_from([0.8, 1.7]))
        engine["decode_speedup_ratio"] = draw(st.sampled_from([1.0, 1.3]))
    if draw(st.integers(0, 3)) == 0:
        # The NPZ profile's pass times (its runs are timed from pages by batch size).
        engine["timing_model"] = {"type": "npz", "path": str(NPZ)}
    workers = draw(st.integers(1, 2))
    mode = draw(st.sampled_from(["round_robin", "kv_router"]))
    disagg = draw(st.booleans())
    return rows, engine, workers, mode, disagg


# A prompt whose cached prefix leaves it one token short after one chunk is still prefilling.
ONE_SHORT = (
    [(0.0, 20, 1, [100]), (0.0, 20, 1, [1020]), (0.0, 20, 1, [1030]), (1.0, 273, 2, [100, 101])],
    {
        "num_gpu_blocks": 30,
        "block_size": 16,
        "max_num_seqs": 1,
        "max_num_batched_tokens": 256,
        "enable_chunked_prefill": True,
        "preemption_mode": "lifo",
    },
    1,
    "round_robin",
    False,
)


# SGLang's new_token_ratio decays once a pass: a decode run must decay it once for each of its
# passes, or the arrival at 318 ms finds less KV room than pass by pass and waits a pass longer.
SGLANG_RATIO = (
    [(0.0, 471, 56, [1010, 1011]), (0.0, 119, 80, [1020]), (318.0, 20, 1, [1000])],
    {
        "backend": "sglang",
        "num_gpu_blocks": 47,
        "block_size": 16,
        "max_num_seqs": 3,
        "max_num_batched_tokens": 256,
        "enable_chunked_prefill": False,
        "preemption_mode": "lifo",
    },
    1,
    "round_robin",
    False,
)


# Disaggregated, 34 blocks: a decode rank's waiting head is matched against its cache when a run
# is considered, then the pass composed instead allocates blocks that evict part of that prefix:
# the admission must see the cache as it is then.
STALE_MATCH = (
    [
        (0.0, 20, 1, [1000]),
        (0.0, 20, 1, [1010]),
        (0.0, 20, 1, [1020]),
        (0.0, 20, 1, [1030]),
        (0.0, 20, 16, [100]),
        (0.0, 20, 1, [1050]),
        (0.0, 20, 1, [1060]),
        (0.0, 147, 15, [1070]),
        (0.0, 369, 1, [100, 101]),
        (0.0, 20, 1, [1090]),
        (0.0, 20, 1, [1100]),
    ],
    {
        "backend": "vllm",
        "num_gpu_blocks": 34,
        "block_size": 16,
        "max_num_seqs": 3,
        "max_num_batched_tokens": 1024,
        "enable_chunked_prefill": False,
        "preemption_mode": "lifo",
    },
    1,
    "round_robin",
    True,
)


# A prompt run from 20.4 ms to 100.5 ms (NPZ timing): its end must be the float its passes reach
# one by one, not the run's start plus its length (a float off).
PROMPT_RUN_END = (
    [(0.0, 1177, 1, [1000, 1001, 1002, 1003, 1004])],
    {
        "backend": "vllm",
        "num_gpu_blocks": 30,
        "block_size": 64,
        "max_num_seqs": 1,
        "max_num_batched_tokens": 256,
        "enable_chunked_prefill": True,
        "preemption_mode": "lifo",
        "timing_model": {"type": "npz", "path": str(NPZ)},
    },
    1,
    "round_robin",
    False,
)


# Four decoding requests ahead of a prompt that a cut prompt run leaves one token short of its
# end (428 of 429; budget 256, the 30 ms arrival cuts the run): the decoding rows granted in one
# step must stop at it, a prompt still.
SHORT_BEHIND_DECODERS = (
    [
        (0.0, 20, 60, [1000]),
        (0.0, 20, 60, [1010]),
        (0.0, 20, 60, [1020]),
        (0.0, 20, 60, [1030]),
        (0.0, 429, 5, [1040]),
        (30.0, 20, 5, [1050]),
    ],
    {
        "num_gpu_blocks": 400,
        "block_size": 16,
        "max_num_seqs": 8,
        "max_num_batched_tokens": 256,
        "enable_chunked_prefill": True,
        "preemption_mode": "lifo",
    },
    1,
    "round_robin",
    False,
)


def _prompt_runs(num_gpu_blocks, max_num_seqs=4):
    # A 1500-token prompt in chunks of 255 beside a decoding request (budget 256), another
    # prompt arriving during its run (which cuts it), a third while the batch is full; with
    # few blocks the runs stop before a pass that would preempt.
    rows = [
        (0.0, 100, 40, [1000]),
        (5.0, 1500, 5, [1010 + b for b in range(6)]),
        (60.0, 300, 3, [1020, 1021]),
        (61.0, 700, 2, [1030, 1031, 1032]),
    ]
    engine = {
        "num_gpu_blocks": num_gpu_blocks,
        "block_size": 16,
        "max_num_seqs": max_num_seqs,
        "max_num_batched_tokens": 256,
        "enable_chunked_prefill": True,
        "preemption_mode": "lifo",
    }
    return rows, engine, 1, "round_robin", False


# Round robin: each prefill pass runs on into the decode run after it (a head run); arrivals at
# 30.5 and 31 ms reach the ranks during a prefill pass (cut to that pass) and during a decode
# part; two workers, so that both ranks' head runs interleave.
HEAD_RUNS = (
    [
        (0.0, 900, 40, [1000, 1001, 1002, 1003]),
        (0.0, 300, 25, [1010, 1011]),
        (30.5, 600, 30, [1020, 1021, 1022]),
        (31.0, 200, 3, [1030]),
        (90.0, 1200, 20, [1000, 1001, 1002, 1040, 1041]),
    ],
    {
        "num_gpu_blocks": 400,
        "block_size": 16,
        "max_num_seqs": 4,
        "max_num_batched_tokens": 8192,
        "enable_chunked_prefill": True,
        "preemption_mode": "lifo",
    },
    2,
    "round_robin",
    False,
)


@settings(max_examples=120, deadline=None)
@given(scenario())
@example(HEAD_RUNS)
@example(ONE_SHORT)
@example(SGLANG_RATIO)
@example(STALE_MATCH)
@example(PROMPT_RUN_END)
@example(SHORT_BEHIND_DECODERS)
@example(_prompt_runs(400))
@example(_prompt_runs(400, max_num_seqs=2))
@example(_prompt_runs(120))
@example(_prompt_runs(60))
def test_decode_runs_match_pass_by_pass(case):
    _same_as_pass_by_pass(case)


def _straddle(backend):
    # 30 requests at once in a batch of up to 32: it grows past soa.SCALAR_ROWS as the prompts
    # are admitted, shrinks below it as the short outputs finish (some at block boundaries), and
    # grows past it again with the second wave.
    rows = [(0.0, 40 + 7 * i, 5 + 3 * i, [1000 + 10 * i]) for i in range(30)]
    rows += [(400.0 + i, 60, 30, [2000 + 10 * i]) for i in range(20)]
    engine = {
        "backend": backend,
        "num_gpu_blocks": 400,
        "block_size": 16,
        "max_num_seqs": 32,
        "max_num_batched_tokens": 1024,
        "enable_chunked_prefill": True,
        "preemption_mode": "lifo",
    }
    return rows, engine, 1, "round_robin", False


# The same waves with too little KV for them: preemptions while the batch is above and below the
# threshold.
STRADDLE_TIGHT = (
    _straddle("vllm")[0],
    {**_straddle("vllm")[1], "num_gpu_blocks": 160},
    1,
    "round_robin",
    False,
)


@settings(max_examples=40, deadline=None)
@given(scenario(max_requests=24, max_seqs=16, max_blocks=400))
@example(_straddle("vllm"))
@example(_straddle("sglang"))
@example(_straddle("trtllm"))
@example(STRADDLE_TIGHT)
def test_large_batches_match_pass_by_pass(case):
    # Many requests decoding beside prompt chunks, admissions, block-boundary allocations and
    # preemptions, with batches on both sides of soa.SCALAR_ROWS (the examples cross it both
    # ways): the vector grants of the decoding rows and the scalar paths of small batches must
    # change nothing.
    _same_as_pass_by_pass(case)


@settings(max_examples=40, deadline=None)
@given(scenario(max_requests=24, max_seqs=16, max_blocks=400))
@example(_straddle("vllm"))
@example(STRADDLE_TIGHT)
@example(HEAD_RUNS)
@example(PROMPT_RUN_END)
def test_scalar_and_vector_paths_give_identical_results(case):
    # Every per-pass step forced onto its scalar path, then onto its vector path, then the
    # grants onto their row loop: the same requests table to the bit and the same token gaps.
    with _paths(scalar_rows=1 << 30, grant_rows=1 << 30, scalar_passes=1 << 30):
        scalar = _run(case)
    with _paths(scalar_rows=0, grant_rows=1, scalar_passes=0):
        vector = _run(case)
    # The decoding rows' grants in one loop over the rows' lists (``decode_grants._grant_rows``),
    # every other step scalar.
    with _paths(scalar_rows=1 << 30, grant_rows=1, scalar_passes=1 << 30):
        rows = _run(case)
    for other in (vector, rows):
        a, b = scalar.requests, other.requests
        assert a["status"].tolist() == b["status"].tolist()
        for col in COLUMNS:
            np.testing.assert_array_equal(
                a[col].to_numpy(dtype=float), b[col].to_numpy(dtype=float), err_msg=col
            )
        np.testing.assert_equal(without_host_keys(scalar.summary), without_host_keys(other.summary))


@contextmanager
def _paths(scalar_rows, grant_rows, scalar_passes):
    saved = soa.SCALAR_ROWS, soa.SCALAR_GRANT_ROWS, soa.SCALAR_PASSES
    soa.SCALAR_ROWS, soa.SCALAR_GRANT_ROWS, soa.SCALAR_PASSES = (
        scalar_rows,
        grant_rows,
        scalar_passes,
    )
    try:
        yield
    finally:
        soa.SCALAR_ROWS, soa.SCALAR_GRANT_ROWS, soa.SCALAR_PASSES = saved


def _run(case, decode_runs=True):
    rows, engine, workers, mode, disagg = case
    kwargs = {"engine": engine, "router": {"mode": mode}, "seed": 3}
    if disagg:
        kwargs.update(mode="disagg", num_prefill_workers=workers, num_decode_workers=workers)
    else:
        kwargs.update(num_workers=workers)
    return run(rows, decode_runs=decode_runs, **kwargs)


def _same_as_pass_by_pass(case):
    fast = _run(case)
    slow = _run(case, decode_runs=False)
    a, b = fast.requests, slow.requests
    assert a["status"].tolist() == b["status"].tolist()
    for col in COLUMNS:
        np.testing.assert_array_equal(
            a[col].to_numpy(dtype=float), b[col].to_numpy(dtype=float), err_msg=col
        )
    ga, ca = fast.summary["median_itl_ms"], slow.summary["median_itl_ms"]
    assert ga == ca
