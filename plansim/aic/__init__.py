"""AIConfigurator as a source of engine timing, memory and profiles (extra ``plansim[aic]``).

``spec``: the validated ``timing_model: {type: aic, ...}`` fields. ``sdk``: the only module that
talks to the SDK. ``table``: the per-pass latency grid, built once per spec and cached on disk.
``timing``: the engine timing model interpolating that grid. ``memory``: KV capacity and GPUs per
worker from the model. ``profile``: the grid written as an NPZ profile.
"""
