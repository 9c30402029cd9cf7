"""planner_core: the planner as pure decision logic with the clock injected; it reads no files
(``plansim.planner_io`` does) and imports neither ``plansim.sim`` nor ``plansim.retune``
(``plansim.sim.bootstrap.planner_for_deployment`` composes a planner for a deployment). How a
host applies its decisions (connectors, with their files and wall-clock waits) is in
``plansim.connectors``.

Public API::

    PlannerConfig, parse_planner_config(raw), with_changes(config, changes)
    PlannerEngine(config, capabilities, *, warmup=None, retune=None, profile_fpms=None)
        .initial_tick(now_s) -> PlannerEffects
        .tick(TickInput) -> PlannerEffects
        .advisory
        .apply_planner_changes(changes, predictor_warmup=None)
    check_fits(config, capabilities)
"""

from plansim.lazy import lazy_getattr

# Imported on first use: the simulator imports ``planner_core.observations`` alone, without the
# planner's configuration models and engine.
_EXPORTS = {
    "PlannerConfig": "plansim.planner_core.config",
    "parse_planner_config": "plansim.planner_core.config",
    "with_changes": "plansim.planner_core.config",
    "PlannerEngine": "plansim.planner_core.engine",
    "check_fits": "plansim.planner_core.engine",
}
__getattr__ = lazy_getattr(globals(), _EXPORTS)
__all__ = list(_EXPORTS)
