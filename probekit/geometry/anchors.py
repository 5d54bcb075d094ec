"""Batched anchor points of mean-field manifold analysis (Chung, Lee & Sompolinsky, PRX 2018).

For a manifold given by points ``s_j`` in ``R^{D+1}`` (last coordinate 1) and a Gaussian sample
``t``, the anchor point comes from the max-margin QP ``min_v ||v - t||^2 s.t. v.s_j <= -kappa``.
With multipliers ``a >= 0``, ``t - v = S a`` and the dual is the non-negative quadratic program

    min_a 1/2 a^T G a - b^T a,   a >= 0,   G = S^T S,   b = S^T t + kappa,

so the anchor is ``s~ = S a / sum(a)`` (``sum(a)`` is the last coordinate of ``S a``). All
``(manifold, sample)`` problems are solved at once, in two stages that share the per-manifold
``G`` (every sample of a manifold reuses it):

1. accelerated projected gradient (Nesterov's constant-momentum scheme, step ``1/L``), a fused
   batched matmul per step and no factorisation. Normalised clouds of many points in high
   dimension have ``cond(G)`` near 1 (about 1.5 for iid Gaussian clouds), so this alone solves
   them to a KKT residual of ``1e-13`` in about 20 steps;
2. for the problems it leaves unsolved (ill-conditioned ``G``, e.g. manifolds of small radius),
   a primal-dual active-set method (Hintermueller, Ito & Kunisch 2002) started from its support:
   free set ``I``, solve ``G_II a_I = b_I`` (problems grouped by ``|I|``, one batched Cholesky
   per group), move ``j`` out of ``I`` if ``a_j <= 0`` and into ``I`` if its gradient
   ``(G a - b)_j < 0``; stop when ``I`` repeats (exact KKT point); a batched Lawson-Hanson pass
   finishes the rare problems on which it cycles.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from ..shapes import shape_checked
from ..util.threads import small_work_threads


@dataclass(frozen=True)
class AnchorSolution:
    """Anchor points for every (manifold, sample) pair.

    Attributes:
        anchors: ``(p, d1, t)`` anchor points ``s~`` (last coordinate 1).
        solved: ``(p, t)`` True where a QP was solved (``max_j t.s_j + kappa >= 0``).
        iterations: active-set iterations of the slowest problem.
        n_projected_gradient: problems solved by the projected-gradient stage alone.
        n_unconverged: problems still changing their free set at ``max_iter`` (0 in all tests).
    """

    anchors: Float[Tensor, "p d1 t"]
    solved: Bool[Tensor, "p t"]
    iterations: int
    n_projected_gradient: int
    n_unconverged: int


@shape_checked
def anchor_points(
    points: Float[Tensor, "p d1 m"],
    t: Float[Tensor, "p d1 t"],
    *,
    kappa: float = 0.0,
    eps: float = 1e-8,
    max_iter: int = 30,
    chunk: int = 4096,
    pg_steps: int = 20,
    pg_tol: float = 1e-13,
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
        pg_steps: steps of accelerated projected gradient run first on every problem (one
            batched matmul per step, no factorisation): problems it solves to ``pg_tol`` are
            done (typical for well-conditioned Gram matrices); on the others its support
            starts the active-set method. 0: active set from the support of ``b > 0``.
        pg_tol: relative KKT residual at which a projected-gradient solution is accepted.

    Returns:
        AnchorSolution with ``(p, d1, t)`` anchors.
    """
    p, d1, m = points.shape
    n_t = t.shape[2]
    gram = points.transpose(1, 2) @ points  # (p, m, m)
    proj = torch.einsum("pdm,pdt->ptm", points, t)  # (p, t, m): s_j . t
    gg, jmax = proj.max(dim=2)  # (p, t)
    ss = torch.gather(points, 2, jmax.unsqueeze(1).expand(p, d1, n_t))  # (p, d1, t)
    b = proj.add_(kappa) if kappa else proj  # (p, t, m)
    need = gg + kappa >= 0
    diag_max = torch.diagonal(gram, dim1=1, dim2=2).amax(dim=1)  # (p,)
    eye_m = torch.eye(m, dtype=gram.dtype, device=gram.device)
    gram_flat = (gram + 1e-13 * diag_max[:, None, None] * eye_m).reshape(-1)
    tol = 1e-11 * (1.0 + _abs_max(b))  # (p, t)

    # every step below is one batched op on (p, t, m) x (p, m, m): one thread when that is small
    # (util.threads: parallel regions of tiny ops spin against a busy core)
    with small_work_threads(work=2 * p * n_t * m * m):
        if pg_steps > 0:  # exact on well-conditioned manifolds, a free-set predictor on the rest
            a, ok = _projected_gradient(gram, b, pg_steps, pg_tol)
            free = (a > 0) & need.unsqueeze(2)
            active = need & ~ok
            n_pg = int((need & ok).sum())
        else:
            n_pg = 0
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
            a[pi, ti] = _solve_free(gram_flat, b[pi, ti], pi, free[pi, ti], chunk)
            grad = torch.bmm(a, gram) - b  # (p, t, m), gram symmetric
            new_free = (free & (a > 0)) | (~free & (grad < -tol.unsqueeze(2)))
            changed = (new_free != free).any(dim=2) & active
            free = torch.where(active.unsqueeze(2), new_free, free)
            active = changed
        if bool(active.any()):  # PDAS can cycle on ill-conditioned problems: finish them monotonely
            idx = active.nonzero()
            for start in range(0, idx.shape[0], chunk):
                pi, ti = idx[start : start + chunk, 0], idx[start : start + chunk, 1]
                with small_work_threads(work=2 * pi.shape[0] * m * m):  # (nb, m, m) @ (nb, m)
                    sol_lh, ok = _lawson_hanson(gram, gram_flat, b[pi, ti], tol[pi, ti], pi,
                                                3 * m + 10)
                a[pi, ti] = sol_lh
                active[pi[ok], ti[ok]] = False
    n_unconverged = int(active.sum())

    w = torch.bmm(points, a.transpose(1, 2))  # (p, d1, t) = t - v
    wnorm = w.norm(dim=1)
    use_qp = need & (wnorm >= eps)
    scale = torch.where(use_qp, w[:, -1, :], torch.ones_like(wnorm))
    anchors = torch.where(use_qp.unsqueeze(1), w / scale.unsqueeze(1), ss)
    return AnchorSolution(
        anchors=anchors, solved=need, iterations=iterations, n_projected_gradient=n_pg,
        n_unconverged=n_unconverged
    )


