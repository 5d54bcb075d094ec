"""Input checks shared by the geometry measures (CONTRIBUTING.md, "Code style": name the value, expectation, fix)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from probekit.errors import ConfigError, DataError, NonFiniteError


def as_tensor64(x: object, *, name: str) -> Tensor:
    """Convert an array-like to a float64 tensor; refuse NaN/inf."""
    t = x if isinstance(x, Tensor) else torch.as_tensor(np.asarray(x))
    t = t.detach().to(torch.float64)
    # a sum is NaN/inf whenever an entry is (cheap); confirm elementwise only then
    if not bool(torch.isfinite(t.sum())) and not bool(torch.isfinite(t).all()):
        bad = int((~torch.isfinite(t)).sum())
        raise NonFiniteError(
            f"{name} of shape {tuple(t.shape)} has {bad} NaN/inf values; expected finite "
            "activations; drop or impute those rows first"
        )
    return t


def check_manifolds(
    manifolds: Sequence[object] | np.ndarray | Tensor, *, need_m_lt_n: bool = True
) -> list[Tensor]:
    """Validate a list of ``(N, M_i)`` point clouds (reference layout: points are columns)."""
    if isinstance(manifolds, Tensor | np.ndarray):
        raise DataError(
            f"expected a list of (N, M_i) point clouds, got one array of shape "
            f"{tuple(manifolds.shape)}; pass list(x) for a stacked (P, N, M) array or use "
            "manifolds_from_labels(acts, labels)"
        )
    xs = [as_tensor64(m, name=f"manifold {i}") for i, m in enumerate(manifolds)]
    if len(xs) < 2:
        raise DataError(
            f"got {len(xs)} manifold(s); manifold capacity needs at least 2 (about 10 or more "
            "for a stable centre-correlation step); pass one (N, M_i) array per class"
        )
    for i, x in enumerate(xs):
        if x.ndim != 2:
            raise DataError(
                f"manifold {i} has shape {tuple(x.shape)}; expected (N, M_i) with points as "
                "columns (the reference layout); transpose (M_i, N) arrays with x.T"
            )
    n = xs[0].shape[0]
    for i, x in enumerate(xs):
        if x.shape[0] != n:
            raise DataError(
                f"manifold {i} has N={x.shape[0]} dims but manifold 0 has N={n}; all manifolds "
                "must live in the same space"
            )
        if x.shape[1] < 2:
            raise DataError(
                f"manifold {i} has {x.shape[1]} point(s) (shape {tuple(x.shape)}); each manifold "
                "needs at least 2 points; drop that class or collect more examples"
            )
        if need_m_lt_n and x.shape[1] >= n:
            raise DataError(
                f"manifold {i} has M={x.shape[1]} points in N={n} dims; mean-field capacity "
                f"needs M < N; subsample to at most {n - 1} points per manifold "
                f"(manifolds_from_labels(..., max_points={n - 1})) or pass allow_m_ge_n=True to "
                "run in the N-dim space without the M-dim projection"
            )
    return xs


def check_positive(value: float | int, *, name: str, allow_zero: bool = False) -> None:
    """Raise ConfigError unless ``value`` is finite and > 0 (or >= 0)."""
    ok = np.isfinite(value) and (value >= 0 if allow_zero else value > 0)
    if not ok:
        bound = ">= 0" if allow_zero else "> 0"
        raise ConfigError(f"{name}={value!r} is invalid; expected a finite number {bound}")
