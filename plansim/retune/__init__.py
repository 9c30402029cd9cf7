"""retune: periodic window sweeps of router and planner candidates (Planner Design, "Retune").

Modules, one job each:

- ``config``: ``RetuneConfig``, the validated ``retune:`` block (``load_retune_config``);
- ``domains``: candidate domain syntax, the grid and the candidate set (``Point``);
- ``setup``: ``RetuneSetup``, the block parsed and checked against a deployment once
  (``retune_setup``): the grid, the predictor candidates, the startup point;
- ``controller``: ``RetuneController``, the engine's retune hook (``initial_tick``/``on_tick``),
  one per replay, built from a ``RetuneSetup``: windows, decision timing, outcomes, advisory
  mode, predictor swaps;
- ``sweep``: ``run_sweep``, one window's sweep on an executor of ``plansim.workers``
  (``SweepPlan`` -> ``SweepReport``);
- ``tasks``: the picklable task functions (window read, candidate replay) and their inputs;
- ``presweep``: the load-predictor pre-sweep and the swap preparation;
- ``scoring``: objectives, fail-closed scores, ranking and the improvement rule;
- ``record``: the per-window decision record.

Below ``plansim.api``, which builds the controller into a replay; the run-file API behind
``plansim retune`` (``plansim.retune_runs``) sits above it. Nothing is imported here, so that a
sweep worker importing a task module stays light.
"""
