"""Leaf helpers shared by every subpackage.

Atomic I/O and hashing (:mod:`.io`), the cache root (:mod:`.cache`), unknown-key checks
(:mod:`.config`), device names (:mod:`.device`), standardisation and difference of means
(:mod:`.numeric`), plug-in discovery (:mod:`.plugins`), thread counts scoped to small work
(:mod:`.threads`), the distinct / in-range rule of list options (:mod:`.list_option`).
Nothing here imports another probekit subpackage (only :mod:`probekit.errors`), so any layer
may use it.
"""
