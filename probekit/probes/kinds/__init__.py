"""Built-in probe kinds, one module each (imported by :func:`probekit.probes.kind.probe_kind`).

``logistic`` (accuracy), ``ridge`` (R^2), ``diffmeans`` (AUROC). A module here registers its
kind with :func:`~probekit.probes.kind.register_probe_kind` when imported; module-level
imports stay light (torch and the solvers are imported inside the methods).
"""
