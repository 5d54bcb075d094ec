"""Multinomial L2 logistic probe: a batched torch solver and an sklearn estimator.

Objective (per problem), exactly sklearn's ``LogisticRegression(C=C)`` parametrisation::

    min_{W, b}  sum_{i in train} CE(softmax(x_i W + b), y_i) + ||W||_F^2 / (2 C)

with an unpenalised intercept ``b``. For ``K > 2`` classes ``W`` has one column per class
(sklearn's symmetric multinomial); for ``K == 2`` a single logit ``z = x w + b`` is used
(``p(y=1) = sigmoid(z)``), which is how sklearn parametrises the binary case (the symmetric
two-column form would halve the effective penalty).

Solver: L-BFGS (Nocedal & Wright 2006, Alg. 7.4) run *simultaneously* on a batch of
independent problems that share a design matrix per layer. Problems differ in training rows
(CV folds), label vector (permutations, control tasks) and ``C``. Each iteration is one
``bmm`` of ``(layer, n, d+1) @ (layer, d+1, problem*K)`` forward and one backward, so the CV
grid and the folds become extra GEMM columns instead of a Python loop. The initial inverse
Hessian is the inverse of Böhning's (1992) curvature bound
``H <= beta (I - 11^T/K) (x) X^T X + I/C`` (``beta = 1/2``, or ``1/4`` for the binary logit),
diagonal in the eigenbasis of the layer's Gram matrix, so the first step is a monotone MM step
and later steps are quasi-Newton. Step sizes come from a per-problem Armijo backtracking search.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Int
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.model_selection import StratifiedKFold
from sklearn.utils.multiclass import check_classification_targets
from sklearn.utils.validation import check_is_fitted, validate_data
from torch import Tensor

__all__ = [
    "BatchedLogisticFit",
    "LogisticCVResult",
    "LogisticProbe",
    "c_grid",
    "cv_logistic_batched",
    "fit_logistic_batched",
]

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def c_grid(Cs: int | Sequence[float]) -> np.ndarray:
    """The inverse-regularisation grid: an int ``k`` means ``np.logspace(-4, 4, k)`` (sklearn)."""
    if isinstance(Cs, (int, np.integer)):
        if Cs < 1:
            raise ValueError(f"Cs must be a positive int or a sequence of floats, got {Cs}")
        return np.logspace(-4, 4, int(Cs))
    grid = np.asarray(Cs, dtype=np.float64).reshape(-1)
    if grid.size == 0 or not np.all(grid > 0) or not np.all(np.isfinite(grid)):
        raise ValueError(f"Cs must be finite positive values, got {grid.tolist()}")
    return grid


@dataclass(frozen=True, kw_only=True)
class BatchedLogisticFit:
    """Solutions of a batch of logistic problems.

    Attributes:
        coef: ``(layer, d, problem, k)`` weights on the input features (``k = 1`` if binary).
        intercept: ``(layer, problem, k)``.
        n_iter: ``(layer, problem)`` L-BFGS iterations used.
        converged: ``(layer, problem)`` gradient tolerance reached (or no further decrease
            representable in the compute dtype).
    """

    coef: Float[Tensor, "layer d problem k"]
    intercept: Float[Tensor, "layer problem k"]
    n_iter: Int[Tensor, "layer problem"]
    converged: Bool[Tensor, "layer problem"]

    def logits(self, X: Float[Tensor, "layer m d"]) -> Float[Tensor, "layer m problem k"]:
        """Decision values ``X W + b`` for every problem (binary: the single logit)."""
        L, d, P, K = self.coef.shape
        W = self.coef.to(X.dtype).reshape(L, d, P * K)
        Z = torch.bmm(X, W).view(L, X.shape[1], P, K)
        return Z + self.intercept.to(X.dtype).unsqueeze(1)

    def predict_codes(self, X: Float[Tensor, "layer m d"]) -> Int[Tensor, "layer m problem"]:
        """Predicted class codes ``0..K-1``."""
        Z = self.logits(X)
        if Z.shape[-1] == 1:
            return (Z[..., 0] > 0).long()
        return Z.argmax(-1)


def _centred_gram_eig(X: Tensor, used: Tensor) -> tuple[Tensor, Tensor]:
    """``(lam, V)``: float64 eigendecomposition of the centred Gram matrix of the ``used`` rows.

    The Gram matrix is accumulated in ``X``'s dtype: it only shapes the preconditioner, so float32
    rounding cannot move the solution, and the float32 GEMM is ~3x cheaper than float64.
    """
    Xu = X[:, used]
    Xu = Xu - Xu.mean(1, keepdim=True)
    lam, V = torch.linalg.eigh(torch.bmm(Xu.transpose(1, 2), Xu).to(torch.float64))
    return lam.clamp_min(0.0), V


def _row_span_basis(X: Tensor, used: Tensor) -> Tensor:
    """``(layer, d, n_used)`` float64 orthonormal basis containing the span of the used rows."""
    return torch.linalg.qr(X[:, used].to(torch.float64).transpose(1, 2)).Q


def _lift(fit: BatchedLogisticFit, Q: Tensor) -> BatchedLogisticFit:
    """Map weights fit on ``X @ Q`` back to the features of ``X``: ``W = Q W_r``."""
    L, r, P, K = fit.coef.shape
    coef = torch.bmm(Q, fit.coef.to(Q.dtype).reshape(L, r, P * K)).view(L, Q.shape[1], P, K)
    return BatchedLogisticFit(
        coef=coef, intercept=fit.intercept, n_iter=fit.n_iter, converged=fit.converged
    )


def fit_logistic_batched(
    X: Float[Tensor, "layer n d"],
    y: Int[Tensor, "target n"] | Int[Tensor, " n"],
    n_classes: int,
    *,
    train_mask: Bool[Tensor, "problem n"],
    C: Float[Tensor, " problem"],
    target_index: Int[Tensor, " problem"] | None = None,
    init: BatchedLogisticFit | None = None,
    active: Bool[Tensor, "layer problem"] | None = None,
    max_iter: int = 200,
    tol: float = 1e-5,
    history: int = 10,
    max_linesearch: int = 20,
    gram_eig: tuple[Tensor, Tensor] | None = None,
) -> BatchedLogisticFit:
    """Fit ``layer x problem`` independent L2 logistic regressions in one batched L-BFGS.

    Args:
        X: features per layer (already standardised if desired); its dtype is the compute dtype
            of the GEMMs (float32 is ~2x faster, float64 matches sklearn to more digits).
        y: class codes in ``[0, n_classes)``; row ``target_index[p]`` is problem ``p``'s labels.
        n_classes: ``K`` (``K == 2`` uses the binary single-logit parametrisation).
        train_mask: rows each problem is fit on (e.g. the training part of a CV fold).
        C: inverse regularisation per problem (sklearn's ``C``, scaling the *sum* of losses).
        target_index: label row per problem; default all problems use ``y[0]``.
        init: warm start (same shapes as the result).
        active: problems to solve; the others are left at ``init`` (or zero).
        max_iter: L-BFGS iteration cap (per batch; converged problems stop moving and are
            dropped from the GEMMs).
        tol: stop a problem when ``max |grad| / n_train <= tol`` (sklearn's ``gtol`` on its
            mean-loss objective; default is 10x tighter than sklearn's ``tol=1e-4``).
        history: L-BFGS memory.
        max_linesearch: Armijo halvings before a problem is declared converged (happens only
            when float rounding hides any further decrease).
        gram_eig: ``_centred_gram_eig(X, train_mask.any(0))`` from an earlier call on the same
            ``X`` and rows, to reuse the preconditioner's eigendecomposition.

    Returns:
        BatchedLogisticFit with weights on the given feature scale.
    """
    if X.ndim != 3:
        raise ValueError(f"expected X of shape (layer, n, d), got {tuple(X.shape)}")
    L, n, d = X.shape
    if y.ndim == 1:
        y = y.unsqueeze(0)
    if y.shape[1] != n:
        raise ValueError(f"got {n} activations but {y.shape[1]} labels")
    if n_classes < 2:
        raise ValueError(f"need at least 2 classes to fit a logistic probe, got {n_classes}")
    P = train_mask.shape[0]
    if train_mask.shape != (P, n):
        raise ValueError(
            f"train_mask must have shape (problem, {n}), got {tuple(train_mask.shape)}"
        )
    if C.shape != (P,):
        raise ValueError(f"C must have one value per problem ({P}), got shape {tuple(C.shape)}")
    dev, cdt, f64 = X.device, X.dtype, torch.float64
    used = train_mask.any(0).to(dev)
    n_used = int(used.sum())
    if 0 < n_used < d:
        # d > n: the optimal W of every problem lies in the row span of its training rows
        # (stationarity: W = -C X^T R), a subspace of the span of all rows used by any problem.
        # Solving in an orthonormal basis Q of that span is exact (the L2 penalty and the
        # Gram-eigenbasis preconditioner are rotation invariant, so the L-BFGS iterates are the
        # same up to rounding) and shrinks every GEMM and the eigendecomposition from d to n_used.
        Q = _row_span_basis(X, used)  # (L, d, n_used)
        Xr = torch.bmm(X.to(f64), Q).to(cdt)
        init_r = None
        if init is not None:
            Pi, Ki = init.coef.shape[2], init.coef.shape[3]
            cr = torch.bmm(Q.transpose(1, 2), init.coef.to(dev, f64).reshape(L, d, Pi * Ki))
            init_r = BatchedLogisticFit(
                coef=cr.view(L, n_used, Pi, Ki),
                intercept=init.intercept,
                n_iter=init.n_iter,
                converged=init.converged,
            )
        fit = fit_logistic_batched(
            Xr,
            y,
            n_classes,
            train_mask=train_mask,
            C=C,
            target_index=target_index,
            init=init_r,
            active=active,
            max_iter=max_iter,
            tol=tol,
            history=history,
            max_linesearch=max_linesearch,
        )
        return _lift(fit, Q)
    if target_index is None:
        target_index = torch.zeros(P, dtype=torch.long, device=dev)
    binary = n_classes == 2
    Kf = 1 if binary else n_classes
    beta = 0.25 if binary else 0.5
    D1 = d + 1

    # Layout: parameters (layer, d+1, k, problem); the problem axis is innermost so that the
    # softmax over the (small) class axis is a strided, vectorised reduction.
    Xa_all = torch.cat([X, torch.ones(L, n, 1, dtype=cdt, device=dev)], dim=2)  # (L, n, D1)
    M_all = train_mask.to(dev).T.to(cdt).contiguous()  # (n, P)
    n_p_all = train_mask.sum(1).to(dev, f64)  # (P,)
    if bool((n_p_all == 0).any()):
        raise ValueError("a problem has an empty training set; every fold needs training rows")
    invC_all = (1.0 / C.to(dev, f64)).view(1, 1, 1, P)
    labels = y.to(dev)[target_index.to(dev)].T  # (n, P)
    if binary:
        Yt_all = labels.to(cdt).unsqueeze(1)  # (n, 1, P)
    else:
        Yt_all = F.one_hot(labels, n_classes).to(cdt).permute(0, 2, 1).contiguous()  # (n, K, P)

    # Preconditioner: eigenbasis of the centred Gram matrix over all rows used for training.
    lam, V_all = gram_eig if gram_eig is not None else _centred_gram_eig(X, used)
    frac = (n_p_all / float(used.sum())).view(1, 1, 1, P)
    inv_curv_all = 1.0 / (beta * lam.view(L, d, 1, 1) * frac + invC_all)  # (L, d, 1, P)
    inv_curv_b_all = (1.0 / (beta * n_p_all)).view(1, 1, P)

    class _Block:
        """Data of the sub-batch (layers ``li`` x problems ``pi``) still being solved."""

        def __init__(self, li: Tensor, pi: Tensor):
            self.li, self.pi = li, pi
            self.L, self.P = li.numel(), pi.numel()
            full_l, full_p = self.L == L, self.P == P
            self.Xa = Xa_all if full_l else Xa_all[li]
            self.M = M_all if full_p else M_all[:, pi]
            self.Yt = Yt_all if full_p else Yt_all[..., pi]
            if not binary:
                self.YM = self.Yt * self.M.unsqueeze(1)
                self.yidx = labels.unsqueeze(1) if full_p else labels[:, pi].unsqueeze(1)
            self.invC = invC_all if full_p else invC_all[..., pi]
            self.n_p = n_p_all if full_p else n_p_all[pi]
            ic = inv_curv_all if full_l else inv_curv_all[li]
            self.inv_curv = ic if full_p else ic[..., pi]
            self.inv_curv_b = inv_curv_b_all if full_p else inv_curv_b_all[..., pi]
            self.V = V_all if full_l else V_all[li]
            self.Vt = self.V.transpose(1, 2).contiguous()

    def precond(q: Tensor) -> Tensor:
        Lb, Pb = B.L, B.P
        qw, qb = q[:, :d], q[:, d]
        if not binary:
            qw = qw - qw.mean(2, keepdim=True)
            qb = qb - qb.mean(1, keepdim=True)
        t = torch.bmm(B.Vt, qw.reshape(Lb, d, Kf * Pb)).view(Lb, d, Kf, Pb) * B.inv_curv
        outw = torch.bmm(B.V, t.reshape(Lb, d, Kf * Pb)).view(Lb, d, Kf, Pb)
        return torch.cat([outw, (qb * B.inv_curv_b).unsqueeze(1)], dim=1)

    def fg(
        theta: Tensor,
        f_old: Tensor | None = None,
        g_old: Tensor | None = None,
        pending: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Objective and gradient; only layers/problems with a ``pending`` entry are recomputed."""
        if pending is None:
            all_l = all_p = True
        else:
            lays = pending.any(1).nonzero().squeeze(1)
            cols = pending[lays].any(0).nonzero().squeeze(1)
            all_l, all_p = lays.numel() == B.L, cols.numel() == B.P
        th = theta if all_l else theta[lays]
        th = th if all_p else th[..., cols]
        La, Pa = th.shape[0], th.shape[-1]
        Xl = B.Xa if all_l else B.Xa[lays]
        Mc, Yc = (B.M, B.Yt) if all_p else (B.M[:, cols], B.Yt[..., cols])
        Z = torch.bmm(Xl, th.to(cdt).reshape(La, D1, Kf * Pa)).view(La, n, Kf, Pa)
        if binary:
            z = Z[:, :, 0]
            yb = Yc[:, 0]
            nll = F.softplus(z) - yb * z
            R = ((torch.sigmoid(z) - yb) * Mc).unsqueeze(2)
        else:
            YMc, yic = (B.YM, B.yidx) if all_p else (B.YM[..., cols], B.yidx[..., cols])
            m = Z.amax(2, keepdim=True)
            R = (Z - m).exp_()
            s = R.sum(2, keepdim=True)
            zy = Z.gather(2, yic.unsqueeze(0).expand(La, -1, -1, -1))
            nll = (m + s.log() - zy).squeeze(2)
            R = R.mul_(Mc.unsqueeze(1) / s).sub_(YMc)
        w = th[:, :d]
        ic = B.invC if all_p else B.invC[..., cols]
        f = (nll * Mc).sum(1, dtype=f64) + 0.5 * (w * w * ic).sum((1, 2))
        G = torch.bmm(Xl.transpose(1, 2), R.reshape(La, n, Kf * Pa)).view(La, D1, Kf, Pa).to(f64)
        G[:, :d] += w * ic
        if all_l and all_p:
            return f, G
        f_out, g_out = f_old.clone(), g_old.clone()
        f_sub, g_sub = f_out[lays], g_out[lays]
        f_sub[:, cols] = f
        g_sub[..., cols] = G
        f_out[lays], g_out[lays] = f_sub, g_sub
        return f_out, g_out

    def dot(a: Tensor, b: Tensor) -> Tensor:
        return (a * b).sum((1, 2))

    def ex(s: Tensor) -> Tensor:
        return s.view(B.L, 1, 1, B.P)

    if init is None:
        theta_out = torch.zeros(L, D1, Kf, P, dtype=f64, device=dev)
    else:
        theta_out = torch.cat(
            [init.coef.permute(0, 1, 3, 2), init.intercept.permute(0, 2, 1).unsqueeze(1)], dim=1
        ).to(dev, f64)
    n_iter_out = torch.zeros(L, P, dtype=torch.long, device=dev)
    conv_out = torch.zeros(L, P, dtype=torch.bool, device=dev)
    B = _Block(torch.arange(L, device=dev), torch.arange(P, device=dev))
    theta = theta_out.clone()
    f, g = fg(theta)
    S: list[Tensor] = []
    Yh: list[Tensor] = []
    rho: list[Tensor] = []
    gamma = torch.ones(L, P, dtype=f64, device=dev)
    done = torch.zeros(L, P, dtype=torch.bool, device=dev)
    if active is not None:
        done |= ~active.to(dev)
    converged = torch.zeros(L, P, dtype=torch.bool, device=dev)
    n_iter = torch.zeros(L, P, dtype=torch.long, device=dev)
    ftol = 1e3 * torch.finfo(cdt).eps if cdt != f64 else 64 * torch.finfo(f64).eps

    def write_back() -> None:
        li, pi = B.li[:, None], B.pi[None, :]
        theta_out[li, :, :, pi] = theta.permute(0, 3, 1, 2)
        n_iter_out[li, pi] = n_iter
        conv_out[li, pi] = converged

    for _ in range(max_iter):
        gnorm = g.abs().amax((1, 2)) / B.n_p.view(1, B.P)
        converged |= gnorm <= tol
        done |= converged
        if bool(done.all()):
            break
        # Shrink the batch to the unfinished layers x problems once it is mostly finished.
        act = ~done
        lays = act.any(1).nonzero().squeeze(1)
        cols = act[lays].any(0).nonzero().squeeze(1)
        if lays.numel() * cols.numel() <= 0.6 * B.L * B.P:
            write_back()

            def sl4(t: Tensor) -> Tensor:
                return t[lays][..., cols]  # noqa: B023 -- used immediately

            def sl2(t: Tensor) -> Tensor:
                return t[lays][:, cols]  # noqa: B023 -- used immediately

            theta, g = sl4(theta), sl4(g)
            S, Yh = [sl4(t) for t in S], [sl4(t) for t in Yh]
            f, gamma, done, converged, n_iter = map(sl2, (f, gamma, done, converged, n_iter))
            rho = [sl2(t) for t in rho]
            B = _Block(B.li[lays], B.pi[cols])
        # Two-loop recursion with H0 = gamma * P^{-1}.
        q = g.clone()
        alphas = []
        for s_i, y_i, r_i in zip(reversed(S), reversed(Yh), reversed(rho)):
            a_i = r_i * dot(s_i, q)
            q -= ex(a_i) * y_i
            alphas.append(a_i)
        q = precond(q) * ex(gamma)
        for s_i, y_i, r_i, a_i in zip(S, Yh, rho, reversed(alphas)):
            b_i = r_i * dot(y_i, q)
            q += ex(a_i - b_i) * s_i
        direction = -q
        gd = dot(g, direction)
        bad = gd >= 0
        if bool(bad.any()):  # not a descent direction: fall back to the MM step
            direction = torch.where(ex(bad), -precond(g), direction)
            gd = dot(g, direction)
        direction = direction * ex((~done).to(f64))
        # Batched Armijo backtracking; only pending problems are recomputed.
        t = torch.ones(B.L, B.P, dtype=f64, device=dev)
        accepted = done.clone()
        f_new, g_new, th_new = f.clone(), g.clone(), theta.clone()
        for _ls in range(max_linesearch):
            th_try = theta + ex(t) * direction
            f_try, g_try = fg(th_try, f, g, ~accepted)
            ok = (~accepted) & (f_try <= f + 1e-4 * t * gd)
            f_new = torch.where(ok, f_try, f_new)
            g_new = torch.where(ex(ok), g_try, g_new)
            th_new = torch.where(ex(ok), th_try, th_new)
            accepted |= ok
            if bool(accepted.all()):
                break
            t = torch.where(accepted, t, 0.5 * t)
        failed = ~accepted
        n_iter += (~done & accepted).long()
        rel = (f - f_new) / torch.maximum(torch.maximum(f.abs(), f_new.abs()), torch.ones_like(f))
        small = accepted & ~done & (rel <= ftol)
        converged |= failed | small
        done |= failed | small
        s_k = th_new - theta
        y_k = g_new - g
        sy = dot(s_k, y_k)
        valid = sy > 1e-12 * dot(y_k, y_k).sqrt() * dot(s_k, s_k).sqrt()
        S.append(s_k)
        Yh.append(y_k)
        rho.append(torch.where(valid, 1.0 / torch.where(valid, sy, torch.ones_like(sy)), 0.0))
        if len(S) > history:
            S.pop(0)
            Yh.pop(0)
            rho.pop(0)
        yPy = dot(y_k, precond(y_k))
        gamma = torch.where(valid & (yPy > 0), sy / yPy.clamp_min(1e-300), gamma)
        theta, f, g = th_new, f_new, g_new

    gnorm = g.abs().amax((1, 2)) / B.n_p.view(1, B.P)
    converged |= gnorm <= tol
    write_back()
    return BatchedLogisticFit(
        coef=theta_out[:, :d].permute(0, 1, 3, 2).contiguous(),
        intercept=theta_out[:, d].permute(0, 2, 1).contiguous(),
        n_iter=n_iter_out,
        converged=conv_out,
    )


@dataclass(frozen=True, kw_only=True)
class LogisticCVResult:
    """Batched CV over the C grid followed by a refit at the selected C, per layer.

    Attributes:
        Cs: the grid.
        fold_scores: ``(layer, fold, C)`` held-out accuracy.
        cv_scores: ``(layer, C)`` mean over folds.
        best_index: ``(layer,)`` first argmax of ``cv_scores`` (sklearn's tie rule).
        best_C: ``(layer,)`` the selected C.
        fit: refit on all rows at the selected C (``problem`` axis of size 1).
    """

    Cs: np.ndarray
    fold_scores: Float[Tensor, "layer fold c"]
    cv_scores: Float[Tensor, "layer c"]
    best_index: Int[Tensor, " layer"]
    best_C: Float[Tensor, " layer"]
    fit: BatchedLogisticFit


def cv_logistic_batched(
    X: Float[Tensor, "layer n d"],
    y: Int[Tensor, " n"],
    n_classes: int,
    *,
    Cs: int | Sequence[float],
    folds: Sequence[tuple[np.ndarray, np.ndarray]],
    max_iter: int = 200,
    tol: float = 1e-5,
) -> LogisticCVResult:
    """Select C per layer by k-fold CV accuracy, then refit on all rows; two batched solves.

    Pass 1 solves ``layer x fold x C`` problems in one batch. Pass 2 refits each layer at its
    selected C on all ``n`` rows, warm-started from the mean of the fold solutions at that C
    (as sklearn's ``LogisticRegressionCV(refit=True)`` does).
    The preconditioner's Gram eigendecomposition is computed once and shared by both passes.
    """
    L, n, _ = X.shape
    dev = X.device
    grid = c_grid(Cs)
    nC, nF = len(grid), len(folds)
    if nF < 2:
        raise ValueError(f"need at least 2 CV folds, got {nF}")
    fm = torch.ones(nF, n, dtype=torch.bool, device=dev)
    for i, (_, te) in enumerate(folds):
        fm[i, torch.as_tensor(te, device=dev)] = False
    y = y.to(dev)
    used = fm.any(0)
    Q = None
    if int(used.sum()) < X.shape[2]:
        # d > n: solve both passes in one row-span basis (exact; see fit_logistic_batched).
        Q = _row_span_basis(X, used)
        X = torch.bmm(X.to(torch.float64), Q).to(X.dtype)
    eig = _centred_gram_eig(X, used)
    masks = fm.repeat_interleave(nC, dim=0)  # problem p = fold * nC + c
    Cvec = torch.as_tensor(np.tile(grid, nF), dtype=torch.float64, device=dev)
    cvfit = fit_logistic_batched(
        X, y, n_classes, train_mask=masks, C=Cvec, max_iter=max_iter, tol=tol, gram_eig=eig
    )
    pred = cvfit.predict_codes(X).view(L, n, nF, nC)
    held = (~fm).T.unsqueeze(-1)  # (n, F, 1)
    correct = ((pred == y.view(1, n, 1, 1)) & held).sum(1).double()  # (L, F, C)
    fold_scores = correct / held.sum(0).double().view(1, nF, 1)
    cv_scores = fold_scores.mean(1)
    best = cv_scores.argmax(1)  # torch returns the first maximum
    idx = torch.arange(nF, device=dev).view(1, nF) * nC + best.view(L, 1)  # (L, F)
    coef_f = torch.stack([cvfit.coef[ell, :, idx[ell]] for ell in range(L)])  # (L, d, F, k)
    int_f = torch.stack([cvfit.intercept[ell, idx[ell]] for ell in range(L)])  # (L, F, k)
    init = BatchedLogisticFit(
        coef=coef_f.mean(2, keepdim=True),
        intercept=int_f.mean(1, keepdim=True),
        n_iter=cvfit.n_iter[:, :1],
        converged=cvfit.converged[:, :1],
    )
    best_C = torch.as_tensor(grid, device=dev)[best]
    # One problem per layer with its own C: run as L single-problem batches stacked on the
    # layer axis by giving every layer the same (all-rows) mask and per-layer C via scaling.
    refit = _refit_per_layer_C(
        X, y, n_classes, best_C, init, max_iter=max_iter, tol=tol, gram_eig=eig
    )
    if Q is not None:
        refit = _lift(refit, Q)
    return LogisticCVResult(
        Cs=grid,
        fold_scores=fold_scores,
        cv_scores=cv_scores,
        best_index=best,
        best_C=best_C,
        fit=refit,
    )


def _refit_per_layer_C(
    X: Tensor,
    y: Tensor,
    n_classes: int,
    best_C: Tensor,
    init: BatchedLogisticFit,
    *,
    max_iter: int,
    tol: float,
    gram_eig: tuple[Tensor, Tensor] | None = None,
) -> BatchedLogisticFit:
    """Refit every layer at its own C: problems are (layer, C in the distinct selected values)."""
    L, n, _ = X.shape
    uniq, inv = torch.unique(best_C, return_inverse=True)
    U = len(uniq)
    masks = torch.ones(U, n, dtype=torch.bool, device=X.device)
    init_u = BatchedLogisticFit(
        coef=init.coef.expand(-1, -1, U, -1).contiguous(),
        intercept=init.intercept.expand(-1, U, -1).contiguous(),
        n_iter=init.n_iter.expand(-1, U),
        converged=init.converged.expand(-1, U),
    )
    active = inv.view(L, 1) == torch.arange(U, device=X.device).view(1, U)
    fit = fit_logistic_batched(
        X,
        y,
        n_classes,
        train_mask=masks,
        C=uniq.double(),
        init=init_u,
        active=active,
        max_iter=max_iter,
        tol=tol,
        gram_eig=gram_eig,
    )
    ar = torch.arange(L, device=X.device)
    return BatchedLogisticFit(
        coef=fit.coef[ar, :, inv].unsqueeze(2),
        intercept=fit.intercept[ar, inv].unsqueeze(1),
        n_iter=fit.n_iter[ar, inv].unsqueeze(1),
        converged=fit.converged[ar, inv].unsqueeze(1),
    )


def _standardize_stats(X: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    mean = X.mean(0)
    scale = X.std(0)
    scale[scale == 0] = 1.0
    return mean, scale


class LogisticProbe(ClassifierMixin, BaseEstimator):
    """Multinomial L2 logistic-regression probe with C chosen by stratified k-fold CV.

    Features are standardised inside the estimator (mean/std of the training data, as
    ``StandardScaler``); the fitted ``coef_``/``intercept_`` are mapped back to the raw
    activation space, so ``decision_function(X) = X @ coef_.T + intercept_``.

    For each candidate ``C`` the objective is ``sum_i CE_i + ||W||^2 / (2C)`` on the
    standardised features (sklearn's ``LogisticRegression(C=C)``). With ``C=None`` the value is
    chosen from ``Cs`` by mean held-out accuracy over ``cv`` stratified folds of the training
    data (first maximum on ties, as ``LogisticRegressionCV``), then refit on all of it. All
    folds x Cs are solved in one batched L-BFGS pass (see ``fit_logistic_batched``).

    Args:
        C: fixed inverse regularisation; ``None`` selects it by CV over ``Cs``.
        Cs: grid size (``logspace(-4, 4, Cs)``) or explicit grid.
        cv: number of stratified folds.
        max_iter: L-BFGS iteration cap.
        tol: gradient tolerance on the mean loss (sklearn's ``tol`` semantics).
        dtype: ``"float64"`` (default) or ``"float32"`` for the GEMMs.
        device: torch device for the solve (``None``: CPU).
        random_state: ``None`` keeps folds in data order (sklearn default); an int shuffles
            the stratified folds with that seed.

    Attributes:
        classes_, coef_ (``(1, d)`` binary or ``(K, d)``), intercept_, C_, Cs_, cv_scores_
        (mean CV accuracy per C, or ``None`` with fixed C), mean_, scale_, n_iter_,
        n_features_in_.
    """

    def __init__(  # types in the class docstring; sklearn checks pass bad values
        self,
        *,
        C=None,
        Cs=10,
        cv=5,
        max_iter=200,
        tol=1e-5,
        dtype="float64",
        device=None,
        random_state=None,
    ):
        self.C = C
        self.Cs = Cs
        self.cv = cv
        self.max_iter = max_iter
        self.tol = tol
        self.dtype = dtype
        self.device = device
        self.random_state = random_state

    def __sklearn_tags__(self):  # noqa: D105
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags

    def _cdtype(self) -> torch.dtype:
        if self.dtype not in _DTYPES:
            raise ValueError(f"dtype must be 'float32' or 'float64', got {self.dtype!r}")
        return _DTYPES[self.dtype]

    def fit(self, X, y) -> LogisticProbe:
        """Standardise, select C by CV (if ``C is None``), and fit on all of ``X``."""
        X, y = validate_data(self, X, y, dtype=np.float64)
        check_classification_targets(y)
        self.classes_, codes = np.unique(y, return_inverse=True)
        K = len(self.classes_)
        if K < 2:
            raise ValueError(
                f"LogisticProbe needs samples of at least 2 classes, but the data contains only "
                f"one class: {self.classes_[0]!r}; check the labels of the training split"
            )
        cdt = self._cdtype()
        dev = torch.device(self.device) if self.device is not None else torch.device("cpu")
        n = X.shape[0]
        self.mean_, self.scale_ = _standardize_stats(X)
        Xs = torch.as_tensor((X - self.mean_) / self.scale_, dtype=cdt, device=dev).unsqueeze(0)
        yt = torch.as_tensor(codes, device=dev)
        if self.C is not None:
            if not float(self.C) > 0:
                raise ValueError(f"C must be > 0, got {self.C}")
            fit = fit_logistic_batched(
                Xs,
                yt,
                K,
                train_mask=torch.ones(1, n, dtype=torch.bool, device=dev),
                C=torch.tensor([float(self.C)], dtype=torch.float64),
                max_iter=self.max_iter,
                tol=self.tol,
            )
            self.Cs_ = np.array([float(self.C)])
            self.C_ = float(self.C)
            self.cv_scores_ = None
        else:
            splitter = StratifiedKFold(
                n_splits=self.cv,
                shuffle=self.random_state is not None,
                random_state=self.random_state,
            )
            folds = list(splitter.split(np.zeros(n), codes))
            res = cv_logistic_batched(
                Xs, yt, K, Cs=self.Cs, folds=folds, max_iter=self.max_iter, tol=self.tol
            )
            fit = res.fit
            self.Cs_ = res.Cs
            self.C_ = float(res.best_C[0])
            self.cv_scores_ = res.cv_scores[0].cpu().numpy()
        p = 0
        w = fit.coef[0, :, p, :].T.cpu().numpy()  # (Kf, d) standardised
        b = fit.intercept[0, p, :].cpu().numpy()
        self.coef_ = w / self.scale_
        self.intercept_ = b - self.coef_ @ self.mean_
        self.n_iter_ = int(fit.n_iter[0, p])
        return self

    def decision_function(self, X) -> np.ndarray:
        """Logits ``X @ coef_.T + intercept_`` (1-D for binary problems)."""
        check_is_fitted(self)
        X = validate_data(self, X, reset=False, dtype=np.float64)
        z = X @ self.coef_.T + self.intercept_
        return z.ravel() if z.shape[1] == 1 else z

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities (softmax, or sigmoid for binary)."""
        z = self.decision_function(X)
        if z.ndim == 1:
            p1 = 1.0 / (1.0 + np.exp(-z))
            return np.stack([1 - p1, p1], axis=1)
        z = z - z.max(1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(1, keepdims=True)

    def predict(self, X) -> np.ndarray:
        """Most probable class."""
        z = self.decision_function(X)
        idx = (z > 0).astype(int) if z.ndim == 1 else z.argmax(1)
        return self.classes_[idx]