def _abs_max(x: Float[Tensor, "p t m"]) -> Float[Tensor, "p t"]:
    """``max_j |x_j|`` without an ``|x|`` temporary."""
    return torch.maximum(x.amax(dim=2), x.amin(dim=2).neg_())


def _projected_gradient(
    gram: Float[Tensor, "p m m"], b: Float[Tensor, "p t m"], max_steps: int, tol: float
) -> tuple[Float[Tensor, "p t m"], Bool[Tensor, "p t"]]:
    """Accelerated projected gradient for ``min 1/2 a^T G a - b^T a, a >= 0`` (all problems).

    Nesterov's constant-momentum scheme for strongly convex objectives (step ``1/L``, momentum
    ``beta = (sqrt(kappa) - 1) / (sqrt(kappa) + 1)``), linear rate ``1 - 1/sqrt(kappa)``:
    ``a+ = max(y (I - G/L) + b/L, 0)``, ``y+ = a+ + beta (a+ - a)`` (one fused batched matmul
    and two elementwise passes per step). A problem is converged when its fixed-point residual
    ``max_j |min(a_j, (G a - b)_j / L)|`` is at most ``tol (1 + max_j |b_j|) / L``.
    """
    ev = torch.linalg.eigvalsh(gram)
    lmax = ev[:, -1].view(-1, 1, 1)
    # 1/sqrt(kappa), floored at 1e-2: singular Gram matrices still get a damped momentum
    sq = torch.sqrt(torch.clamp(ev[:, 0].view(-1, 1, 1) / lmax, min=1e-4))
    weight = 1.0 + (1.0 - sq) / (1.0 + sq)  # y+ = lerp(a, a+, 1 + beta)
    eye = torch.eye(gram.shape[1], dtype=gram.dtype, device=gram.device)
    step_mat = eye - gram / lmax  # (p, m, m), symmetric
    b_l = b / lmax
    thresh = tol * (1.0 + _abs_max(b)) / lmax.view(-1, 1)
    a = torch.zeros_like(b)
    a_new = torch.empty_like(b)
    y = torch.zeros_like(b)
    ok = torch.zeros(b.shape[:2], dtype=torch.bool, device=b.device)
    for step in range(1, max_steps + 1):
        torch.baddbmm(b_l, y, step_mat, out=a_new)
        a_new.clamp_(min=0.0)
        torch.lerp(a, a_new, weight, out=y)
        a, a_new = a_new, a
        if step % 10 == 0 or step == max_steps:
            g = torch.baddbmm(b_l, a, step_mat).sub_(a).neg_()  # (G a - b) / L
            ok = _abs_max(torch.minimum(a, g, out=g)) <= thresh
            if bool(ok.all()):
                break
    return a, ok


