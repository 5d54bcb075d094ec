"""Bench section ``shape_checks``: the per-call cost of ``probekit.shapes.shape_checked``.

Each decorated public function against its undecorated body (``__wrapped__``) in the same run,
on inputs small enough that the check is the largest share a call can have (the worst case),
and on a realistic size. Reported: microseconds per call with and without, and the added cost.

    python scripts/bench.py --sections shape_checks
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch


def _per_call_us(fn: Callable[..., Any], args: tuple, repeats: int, number: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(number):
            fn(*args)
        best = min(best, (time.perf_counter() - t0) / number)
    return best * 1e6


def bench_shape_checks(repeats: int = 5, number: int = 2000) -> dict:
    """Microseconds per call of three decorated functions, checked and unchecked."""
    from probekit.homomorphism import composite_target
    from probekit.probes import accuracy
    from probekit.similarity import linear_gram

    rng = np.random.default_rng(0)
    cases = {
        "composite_target_tiny": (composite_target, (torch.zeros(1, 2, 3), torch.zeros(1, 2, 3))),
        "composite_target_12x1000x512": (composite_target, (torch.zeros(12, 1000, 512),
                                                            torch.zeros(12, 1000, 512))),
        "accuracy_tiny": (accuracy, (np.zeros(4), np.zeros(4))),
        "linear_gram_1000x64": (linear_gram, (torch.from_numpy(rng.normal(size=(1000, 64))),)),
    }
    out: dict[str, Any] = {}
    for name, (fn, args) in cases.items():
        n = number if "tiny" in name else max(number // 100, 5)
        checked = _per_call_us(fn, args, repeats, n)
        bare = _per_call_us(fn.__wrapped__, args, repeats, n)
        out[f"{name}_checked_us"] = checked
        out[f"{name}_unchecked_us"] = bare
        out[f"{name}_added_us"] = checked - bare
    out["goal"] = "a few microseconds per call: negligible beside any real tensor work"
    return out
