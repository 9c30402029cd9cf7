"""``plansim.api``: compose a replay, with or without a planner, with or without retune.

Two steps, so that every mistake in the inputs is found before a possibly large trace is read:

    from plansim import api
    from plansim.traces import load_workload

    deployment = api.load_deployment("deploy.yaml", {"num_workers": 4})
    setup = api.setup(deployment, planner=deployment.planner, source="deploy.yaml")
    result = api.replay(load_workload(["trace.jsonl.gz"]), setup,
                        trace_paths=("trace.jsonl.gz",))
    result.summary["goodput_request_throughput_rps"], result.requests, result.ticks

``setup(deployment, planner, source=...)`` validates: ``planner`` is a Dynamo planner config
mapping (as read from YAML/JSON), a parsed ``PlannerConfig``, a ready planner object (anything
with ``initial_tick(now_s)`` and ``tick(TickInput)``, such as a scripted schedule), or None for
fixed replicas. A config with a ``retune:`` block has that block parsed once and checked against
the deployment (fields, search domains, grid size: ``plansim.retune.setup``), and the setup
keeps the result (``ReplaySetup.retune``); one without is bootstrapped for the deployment at
once (capabilities, self-benchmark or profiling data, predictor warm-up). ``ConfigError`` names
``source``.

``replay(workload, setup, ...)`` runs it and returns the ``ReplayResult``
(``plansim.sim.result``). With retune, the controller sweeps windows read from
``trace_paths`` (Dynamo request traces; the workload's own ``sources`` when it has them) with
``executor`` (default: a spawn pool of ``retune.max_parallel`` workers) and is closed when the
replay ends; ``sweep(plan, executor)`` runs each window's sweep (default
``retune.sweep.run_sweep``); ``on_decision`` sees each decision record as it lands;
``result.retune_events`` lists them. ``progress(virtual_ms, last_arrival_ms)`` is called about once
per simulated
second. ``supply`` says where the workers come from (``plansim.sim.supply``: refused scale-ups,
spot workers preempted); ``replay_shared`` replays several setups on one virtual clock, each with
its supply (a fleet sharing one inventory of GPUs; without retune).

A ``ReplaySetup`` built by ``setup`` holds a planner ready to tick: replay it once.

Layering: this module composes ``sim``, ``planner_core`` and ``retune`` (its controller); it sits
above them and below what builds replays through it (``retune_runs``, ``capacity``, the command
modules), so nothing it imports imports it (``tests/test_imports.py`` checks the layer order of
``docs/architecture.md``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from plansim.errors import located
from plansim.sim.deployment import Deployment, load_deployment
from plansim.sim.result import ReplayResult

if TYPE_CHECKING:  # a replay without a planner never loads the planner's config models
    from plansim.planner_core.config import PlannerConfig
    from plansim.retune.setup import RetuneSetup

__all__ = ["ReplayResult", "ReplaySetup", "load_deployment", "replay", "replay_shared", "setup"]


@dataclass(frozen=True, slots=True)
class ReplaySetup:
    """What to replay: the deployment, the planner config (None: no planner, or a ready
    ``planner``), the planner ready to tick (None with retune: it is built at replay time), the
    parsed and checked retune block (None without one), and where the planner config came
    from."""

    deployment: Deployment
    planner_config: PlannerConfig | None = None
    planner: Any = None
    source: str = ""
    retune: RetuneSetup | None = None


def setup(deployment: Deployment, planner: Any = None, *, source: str = "") -> ReplaySetup:
    """Validate the replay's planner for ``deployment``; see the module docstring."""
    if planner is None:
        return ReplaySetup(deployment, source=source)
    if hasattr(planner, "tick") and hasattr(planner, "initial_tick"):
        return ReplaySetup(deployment, planner=planner, source=source)
    from plansim.planner_core.config import PlannerConfig, parse_planner_config

    config = (
        planner
        if isinstance(planner, PlannerConfig)
        else parse_planner_config(dict(planner), source=source or None)
    )
    if config.retune is not None:
        from plansim.retune.setup import retune_setup

        return ReplaySetup(
            deployment,
            planner_config=config,
            source=source,
            retune=retune_setup(config, deployment, source=source),
        )
    from plansim.sim.bootstrap import planner_for_deployment

    with located(source or None):
        built = planner_for_deployment(config, deployment)
    return ReplaySetup(deployment, planner_config=config, planner=built, source=source)


def replay(
    workload: Any,
    setup: ReplaySetup,
    *,
    trace_paths: Sequence[str] = (),
    progress: Callable[[float, float], None] | None = None,
    executor: Callable[[int], Any] | None = None,
    on_decision: Callable[[dict[str, Any]], None] | None = None,
    sweep: Callable[[Any, Any], Any] | None = None,
    pass_log: Any = None,
    supply: Any = None,
) -> ReplayResult:
    """Replay ``workload`` as ``setup`` says; see the module docstring. ``pass_log`` (a
    ``plansim.sim.pass_log.PassLog``) receives every pass of every engine rank."""
    from plansim.sim.host import replay as host_replay

    if setup.retune is None:
        return host_replay(
            workload,
            setup.deployment,
            setup.planner,
            progress=progress,
            pass_log=pass_log,
            supply=supply,
        )
    from plansim.retune.controller import controller_for_replay
    from plansim.sim.bootstrap import planner_for_deployment

    controller = controller_for_replay(
        setup.retune, workload, trace_paths, executor=executor, on_decision=on_decision, sweep=sweep
    )
    try:
        with located(setup.source or None):
            planner = planner_for_deployment(
                setup.planner_config, setup.deployment, retune=controller
            )
        result = host_replay(
            workload, setup.deployment, planner, progress=progress, pass_log=pass_log, supply=supply
        )
    finally:
        controller.close()
    if result.retune_events is None:
        # The host does not collect decisions: take them from the controller.
        result = replace(result, retune_events=list(controller.events))
    return result


def replay_shared(members: Sequence[tuple[Any, ReplaySetup, Any]]) -> list[ReplayResult]:
    """Replay ``(workload, setup, supply)`` members on one virtual clock
    (``plansim.sim.host.replay_shared``); a setup with a retune block is refused."""
    from plansim.sim.host import SharedMember
    from plansim.sim.host import replay_shared as host_shared

    for _, setup_, _ in members:
        if setup_.retune is not None:
            raise ValueError("replay_shared does not run retune")
    return host_shared(
        [SharedMember(w, s.deployment, s.planner, supply) for w, s, supply in members]
    )