def _solve_free(
    gram_flat: Float[Tensor, " n"],
    b: Float[Tensor, "nb m"],
    pi: Tensor,
    free: Bool[Tensor, "nb m"],
    chunk: int,
) -> Float[Tensor, "nb m"]:
    """Solve ``G_II a_I = b_I`` (zero outside ``I``) for a batch of problems.

    Problems are grouped by ``|I|`` so that each group is one unpadded batched Cholesky;
    ``gram_flat`` is the flattened ``(p, m, m)`` Gram matrix and ``pi`` each problem's manifold.
    """
    nb, m = free.shape
    out = torch.zeros(nb * m, dtype=b.dtype, device=b.device)
    k = free.sum(dim=1)
    ks, order = torch.sort(k)
    sizes, counts = torch.unique_consecutive(ks, return_counts=True)
    start = 0
    for kv, cnt in zip(sizes.tolist(), counts.tolist()):
        for lo in range(start, start + cnt, chunk):
            sel = order[lo : min(lo + chunk, start + cnt)]
            if kv:
                var = free[sel].nonzero()[:, 1].view(-1, kv)  # (g, kv) free indices, ascending
                flat = (pi[sel] * (m * m)).view(-1, 1, 1) + var.unsqueeze(2) * m + var.unsqueeze(1)
                sub = gram_flat[flat]  # (g, kv, kv) = G_II
                rhs = b[sel].gather(1, var).unsqueeze(2)
                out[(sel * m).unsqueeze(1) + var] = _spd_solve(sub, rhs).squeeze(2)
        start += cnt
    return out.view(nb, m)


def _spd_solve(
    sub: Float[Tensor, "g k k"], rhs: Float[Tensor, "g k 1"]
) -> Float[Tensor, "g k 1"]:
    """Batched SPD solve by Cholesky ``sub = U^T U``; least squares where it is indefinite."""
    u, info = torch.linalg.cholesky_ex(sub, upper=True)
    y = torch.linalg.solve_triangular(u.mT, rhs, upper=False)
    x = torch.linalg.solve_triangular(u, y, upper=True)
    bad = info != 0
    if bool(bad.any()):  # numerically indefinite (near-duplicate points): least squares
        x[bad] = torch.linalg.lstsq(sub[bad], rhs[bad]).solution
    return x


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
        z = torch.zeros_like(b)
        lv = live.nonzero().squeeze(1)
        z[lv] = _solve_free(gram_flat, b[lv], pi[lv], passive[lv], 4096)
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
