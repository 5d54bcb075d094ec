"""Standardisation and difference of means as pure functions on numpy arrays or torch tensors.

Rows are the second-to-last axis (``... n d``); leading axes are batch axes (layers, sites,
label permutations), so one call serves a single probe and a batched sweep alike.
"""

from __future__ import annotations

import numpy as np
import torch
from jaxtyping import Float, Shaped
from torch import Tensor

from ..errors import DataError

__all__ = ["diff_of_means", "standardization", "standardize"]

Array = Float[np.ndarray, "..."] | Float[Tensor, "..."]


def standardization(
    X: Float[np.ndarray, "*batch n d"] | Float[Tensor, "*batch n d"],
) -> tuple[Array, Array]:
    """``(mean, scale)`` over the rows of ``X``, each ``(*batch, d)``, as ``StandardScaler``.

    ``scale`` is the population standard deviation (``ddof=0``) with zeros replaced by 1, so a
    constant feature standardises to 0 instead of NaN.
    """
    if isinstance(X, Tensor):
        mean = X.mean(-2)
        scale = X.std(-2, unbiased=False)
        return mean, torch.where(scale > 0, scale, torch.ones_like(scale))
    mean = X.mean(-2)
    scale = X.std(-2)
    return mean, np.where(scale > 0, scale, 1.0).astype(X.dtype, copy=False)


def standardize(
    X: Float[np.ndarray, "*batch n d"] | Float[Tensor, "*batch n d"],
    mean: Float[np.ndarray, "*batch d"] | Float[Tensor, "*batch d"],
    scale: Float[np.ndarray, "*batch d"] | Float[Tensor, "*batch d"],
) -> Array:
    """``(X - mean) / scale`` with ``(mean, scale)`` from :func:`standardization` (e.g. of a train split)."""
    return (X - mean[..., None, :]) / scale[..., None, :]


def diff_of_means(
    X: Float[np.ndarray, "*batch n d"] | Float[Tensor, "*batch n d"],
    positive: Shaped[np.ndarray, "*labelings n"] | Shaped[Tensor, "*labelings n"],
) -> tuple[Array, Array]:
    """``(w, mu)``: ``w = mean(X[positive]) - mean(X[~positive])``, ``mu`` the midpoint of the two means.

    The direction of a difference-of-means probe (Marks & Tegmark 2023, "The Geometry of Truth";
    Belrose 2023): score ``(x - mu) . w``, positive for the positive class. ``positive`` is a
    boolean / 0-1 mask over the rows; its leading axes broadcast against ``X``'s (one labelling
    per permutation, say), so the result is ``(*broadcast(batch, labelings), d)``. The means are
    computed as ``p @ X / sum(p)``, one matmul per class, without materialising masked copies.

    Raises:
        DataError: a labelling has no positive or no negative row.
    """
    n = X.shape[-2]
    if isinstance(X, Tensor):
        p = torch.as_tensor(positive, device=X.device).to(X.dtype)
        n_pos = p.sum(-1, keepdim=True)
        sum1 = (p.unsqueeze(-2) @ X).squeeze(-2)
        total = X.sum(-2)
        bad = bool(((n_pos == 0) | (n_pos == n)).any())
    else:
        p = np.asarray(positive).astype(X.dtype)
        n_pos = p.sum(-1, keepdims=True)
        sum1 = (p[..., None, :] @ X)[..., 0, :]
        total = X.sum(-2)
        bad = bool(((n_pos == 0) | (n_pos == n)).any())
    if bad:
        raise DataError(
            f"difference of means needs both classes in every labelling of the {n} rows; got "
            f"positive counts {np.unique(np.asarray(n_pos.tolist())).tolist()[:5]}; include rows "
            "of both classes"
        )
    mu1 = sum1 / n_pos
    mu0 = (total - sum1) / (n - n_pos)
    return mu1 - mu0, 0.5 * (mu1 + mu0)
