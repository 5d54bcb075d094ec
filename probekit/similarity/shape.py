"""Shape metrics: angular Procrustes distance and CCA similarity (SVCCA, PWCCA).

Procrustes: Williams, Kunz, Kornblith & Linderman, "Generalized Shape Metrics on Neural
Representations", NeurIPS 2021 (arXiv 2110.14739). SVCCA: Raghu, Gilmer, Yosinski &
Sohl-Dickstein, NeurIPS 2017. PWCCA: Morcos, Raghu & Bengio, NeurIPS 2018. Guide:
docs/similarity.md.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from probekit.errors import ConfigError, DataError

from ..shapes import shape_checked
from ._validation import as_pair, check_choice, check_not_constant
from .cka import centre

__all__ = ["canonical_correlations", "cca_similarity", "procrustes_distance"]

Keep = int | float | None
RANK_RTOL = 1e-10  # singular values below RANK_RTOL * largest count as zero (constant features)


def _centred_pair(X: object, Y: object) -> tuple[Tensor, Tensor]:
    Xt, Yt = as_pair(X, Y, min_n=3)
    Xc, Yc = centre(Xt), centre(Yt)
    check_not_constant(Xt, Xc, name="X")
    check_not_constant(Yt, Yc, name="Y")
    return Xc, Yc


def nuclear_cross(A: Float[Tensor, "n da"], B: Float[Tensor, "n db"]) -> float:
    """Nuclear norm ``||A^T B||_*`` (sum of singular values), in ``d x d`` or ``n x n`` form."""
    n = A.shape[0]
    if n >= max(A.shape[1], B.shape[1]):
        return float(torch.linalg.svdvals(A.T @ B).sum())
    # A^T B = Va (Sa Ua^T Ub Sb) Vb^T: same singular values as (Ua Sa)^T (Ub Sb), an n x n matrix
    Ua, Sa, _ = torch.linalg.svd(A, full_matrices=False)
    Ub, Sb, _ = torch.linalg.svd(B, full_matrices=False)
    return float(torch.linalg.svdvals((Ua * Sa).T @ (Ub * Sb)).sum())


@shape_checked
def procrustes_distance(
    X: Float[Tensor, "n1 d1"] | Float[np.ndarray, "n1 d1"],
    Y: Float[Tensor, "n2 d2"] | Float[np.ndarray, "n2 d2"],
) -> float:
    """Angular orthogonal-Procrustes shape distance in radians, in ``[0, pi/2]``.

    Centre both inputs, scale each to unit Frobenius norm, zero-pad to equal width (implicit);
    ``d(X, Y) = arccos(max_Q <Xn Q, Yn>_F) = arccos(||Xn^T Yn||_*)`` over orthogonal ``Q``
    (Williams et al. 2021, eq. 4; netrep's ``LinearMetric(alpha=1)`` angular distance). It is 0
    iff ``Y`` equals ``X`` up to translation, rotation/reflection and isotropic scale, and it
    is a metric (symmetric, triangle inequality).
    """
    Xc, Yc = _centred_pair(X, Y)
    Xn, Yn = Xc / Xc.norm(), Yc / Yc.norm()
    return float(math.acos(min(1.0, max(-1.0, nuclear_cross(Xn, Yn)))))


def _basis(Xc: Tensor, keep: Keep, name: str) -> Tensor:
    """Orthonormal basis ``(n, k)`` of the top-``k`` principal directions of centred ``Xc``."""
    U, S, _ = torch.linalg.svd(Xc, full_matrices=False)
    rank = int((RANK_RTOL * S[0] < S).sum())
    if keep is None:
        k = rank
    elif isinstance(keep, bool) or not isinstance(keep, int | float):
        raise ConfigError(f"keep={keep!r} must be an int (PCs kept), a float in (0, 1] (variance kept) or None")
    elif isinstance(keep, int):
        if keep < 1:
            raise ConfigError(f"keep={keep} must be >= 1 principal components")
        k = min(keep, rank)
    else:
        if not 0.0 < keep <= 1.0:
            raise ConfigError(f"keep={keep} as a variance fraction must be in (0, 1], e.g. 0.99")
        frac = torch.cumsum(S[:rank] ** 2, 0) / (S[:rank] ** 2).sum()
        k = min(int((frac < keep - 1e-12).sum()) + 1, rank)
    n = Xc.shape[0]
    if k >= n - 1:
        raise DataError(
            f"{name} keeps {k} dimensions for n={n} stimuli (shape {tuple(Xc.shape)}); CCA needs "
            f"n > kept dimensions + 1 (centring uses one), else every correlation is trivially 1: "
            f"pass more stimuli or a smaller keep (e.g. keep={max(1, n // 2)})"
        )
    return U[:, :k]


@shape_checked
def canonical_correlations(
    X: Float[Tensor, "n1 d1"] | Float[np.ndarray, "n1 d1"],
    Y: Float[Tensor, "n2 d2"] | Float[np.ndarray, "n2 d2"],
    *,
    keep_x: Keep = None,
    keep_y: Keep = None,
) -> Float[Tensor, " k"]:
    """Canonical correlations ``rho_1 >= ... >= rho_k`` after optional PCA truncation.

    With orthonormal bases ``Qx``, ``Qy`` of the (truncated) centred column spaces the
    canonical correlations are the singular values of ``Qx^T Qy`` (Bjorck & Golub 1973).
    ``keep``: ``None`` (full rank; zero-variance directions such as constant features are
    dropped), an int (top-k PCs) or a float (fewest PCs explaining that variance fraction).
    """
    Xc, Yc = _centred_pair(X, Y)
    Qx, Qy = _basis(Xc, keep_x, "X"), _basis(Yc, keep_y, "Y")
    return torch.linalg.svdvals(Qx.T @ Qy).clamp(0.0, 1.0)


@shape_checked
def cca_similarity(
    X: Float[Tensor, "n1 d1"] | Float[np.ndarray, "n1 d1"],
    Y: Float[Tensor, "n2 d2"] | Float[np.ndarray, "n2 d2"],
    kind: str = "svcca",
    *,
    keep: Keep = None,
) -> float:
    """SVCCA or PWCCA similarity in ``[0, 1]``.

    ``"svcca"`` (Raghu et al. 2017): keep the top principal directions of each input
    (``keep``; default ``0.99`` of the variance, as in the paper), then the mean canonical
    correlation. ``"pwcca"`` (Morcos et al. 2018): ``sum_i a_i rho_i`` with
    ``a_i ∝ sum_j |<h_i, x_j>|``, ``h_i`` the orthonormalised canonical variates of ``X`` and
    ``x_j`` the centred neurons (columns) of ``X``; default ``keep=None`` (no truncation, as
    in the paper). PWCCA is asymmetric: the weights come from ``X``. Needs ``n`` larger than
    the kept dimensions.
    """
    check_choice(kind, ("svcca", "pwcca"), name="kind")
    Xc, Yc = _centred_pair(X, Y)
    if kind == "svcca":
        k = 0.99 if keep is None else keep
        Qx, Qy = _basis(Xc, k, "X"), _basis(Yc, k, "Y")
        return float(torch.linalg.svdvals(Qx.T @ Qy).clamp(0.0, 1.0).mean())
    Qx, Qy = _basis(Xc, keep, "X"), _basis(Yc, keep, "Y")
    U, rho, _ = torch.linalg.svd(Qx.T @ Qy, full_matrices=False)
    H = Qx @ U  # (n, k) orthonormal canonical variates of X
    alpha = (H.T @ Xc).abs().sum(1)
    alpha = alpha / alpha.sum()
    return float((alpha * rho.clamp(0.0, 1.0)).sum())
