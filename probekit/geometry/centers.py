"""Common centre subspace of a set of manifolds (Cohen, Chung, Lee & Sompolinsky, Nat. Commun. 2020).

Manifold centres often share a low-rank structure (e.g. a common offset direction) that inflates
capacity estimates. Following ``fun_FA`` of the reference code (schung039/neural_manifolds_replicaMFT),
the centres are globally centred, written in a ``(P-1)``-dim orthonormal basis ``X`` (rows = centres),
and for ``K = 1, 2, ...`` a ``K``-dim subspace ``V`` is fitted by minimising

    F(V) = 1/2 sum_{m,n} (C_mn - c_m.c_n)^2 / (c0_m c0_n),   C = X X^T, c = X V, c0_m = C_mm - |c_m|^2,

the squared correlation left between centres after removing ``V``. Each ``K`` uses ``n_reps``
random starts; the start whose residual centres keep the largest minimum norm ratio ("stability")
wins. ``K`` is the argmin of the residual mean absolute centre correlation; the loop stops after
three consecutive increases. The reference optimises on the Stiefel manifold with pymanopt's
conjugate gradient; here the cost (which depends only on span(V)) is minimised with L-BFGS over an
unconstrained ``W`` with ``V`` an orthonormal basis of span(W), all starts at once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
from jaxtyping import Float
from scipy.optimize import minimize
from torch import Tensor

from ..errors import DataError
from ..shapes import shape_checked
from ..util.threads import small_work_threads


@dataclass(frozen=True)
class CenterSubspace:
    """Result of the common-centre subspace fit.

    Attributes:
        basis: ``(n, k)`` orthonormal basis of the removed subspace in the ambient space.
        n_common: ``K``, its dimension.
        center_correlation: mean ``|cos|`` over pairs of globally centred centres (``res_coeff0``).
        residual_correlation: mean ``|cos|`` left after removing the best ``K``-dim subspace,
            for each ``K`` tried (``res_coeff``).
    """

    basis: Float[Tensor, "n k"]
    n_common: int
    center_correlation: float
    residual_correlation: tuple[float, ...]


def mean_abs_correlation(x: Float[Tensor, "p d"]) -> float:
    """Mean ``|cos|`` between distinct rows: ``(sum |C| - P) / (P (P - 1))``, C = cosine matrix."""
    norms = x.norm(dim=1, keepdim=True)
    cos = (x @ x.T) / (norms @ norms.T)
    p = x.shape[0]
    return float((cos.abs().sum() - p) / (p * (p - 1)))


def max_common_dim(centers: Float[Tensor, "n p"]) -> int:
    """The reference's cap on ``K``: 11 + index of the last PC with cumulative variance < 0.95."""
    sv = torch.linalg.svdvals(centers - centers.mean(dim=1, keepdim=True))
    total = torch.cumsum(sv**2 / (sv**2).sum(), dim=0)
    below = torch.where(total < 0.95, total, torch.zeros_like(total))
    return int(torch.argmax(below)) + 11


def _residual_cost(
    w: Float[Tensor, "r b k"], x: Float[Tensor, "p b"], gram: Float[Tensor, "p p"]
) -> tuple[Float[Tensor, ""], Float[Tensor, "r b k"]]:
    """Sum over starts of F(V), V an orthonormal basis of span(W), and its W-gradient.

    ``V = W R^{-1}`` with ``R^T R = W^T W`` (Cholesky: an orthonormal basis of span(W)).
    With ``A = H / (c0 c0^T)``, ``E = H * A``: ``dF/dc = -2 A c + 2 diag(rowsum(E) / c0) c``,
    ``G = X^T dF/dc``; F depends on span(V) only, so ``dF/dW = (I - V V^T) G R^{-T}``.
    """
    r = torch.linalg.cholesky(w.transpose(1, 2) @ w).transpose(1, 2)  # W = V R, R upper
    v = torch.linalg.solve_triangular(r, w, upper=True, left=False)
    c = torch.einsum("pb,rbk->rpk", x, v)
    c0 = torch.diagonal(gram) - (c**2).sum(dim=2)  # (r, p)
    h = gram - c @ c.transpose(1, 2)
    a = h / (c0.unsqueeze(2) * c0.unsqueeze(1))
    e = h * a
    grad_c = -2 * a @ c + 2 * (e.sum(dim=2) / c0).unsqueeze(2) * c
    g = torch.einsum("pb,rpk->rbk", x, grad_c)
    g = g - v @ (v.transpose(1, 2) @ g)
    grad_w = torch.linalg.solve_triangular(r, g.transpose(1, 2), upper=True).transpose(1, 2)
    return e.sum() / 2, grad_w


