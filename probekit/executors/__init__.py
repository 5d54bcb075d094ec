"""Scale-out backends of the executor seam (:mod:`probekit.executor`).

Each module registers a factory, the dataclass of its options and its CLI aliases with
:func:`probekit.executor.register_executor` when imported, and imports its backend library only
when a task runs, so importing it is cheap and never requires the optional dependency. The
executor registry imports every module here on its first lookup (by package name: nothing
imports a backend, see the import contracts in ``pyproject.toml``), so a new backend is one
module in this package and no edit elsewhere.
"""
