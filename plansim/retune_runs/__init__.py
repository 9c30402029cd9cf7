"""retune_runs: retune driven by a run file (trace, deployment, planner with its retune block),
the Python API behind ``plansim retune``.

- ``runner``: ``load_retune_run`` (the run file, validated through ``plansim.api.setup``),
  ``run_retune`` (a replay with retune on, through ``plansim.api.replay``), ``score_window``;
- ``batch``: many windows scored at once, each one sweep from the startup point (``plansim
  retune windows``), and their tables and summary.

Above ``plansim.api``, which composes a replay from ``sim``, ``planner_core`` and ``retune``
(the controller, sweeps and scoring) and imports nothing of this package.
"""
