"""workers: worker processes for batches of picklable tasks, below everything that runs them
(retune sweeps, the capacity search, ``predict compare``'s backtests).

Modules, one job each:

- ``executor``: the ``Executor`` interface (``Task``, ``TaskContext``, ``TaskResult``,
  ``BatchOutcome``) and the in-process executor every other one is checked against;
- ``pool``: ``SpawnPool``, the default executor, spawn-method worker processes on this machine;
- ``ray_executor``: ``RayExecutor``, the same interface on a Ray cluster (extra ``plansim[ray]``);
- ``backends``: ``EXECUTORS``, the executors a ``--backend`` option names (each declared by its
  module as an ``ExecutorBackend``), and ``make_executor``;
- ``parallel``: ``parallel_map``, a map over a spawn pool for work that needs no executor.

Worker processes die with plansim (``plansim.lifecycle``). Nothing is imported here, so that a
worker importing a task module stays light.
"""
