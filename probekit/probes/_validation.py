"""Input checks shared by the probes: shapes, label counts, index splits.

Every error names the bad value, what was expected and how to fix it (STYLE.md #8).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from ..util.device import resolve_device as resolve_device  # re-exported for the probes

IndexLike = Sequence[int] | np.ndarray | Tensor


def as_float_tensor(x: object, *, name: str = "acts", dtype: torch.dtype | None = None) -> Tensor:
    """Convert array-likes to a floating tensor (keeps device; ints are cast to float32)."""
    t = x if isinstance(x, Tensor) else torch.as_tensor(np.asarray(x))
    if not t.is_floating_point():
        t = t.to(torch.float32)
    if dtype is not None:
        t = t.to(dtype)
    if not torch.isfinite(t).all():
        raise ValueError(
            f"{name} contains NaN or inf values; expected finite activations. "
            "Drop or impute the offending rows before probing."
        )
    return t


def check_layer_acts(acts: Tensor, *, name: str = "acts") -> Tensor:
    """Accept ``(n, d)`` or ``(layer, n, d)``; return ``(layer, n, d)``."""
    if acts.ndim == 2:
        return acts.unsqueeze(0)
    if acts.ndim != 3:
        raise ValueError(
            f"expected {name} of shape (layer, n, d) or (n, d), got shape {tuple(acts.shape)}; "
            "flatten positions first, e.g. einops.rearrange(a, 'layer b p d -> layer (b p) d')"
        )
    return acts


def check_n_labels(n_acts: int, labels: np.ndarray | Tensor, *, what: str = "labels") -> None:
    """Raise if the number of labels differs from the number of activations."""
    n_lab = int(labels.shape[0])
    if n_lab != n_acts:
        raise ValueError(
            f"got {n_acts} activations but {n_lab} {what}; pass exactly one label per activation "
            "row (same order as the activations)"
        )


def check_indices(idx: IndexLike, n: int, *, name: str) -> np.ndarray:
    """Convert a split to a 1-D int64 index array and check its range."""
    if isinstance(idx, Tensor):
        idx = idx.detach().cpu().numpy()
    arr = np.asarray(idx)
    if arr.dtype == bool:
        if arr.shape != (n,):
            raise ValueError(
                f"boolean mask {name} has shape {arr.shape} but there are {n} examples; "
                "pass a mask of length n or integer indices"
            )
        arr = np.flatnonzero(arr)
    arr = arr.astype(np.int64).reshape(-1)
    if arr.size == 0:
        raise ValueError(f"split {name!r} is empty; it needs at least one example index")
    if arr.min() < 0 or arr.max() >= n:
        raise ValueError(
            f"split {name!r} has indices in [{arr.min()}, {arr.max()}] but there are only {n} "
            f"examples; indices must lie in [0, {n - 1}]"
        )
    return arr

