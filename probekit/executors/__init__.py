"""Scale-out backends of the executor seam (:mod:`probekit.executor`).

Each module registers a factory with :func:`probekit.executor.register_executor` when imported
and imports its backend library only when a task runs, so importing it is cheap and never
requires the optional dependency. :func:`probekit.executor.get_executor` imports them on first
use by name (``get_executor("ray")`` -> :mod:`probekit.executors.ray`).
"""
