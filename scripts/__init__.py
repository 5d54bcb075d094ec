"""Benchmark and data-generation scripts (not part of the installed package)."""