def _fit_subspaces(
    x: Float[Tensor, "p b"], k: int, n_reps: int, gen: torch.Generator, max_iter: int
) -> Float[Tensor, "r b k"]:
    """Minimise F from ``n_reps`` random starts at once; returns each start's orthonormal V."""
    shape = (n_reps, x.shape[1], k)
    w0 = torch.randn(shape, generator=gen, dtype=x.dtype)
    gram = x @ x.T

    def fun(flat: np.ndarray) -> tuple[float, np.ndarray]:
        cost, grad = _residual_cost(torch.from_numpy(flat).reshape(shape), x, gram)
        return float(cost), grad.reshape(-1).numpy()

    # scipy's BLAS threads and torch's OpenMP threads take turns every iteration on vectors of
    # a few hundred entries; both spin while waiting, which made each step ~30x slower on 2 cores
    # (and beside a busy core ~13x slower again: docs/bench/README.md). The largest op of the
    # objective is ``c c^T`` / ``a c``: 2 r p^2 k flops (``X V``: 2 r p b k, b < p).
    p, b = x.shape
    with small_work_threads(work=2 * n_reps * p * max(p, b) * k):
        res = minimize(fun, w0.reshape(-1).numpy(), jac=True, method="L-BFGS-B",
                       options={"maxiter": max_iter, "gtol": 1e-6, "ftol": 1e-10})
    return torch.linalg.qr(torch.from_numpy(res.x).reshape(shape)).Q


@shape_checked
def common_center_subspace(
    centers: Float[Tensor, "n p"],
    *,
    max_k: int | None = None,
    n_reps: int = 10,
    generator: torch.Generator | None = None,
    max_iter: int = 1000,
) -> CenterSubspace:
    """Fit the common centre subspace as the reference's ``fun_FA``.

    Args:
        centers: ``(n, p)`` manifold centres as columns (after global centring or not: the
            centres' mean is removed here).
        max_k: largest ``K`` tried (default :func:`max_common_dim`); capped at ``P - 2``.
        n_reps: random starts per ``K``.
        generator: torch generator for the starts.
        max_iter: L-BFGS iterations per ``K``.

    Returns:
        CenterSubspace with the ambient basis of the chosen ``K``.

    Raises:
        DataError: non-finite or identical centres, or a singular fit at ``K = 1`` (Cholesky of
            a singular Gram matrix, named instead of torch's ``LinAlgError``). A fit that turns
            singular at a larger ``K`` (nearly degenerate centres) ends the search there: ``K``
            is chosen among the smaller ones already fitted, as the search stops at a rising
            residual.
    """
    gen = generator if generator is not None else torch.Generator().manual_seed(0)
    centers = centers.to(torch.float64)
    n, p = centers.shape
    xb = (centers - centers.mean(dim=1, keepdim=True)).T  # (p, n)
    if not bool(torch.isfinite(xb).all()):
        raise DataError("centers contain NaN or inf; pass finite manifold centres")
    rank = int(torch.linalg.matrix_rank(xb)) if xb.numel() else 0
    if rank == 0:
        raise DataError(
            f"the {p} manifold centres are identical (they span 0 dimensions once their mean is "
            "removed), so there is no common centre subspace to fit; check that the classes "
            "differ (labels, site) or skip the centre analysis"
        )
    q = torch.linalg.qr(xb.T).Q[:, : p - 1]  # (n, <= p-1)
    x = xb @ q  # (p, b)
    res0 = mean_abs_correlation(x)
    k_cap = min(max_k if max_k is not None else max_common_dim(centers), x.shape[1] - 1)
    xnorm = x.norm(dim=1)
    bases: list[Tensor] = []
    res: list[float] = []
    for k in range(1, k_cap + 1):
        try:
            vs = _fit_subspaces(x, k, n_reps, gen, max_iter)  # (r, b, k)
        except torch.linalg.LinAlgError:
            if k > 1:  # no larger K fits: choose among the K < k already fitted
                break
            raise DataError(
                f"common centre subspace: the fit of K={k} became singular (the {p} centres span "
                f"{rank} dimension(s), nearly degenerate); pass max_k={max(k - 1, 1)} or centres "
                "of classes that differ more"
            ) from None
        resid = x - torch.einsum("pb,rbk,rck->rpc", x, vs, vs)
        stability = (resid.norm(dim=2) / xnorm).amin(dim=1)
        v = vs[int(torch.argmax(stability))]
        bases.append(v)
        res.append(mean_abs_correlation(x - x @ v @ v.T))
        if k > 4 and res[-1] > res[-2] > res[-3] > res[-4]:
            break
    best = int(np.argmin(res)) if res else -1
    if best < 0:
        return CenterSubspace(basis=torch.zeros(n, 0, dtype=centers.dtype), n_common=0,
                              center_correlation=res0, residual_correlation=())
    return CenterSubspace(
        basis=q @ bases[best],
        n_common=best + 1,
        center_correlation=res0,
        residual_correlation=tuple(res),
    )


def fixed_center_subspace(
    centers: Float[Tensor, "n p"], basis: Float[Tensor, "n k"]
) -> CenterSubspace:
    """A given ``(n, k)`` common-centre basis with its correlations (no fit)."""
    centers = centers.to(torch.float64)
    xb = (centers - centers.mean(dim=1, keepdim=True)).T
    resid = xb - (xb @ basis) @ basis.T
    return CenterSubspace(basis=basis, n_common=int(basis.shape[1]),
                          center_correlation=mean_abs_correlation(xb),
                          residual_correlation=(mean_abs_correlation(resid),))
