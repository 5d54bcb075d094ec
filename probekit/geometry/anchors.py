"""Batched anchor points of mean-field manifold analysis (Chung, Lee & Sompolinsky, PRX 2018).

For a manifold given by points ``s_j`` in ``R^{D+1}`` (last coordinate 1) and a Gaussian sample
``t``, the anchor point comes from the max-margin QP ``min_v ||v - t||^2 s.t. v.s_j <= -kappa``.
With multipliers ``a >= 0``, ``t - v = S a`` and the dual is the non-negative quadratic program

    min_a 1/2 a^T G a - b^T a,   a >= 0,   G = S^T S,   b = S^T t + kappa,

so the anchor is ``s~ = S a / sum(a)`` (``sum(a)`` is the last coordinate of ``S a``). All
``(manifold, sample)`` problems are solved at once by a primal-dual active-set method
(Hintermueller, Ito & Kunisch 2002): free set ``I``, solve ``G_II a_I = b_I`` (one Cholesky per
problem, problems batched and bucketed by ``|I|``), move ``j`` out of ``I`` if ``a_j <= 0`` and into
``I`` if its gradient ``(G a - b)_j < 0``; stop when ``I`` repeats (exact KKT point). The shared
matrices ``G`` per manifold make the gradient pass one batched matmul.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float
from torch import Tensor


@dataclass(frozen=True)
class AnchorSolution:
    """Anchor points for every (manifold, sample) pair.

    Attributes:
        anchors: ``(p, d1, t)`` anchor points ``s~`` (last coordinate 1).
        solved: ``(p, t)`` True where a QP was solved (``max_j t.s_j + kappa >= 0``).
        iterations: active-set iterations of the slowest problem.
        n_unconverged: problems still changing their free set at ``max_iter`` (0 in all tests).
    """

    anchors: Float[Tensor, "p d1 t"]
    solved: Bool[Tensor, "p t"]
    iterations: int
    n_unconverged: int


def anchor_points(
    points: Float[Tensor, "p d1 m"],
    t: Float[Tensor, "p d1 t"],
    *,
    kappa: float = 0.0,
    eps: float = 1e-8,
    max_iter: int = 30,
    chunk: int = 4096,
) -> AnchorSolution:
    """Anchor points of the max-margin QP for all manifolds and samples at once.

    Follows ``each_manifold_analysis_D1`` of the reference code: when ``max_j t.s_j + kappa < 0``
    the anchor is the point of largest projection and no QP is solved; when the QP solution ``v``
    is within ``eps`` of ``t`` the same point is used; otherwise ``s~ = (t - v) / sum(a)``.

    Args:
        points: ``(p, d1, m)`` manifold points, last row all ones (pad a manifold with fewer
            points by repeating one of its points: the cone they span is unchanged).
        t: ``(p, d1, t)`` Gaussian samples.
        kappa: margin.
        eps: threshold on ``||v - t||`` below which ``v = t`` (as the reference).
        max_iter: cap on active-set iterations.
        chunk: problems per batched Cholesky.

    Returns:
        AnchorSolution with ``(p, d1, t)`` anchors.
    """
    p, d1, m = points.shape
    n_t = t.shape[2]
    gram = points.transpose(1, 2) @ points  # (p, m, m)
    proj = torch.einsum("pdm,pdt->ptm", points, t)  # (p, t, m): s_j . t
    gg, jmax = proj.max(dim=2)  # (p, t)
    ss = torch.gather(points, 2, jmax.unsqueeze(1).expand(p, d1, n_t))  # (p, d1, t)
    b = proj + kappa  # (p, t, m)
    need = gg + kappa >= 0
    # padded slots of a compacted system point at dummy variables m..2m-1 (identity block, b=0)
    diag_max = torch.diagonal(gram, dim1=1, dim2=2).amax(dim=1)  # (p,)
    eye_m = torch.eye(m, dtype=gram.dtype, device=gram.device)
    gram_ext = torch.zeros(p, 2 * m, 2 * m, dtype=gram.dtype, device=gram.device)
    gram_ext[:, :m, :m] = gram + 1e-13 * diag_max[:, None, None] * eye_m
    gram_ext[:, m:, m:] = eye_m
    gram_flat = gram_ext.reshape(-1)
    tol = 1e-11 * (1.0 + b.abs().amax(dim=2))  # (p, t)

    a = torch.zeros_like(b)
    free = (b > 0) & need.unsqueeze(2)
    active = need.clone()
    iterations = 0
    for it in range(max_iter):
        idx = active.nonzero()
        if idx.shape[0] == 0:
            break
        iterations = it + 1
        pi, ti = idx[:, 0], idx[:, 1]
        fsub = free[pi, ti]  # (nb, m)
        k = fsub.sum(dim=1)
        order_k = torch.argsort(k)
        for start in range(0, order_k.numel(), chunk):
            sel = order_k[start : start + chunk]
            a[pi[sel], ti[sel]] = _solve_free(gram_flat, b[pi[sel], ti[sel]], pi[sel], fsub[sel],
                                              k[sel])
        grad = torch.bmm(a, gram) - b  # (p, t, m), gram symmetric
        new_free = (free & (a > 0)) | (~free & (grad < -tol.unsqueeze(2)))
        changed = (new_free != free).any(dim=2) & active
        free = torch.where(active.unsqueeze(2), new_free, free)
        active = changed
    if bool(active.any()):  # PDAS can cycle on ill-conditioned problems: finish them monotonely
        idx = active.nonzero()
        for start in range(0, idx.shape[0], chunk):
            pi, ti = idx[start : start + chunk, 0], idx[start : start + chunk, 1]
            sol_lh, ok = _lawson_hanson(gram, gram_flat, b[pi, ti], tol[pi, ti], pi, 3 * m + 10)
            a[pi, ti] = sol_lh
            active[pi[ok], ti[ok]] = False
    n_unconverged = int(active.sum())

    w = torch.bmm(points, a.transpose(1, 2))  # (p, d1, t) = t - v
    wnorm = w.norm(dim=1)
    use_qp = need & (wnorm >= eps)
    scale = torch.where(use_qp, w[:, -1, :], torch.ones_like(wnorm))
    anchors = torch.where(use_qp.unsqueeze(1), w / scale.unsqueeze(1), ss)
    return AnchorSolution(
        anchors=anchors, solved=need, iterations=iterations, n_unconverged=n_unconverged
    )


def _solve_free(
    gram_flat: Float[Tensor, " n"],
    b: Float[Tensor, "nb m"],
    pi: Tensor,
    free: Bool[Tensor, "nb m"],
    k: Tensor,
) -> Float[Tensor, "nb m"]:
    """Solve ``G_II a_I = b_I`` for a batch of problems (padded to the largest ``|I|``).

    ``gram_flat`` is the flattened ``(p, 2m, 2m)`` Gram matrix extended by an identity block of
    dummy variables; padded slot ``r`` of a system uses dummy ``m + r``.
    """
    nb, m = free.shape
    kmax = int(k.max()) if nb else 0
    out = torch.zeros(nb, m, dtype=b.dtype, device=b.device)
    if kmax == 0:
        return out
    order = torch.argsort((~free).to(torch.int8), dim=1, stable=True)[:, :kmax]  # free first
    slot = torch.arange(kmax, device=b.device)
    valid = slot.unsqueeze(0) < k.unsqueeze(1)
    var = torch.where(valid, order, m + slot)  # (nb, kmax) indices into the extended system
    flat = (pi * (4 * m * m)).view(-1, 1, 1) + var.unsqueeze(2) * (2 * m) + var.unsqueeze(1)
    sub = gram_flat[flat]  # (nb, kmax, kmax)
    rhs = torch.where(valid, b.gather(1, order), 0.0)
    chol, info = torch.linalg.cholesky_ex(sub)
    y = torch.linalg.solve_triangular(chol, rhs.unsqueeze(2), upper=False)
    x = torch.linalg.solve_triangular(chol.mT, y, upper=True).squeeze(2)
    bad = info != 0
    if bool(bad.any()):  # numerically indefinite (near-duplicate points): least squares
        x[bad] = torch.linalg.lstsq(sub[bad], rhs[bad].unsqueeze(2)).solution.squeeze(2)
    return out.scatter(1, order, torch.where(valid, x, 0.0))


def _lawson_hanson(
    gram: Float[Tensor, "p m m"],
    gram_flat: Float[Tensor, " n"],
    b: Float[Tensor, "nb m"],
    tol: Float[Tensor, " nb"],
    pi: Tensor,
    max_iter: int,
) -> tuple[Float[Tensor, "nb m"], Bool[Tensor, " nb"]]:
    """Batched Lawson-Hanson for ``min 1/2 a^T G a - b^T a, a >= 0`` (one step per round).

    Each round, a problem either adds the variable of largest negative gradient to its passive
    set (after an accepted solve) or steps back along the segment to the infeasible solve and
    drops the variables that hit zero. Returns the solutions and a converged flag.
    """
    nb, m = b.shape
    g = gram[pi]  # (nb, m, m)
    a = torch.zeros_like(b)
    passive = torch.zeros_like(b, dtype=torch.bool)
    adding = torch.ones(nb, dtype=torch.bool, device=b.device)
    done = torch.zeros(nb, dtype=torch.bool, device=b.device)
    for _ in range(max_iter):
        grad = b - (g @ a.unsqueeze(2)).squeeze(2)  # minus the gradient
        best, j = torch.where(passive, float("-inf"), grad).max(dim=1)
        done |= adding & (best <= tol)
        add = adding & ~done
        passive[add.nonzero().squeeze(1), j[add]] = True
        live = ~done
        if not bool(live.any()):
            break
        k = passive.sum(dim=1)
        z = torch.zeros_like(b)
        lv = live.nonzero().squeeze(1)
        z[lv] = _solve_free(gram_flat, b[lv], pi[lv], passive[lv], k[lv])
        feasible = ((z > 0) | ~passive).all(dim=1)
        accept = live & feasible
        a = torch.where(accept.unsqueeze(1), z, a)
        back = live & ~feasible
        ratio = torch.where(passive & (z <= 0), a / (a - z).clamp(min=1e-300), float("inf"))
        step = ratio.min(dim=1).values.clamp(max=1.0).unsqueeze(1)
        stepped = a + step * (z - a)
        passive = torch.where(back.unsqueeze(1), passive & (stepped > 1e-14 * stepped.abs().amax(
            dim=1, keepdim=True)), passive)
        a = torch.where(back.unsqueeze(1), torch.where(passive, stepped, 0.0), a)
        adding = accept
    return a, done
