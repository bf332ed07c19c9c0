"""Time from a simulation: per-op cycle costs (``cost``), whole-launch predictions (``prediction``) and the cost
of the GPU profiler's clock recorder (``recorder``)."""
