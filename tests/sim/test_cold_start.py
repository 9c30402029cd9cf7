"""Cold-start realism of workers a planner adds: a first pass that waits
``first_pass_delay_s`` after the worker is ready, and start-up times drawn around
``startup_time`` (``startup_time_cv``)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "capacity"))
from capacity_workloads import agg_deployment, workload_at

from plansim import api
from plansim.capacity.scripted import CountSchedule, change_to


def _replay(**engine):
    # One warm worker, a second one asked for at 0 s with a 1 s start-up; a request every 50
    # ms, 10 ms passes, one request per pass, 100 ms per request (capacity_workloads).
    dep = agg_deployment(startup_s=1.0)
    dep = dep.model_copy(update={"num_workers": 1, "engine": dep.engine.model_copy(update=engine)})
    workload = workload_at(np.arange(40) * 50.0)
    return api.replay(workload, api.setup(dep, CountSchedule([change_to("agg", 0.0, [2])])))


def test_first_pass_of_a_new_worker_waits_for_its_warm_up():
    # The new worker is ready at 1000 ms; round robin sends it the requests of 1050, 1150, ...
    # Warm, request 21 (1050 ms) starts at once: TTFT 10 ms. With a 2 s first-pass delay it
    # starts at 3000 ms: TTFT 3010 - 1050 = 1960 ms, and every later one waits as long (one
    # request per 100 ms arrives and one is served per 100 ms).
    warm = _replay().requests["ttft_ms"].to_numpy()
    cold = _replay(first_pass_delay_s=2.0).requests["ttft_ms"].to_numpy()
    assert warm[21] == 10.0 and warm[23] == 10.0
    assert cold[21] == 1960.0 and cold[23] == 1960.0
    # The warm worker's requests are unchanged.
    assert cold[22] == warm[22]


def test_startup_time_drawn_with_a_seed():
    ready = [_replay(startup_time_cv=0.5).workers["ready_at_ms"].to_numpy()[1] for _ in range(2)]
    fixed = _replay().workers["ready_at_ms"].to_numpy()[1]
    assert fixed == 1000.0
    assert ready[0] == ready[1] and ready[0] != 1000.0
