"""Ablating a linear subspace of a site: the op behind necessity tests of a probe direction.

For an orthonormal basis ``U`` (``(k, d)``, rows) of a subspace of the site's last axis, every
selected cell ``v`` keeps its component outside the subspace and has its coordinates ``c = U v``
inside it replaced:

    v' = v - U^T (U v - c'),    c' = 0 (zero) | mu (mean) | U v_j (resample)

``mean``: ``mu`` is the mean coordinate vector over reference activations (e.g. the training
split at the probe's positions), the subspace version of mean ablation; ``resample``: each batch
row takes the coordinates of a row drawn from a reference pool (resample ablation, Chan et al.
2022), one draw per row, the same at each of its positions. Removing the span of a probe's
weights is the amnesic-probing intervention (Elazar et al. 2021), and removing several probe
directions fit one after another is iterative nullspace projection (INLP, Ravfogel et al. 2020).
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from ..capture.positions import AllTokens
from ..errors import ConfigError, DataError
from ..shapes import shape_checked
from ..sites import Site
from .ops import Positions, Recompute

__all__ = ["SUBSPACE_METHODS", "orthonormal_rows", "random_subspace", "subspace_ablation"]

SUBSPACE_METHODS = ("zero", "mean", "resample")


@shape_checked
def orthonormal_rows(vectors: Float[np.ndarray, "k d"], *, tol: float = 1e-10) -> Float[np.ndarray, "r d"]:
    """An orthonormal basis (rows) of the span of ``vectors``'s rows; rank ``r <= k``.

    Raises a :class:`~probekit.errors.DataError` for an empty, non-finite or all-zero input.
    """
    v = np.atleast_2d(np.asarray(vectors, dtype=np.float64))
    if v.size == 0 or not np.isfinite(v).all():
        raise DataError(f"subspace vectors must be a finite non-empty (k, d) array, got shape {v.shape}")
    u, s, vt = np.linalg.svd(v, full_matrices=False)
    rank = int((s > tol * max(s.max(), 1e-300)).sum())
    if rank == 0 or s.max() == 0:
        raise DataError("subspace vectors are all zero: nothing to ablate")
    return vt[:rank]


def random_subspace(d: int, k: int, seed: int) -> Float[np.ndarray, "k d"]:
    """A uniformly random ``k``-dimensional subspace of R^d (orthonormal rows; Haar via QR)."""
    if not 1 <= k <= d:
        raise ConfigError(f"a random subspace needs 1 <= k <= d, got k={k}, d={d}")
    g = np.random.default_rng(seed).normal(size=(d, k))
    q, r = np.linalg.qr(g)
    return (q * np.sign(np.diag(r))).T


@shape_checked
def subspace_ablation(
    site: Site,
    basis: Float[np.ndarray, "k d"],
    *,
    method: str = "mean",
    mean: Float[np.ndarray, " k"] | None = None,
    pool: Float[np.ndarray, "n k"] | None = None,
    seed: int = 0,
    positions: Positions | None = None,
) -> Recompute:
    """The op replacing the coordinates of ``site``'s activations in ``span(basis)`` (see module).

    Args:
        site: the site (its last axis has ``d`` entries).
        basis: ``(k, d)`` orthonormal rows (:func:`orthonormal_rows`).
        method: ``"zero"``, ``"mean"`` or ``"resample"``.
        mean: ``(k,)`` target coordinates of ``method="mean"`` (e.g. the reference mean).
        pool: ``(n, k)`` reference coordinates of ``method="resample"``; each batch row draws one.
        seed: the resample draws' seed.
        positions: where (default every real token).
    """
    if method not in SUBSPACE_METHODS:
        raise ConfigError(f"subspace ablation method {method!r} unknown; use one of {list(SUBSPACE_METHODS)}")
    u = np.asarray(basis, dtype=np.float64)
    if u.ndim != 2 or not np.allclose(u @ u.T, np.eye(u.shape[0]), atol=1e-6):
        raise DataError("subspace basis must be (k, d) with orthonormal rows; use orthonormal_rows(vectors)")
    if method == "mean" and (mean is None or np.shape(mean) != (u.shape[0],)):
        raise DataError(f"method='mean' needs mean of shape ({u.shape[0]},), got "
                        f"{None if mean is None else np.shape(mean)}")
    if method == "resample" and (pool is None or np.ndim(pool) != 2 or np.shape(pool)[1] != u.shape[0]
                                 or len(pool) == 0):
        raise DataError(f"method='resample' needs a non-empty pool of shape (n, {u.shape[0]}), got "
                        f"{None if pool is None else np.shape(pool)}")
    basis_t = torch.as_tensor(u)
    mean_t = None if mean is None else torch.as_tensor(np.asarray(mean, dtype=np.float64))
    pool_t = None if pool is None else torch.as_tensor(np.asarray(pool, dtype=np.float64))
    gen = torch.Generator().manual_seed(int(seed))

    def replace(value: Tensor, _inputs: Mapping[Site, Tensor]) -> Tensor:
        if value.shape[-1] != basis_t.shape[1]:
            raise DataError(f"subspace basis has d={basis_t.shape[1]} but {site.short} has "
                            f"{value.shape[-1]} features")
        b = basis_t.to(device=value.device, dtype=value.dtype)
        coords = value @ b.T  # (..., k)
        if method == "zero":
            target = torch.zeros_like(coords)
        elif method == "mean":
            target = mean_t.to(device=value.device, dtype=value.dtype).expand_as(coords)  # type: ignore[union-attr]
        else:
            draw = torch.randint(len(pool_t), (value.shape[0],), generator=gen)  # type: ignore[arg-type]
            rows = pool_t[draw].to(device=value.device, dtype=value.dtype)  # type: ignore[index]
            target = rows.view(rows.shape[0], *([1] * (coords.ndim - 2)), rows.shape[1]).expand_as(coords)
        return value - (coords - target) @ b

    return Recompute(site=site, fn=replace, positions=positions if positions is not None else AllTokens())
