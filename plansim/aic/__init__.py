"""AIConfigurator as a source of engine timing, memory and profiles (extra ``plansim[aic]``).

``spec``: the validated ``timing_model: {type: aic, ...}`` fields. ``sdk``: the only module that
talks to the SDK. ``table``: the per-pass latency grid, built once per spec and cached on disk.
``memory``: KV capacity and GPUs per worker from the model. ``engine_fields``: the engine keys
the model decides.

A base package: it imports neither ``sim`` nor anything above it, so the deployment
(``sim.deployment``) validates an ``aic`` spec with it. The timing model interpolating the grid
is ``sim.timing.aic`` (registered in ``TIMING_MODELS``), the grid written as an NPZ profile
``sim.timing.aic_profile``.
"""
