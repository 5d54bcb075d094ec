"""Leaf helpers shared by every subpackage: atomic I/O, hashing, the cache root, config checks,
standardisation and difference of means. Nothing here imports another probekit subpackage
(only :mod:`probekit.errors`), so any layer may use it.
"""
