"""Many L2 logistic regressions at once: the objective for :func:`probekit.optim.lbfgs_batched`.

Objective (per problem), exactly scikit-learn's ``LogisticRegression(C=C)`` parametrisation::

    min_{W, b}  sum_{i in train} CE(softmax(x_i W + b), y_i) + ||W||_F^2 / (2 C)

with an unpenalised intercept ``b``. For ``K > 2`` classes ``W`` has one column per class
(scikit-learn's symmetric multinomial); for ``K == 2`` a single logit ``z = x w + b`` is used
(``p(y=1) = sigmoid(z)``), which is how scikit-learn parametrises the binary case.

A problem is a ``(layer, problem)`` pair: problems share a design matrix per layer and differ in
training rows (CV folds), label vector (permutations, control tasks) and ``C``. One objective
evaluation is one ``bmm`` of ``(layer, n, d+1) @ (layer, d+1, problem*K)`` and one backward
GEMM, so the CV grid and the folds become extra GEMM columns instead of a Python loop. The
initial inverse Hessian of L-BFGS is the inverse of Böhning's (1992) curvature bound
``H <= beta (I - 11^T/K) (x) X^T X + I/C`` (``beta = 1/2``, or ``1/4`` for the binary logit),
diagonal in the eigenbasis of the layer's Gram matrix, so the first step is a monotone MM step.

Stopping: ``max |grad| / n_train <= tol``, the gradient of scikit-learn's *mean*-loss objective
(``sum CE / n + ||W||^2 / (2 C n)``) that its ``lbfgs`` solver hands to scipy as ``gtol=tol``;
in float32 too (see :mod:`probekit.optim.lbfgs`). Problems that end unconverged raise a
``sklearn.exceptions.ConvergenceWarning``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F
from jaxtyping import Bool, Float, Int
from sklearn.exceptions import ConvergenceWarning
from torch import Tensor

from ..optim.lbfgs import lbfgs_batched
from ..shapes import shape_checked
from ..util.threads import small_work_threads

__all__ = [
    "BatchedLogisticFit",
    "LogisticCVResult",
    "c_grid",
    "cv_logistic_batched",
    "fit_logistic_batched",
]

# Relative rounding noise of the objective for the approximate-Wolfe line search; a float32
# GEMM gives logits with ~1e-7 relative error, summed over rows.
_F_NOISE = 1e2


def c_grid(Cs: int | Sequence[float] | np.ndarray) -> np.ndarray:
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
        converged: ``(layer, problem)`` ``grad_max <= tol`` reached.
        grad_max: ``(layer, problem)`` final ``max |grad| / n_train`` (scikit-learn's scale).
    """

    coef: Float[Tensor, "layer d problem k"]
    intercept: Float[Tensor, "layer problem k"]
    n_iter: Int[Tensor, "layer problem"]
    converged: Bool[Tensor, "layer problem"]
    grad_max: Float[Tensor, "layer problem"]

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

    def _with_coef(self, coef: Tensor) -> BatchedLogisticFit:
        return BatchedLogisticFit(
            coef=coef,
            intercept=self.intercept,
            n_iter=self.n_iter,
            converged=self.converged,
            grad_max=self.grad_max,
        )


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
    return fit._with_coef(coef)


def _sub(t: Tensor, ids: Tensor, dim: int) -> Tensor:
    """``t`` indexed by ``ids`` along ``dim`` (no copy when ``ids`` is the whole axis)."""
    return t if ids.numel() == t.shape[dim] else t.index_select(dim, ids)


class _LogisticObjective:
    """Summed CE + ``||W||^2 / (2C)`` of ``(layer, problem)`` pairs, flat index ``l * P + p``.

    Parameters of one pair are ``(d + 1, k)``: weights then the intercept row. A call on a
    subset of pairs evaluates the rectangle ``layers x problems`` that covers it (one ``bmm``).
    """

    def __init__(
        self,
        X: Tensor,
        y: Tensor,
        n_classes: int,
        train_mask: Tensor,
        C: Tensor,
        target_index: Tensor,
        gram_eig: tuple[Tensor, Tensor],
    ):
        L, n, d = X.shape
        dev, cdt, f64 = X.device, X.dtype, torch.float64
        P = train_mask.shape[0]
        self.L, self.n, self.d, self.P = L, n, d, P
        self.binary = n_classes == 2
        self.K = 1 if self.binary else n_classes
        self.cdt = cdt
        self.Xa = torch.cat([X, torch.ones(L, n, 1, dtype=cdt, device=dev)], dim=2)
        self.M = train_mask.to(dev).T.to(cdt).contiguous()  # (n, P)
        self.n_p = train_mask.sum(1).to(dev, f64)  # (P,)
        self.invC = 1.0 / C.to(dev, f64)  # (P,)
        self.labels = y.to(dev)[target_index.to(dev)].T.contiguous()  # (n, P)
        if self.binary:
            self.Yt = self.labels.to(cdt).unsqueeze(1)  # (n, 1, P)
        else:
            self.Yt = F.one_hot(self.labels, n_classes).to(cdt).permute(0, 2, 1).contiguous()
        lam, self.V = gram_eig
        self.Vt = self.V.transpose(1, 2).contiguous()
        beta = 0.25 if self.binary else 0.5
        frac = (self.n_p / float(train_mask.any(0).sum())).view(1, 1, P)
        self.inv_curv = 1.0 / (beta * lam.view(L, d, 1) * frac + self.invC.view(1, 1, P))
        self.inv_curv_b = 1.0 / (beta * self.n_p)  # (P,)

    def _hull(self, idx: Tensor) -> tuple[Tensor, Tensor, Tensor | None, Tensor | None]:
        """Layers and problems covering ``idx``, and each pair's place in that rectangle.

        ``None, None`` for the places: ``idx`` is every pair in order, the rectangle itself.
        """
        if idx.numel() == self.L * self.P and (idx.numel() == 1 or bool((idx.diff() == 1).all())):
            ar = torch.arange
            return ar(self.L, device=idx.device), ar(self.P, device=idx.device), None, None
        lays, li = torch.unique(idx // self.P, return_inverse=True)
        cols, ci = torch.unique(idx % self.P, return_inverse=True)
        return lays, cols, li, ci

    def _grid(
        self, x: Tensor, lays: Tensor, cols: Tensor, li: Tensor | None, ci: Tensor | None
    ) -> Tensor:
        """Scatter ``(b, d+1, k)`` pair parameters into a ``(layer, problem, d+1, k)`` grid."""
        if li is None:
            return x.view(lays.numel(), cols.numel(), *x.shape[1:])
        out = x.new_zeros(lays.numel(), cols.numel(), *x.shape[1:])
        out[li, ci] = x
        return out

    @staticmethod
    def _pairs(t: Tensor, li: Tensor | None, ci: Tensor | None) -> Tensor:
        """Inverse of :meth:`_grid`: the ``(layer, problem, ...)`` entries of the pairs."""
        return t.reshape(-1, *t.shape[2:]) if li is None else t[li, ci]

    def __call__(self, x: Tensor, idx: Tensor) -> tuple[Tensor, Tensor]:
        """Objective and gradient of pairs ``idx`` at parameters ``x`` ``(b, d+1, k)``."""
        lays, cols, li, ci = self._hull(idx)
        nl, nc, n, D1, K = lays.numel(), cols.numel(), self.n, self.d + 1, self.K
        th = self._grid(x, lays, cols, li, ci).permute(0, 2, 3, 1)  # (nl, D1, K, nc)
        Xl = _sub(self.Xa, lays, 0)
        M, Y = _sub(self.M, cols, 1), _sub(self.Yt, cols, 2)
        Z = torch.bmm(Xl, th.to(self.cdt).reshape(nl, D1, K * nc)).view(nl, n, K, nc)
        if self.binary:
            z, yb = Z[:, :, 0], Y[:, 0]
            nll = F.softplus(z) - yb * z
            R = ((torch.sigmoid(z) - yb) * M).unsqueeze(2)
        else:
            m = Z.amax(2, keepdim=True)
            R = (Z - m).exp_()
            s = R.sum(2, keepdim=True)
            yi = _sub(self.labels, cols, 1).unsqueeze(1)
            nll = (m + s.log() - Z.gather(2, yi.unsqueeze(0).expand(nl, -1, -1, -1))).squeeze(2)
            R = R.mul_(M.unsqueeze(1) / s).sub_(Y * M.unsqueeze(1))
        w = th[:, : self.d]
        ic = _sub(self.invC, cols, 0).view(1, 1, 1, nc)
        f = (nll * M).sum(1, dtype=torch.float64) + 0.5 * (w * w * ic).sum((1, 2))
        G = torch.bmm(Xl.transpose(1, 2), R.reshape(nl, n, K * nc)).view(nl, D1, K, nc)
        G = G.to(torch.float64)
        G[:, : self.d] += w * ic
        return self._pairs(f, li, ci), self._pairs(G.permute(0, 3, 1, 2), li, ci)

    def precondition(self, q: Tensor, idx: Tensor) -> Tensor:
        """Inverse Böhning bound ``(beta (I - 11'/K) (x) X'X + I/C)^{-1} q`` (pseudo-inverse)."""
        lays, cols, li, ci = self._hull(idx)
        nl, nc, d, K = lays.numel(), cols.numel(), self.d, self.K
        Q = self._grid(q, lays, cols, li, ci)  # (nl, nc, D1, K)
        qw, qb = Q[:, :, :d], Q[:, :, d]
        if not self.binary:  # the softmax is invariant to adding a constant across classes
            qw = qw - qw.mean(-1, keepdim=True)
            qb = qb - qb.mean(-1, keepdim=True)
        qw = qw.permute(0, 2, 1, 3).reshape(nl, d, nc * K)
        ic = _sub(_sub(self.inv_curv, lays, 0), cols, 2).unsqueeze(-1)  # (nl, d, nc, 1)
        t = torch.bmm(_sub(self.Vt, lays, 0), qw).view(nl, d, nc, K) * ic
        ow = torch.bmm(_sub(self.V, lays, 0), t.reshape(nl, d, nc * K)).view(nl, d, nc, K)
        ob = qb * _sub(self.inv_curv_b, cols, 0).view(1, nc, 1)
        out = torch.cat([ow.permute(0, 2, 1, 3), ob.unsqueeze(2)], dim=2)
        return self._pairs(out, li, ci)


def _check_batch(X: Tensor, y: Tensor, n_classes: int, train_mask: Tensor, C: Tensor) -> None:
    if X.ndim != 3:
        raise ValueError(f"expected X of shape (layer, n, d), got {tuple(X.shape)}")
    n, P = X.shape[1], train_mask.shape[0]
    if y.shape[-1] != n:
        raise ValueError(f"got {n} activations but {y.shape[-1]} labels")
    if n_classes < 2:
        raise ValueError(f"need at least 2 classes to fit a logistic probe, got {n_classes}")
    if train_mask.shape != (P, n):
        raise ValueError(
            f"train_mask must have shape (problem, {n}), got {tuple(train_mask.shape)}"
        )
    if C.shape != (P,):
        raise ValueError(f"C must have one value per problem ({P}), got shape {tuple(C.shape)}")
    if bool((train_mask.sum(1) == 0).any()):
        raise ValueError("a problem has an empty training set; every fold needs training rows")


@shape_checked
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
    warn: bool = True,
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
        max_iter: L-BFGS iteration cap per problem.
        tol: a problem is converged when ``max |grad| / n_train <= tol`` (sklearn's ``tol``:
            scipy's ``pgtol`` on its mean-loss objective).
        history: L-BFGS memory.
        max_linesearch: step halvings before a problem is declared stalled.
        gram_eig: ``_centred_gram_eig(X, train_mask.any(0))`` from an earlier call on the same
            ``X`` and rows, to reuse the preconditioner's eigendecomposition.
        warn: issue a ``ConvergenceWarning`` naming the problems that did not converge.

    Returns:
        BatchedLogisticFit with weights on the given feature scale.
    """
    if y.ndim == 1:
        y = y.unsqueeze(0)
    _check_batch(X, y, n_classes, train_mask, C)
    L, n, d = X.shape
    P = train_mask.shape[0]
    dev, f64 = X.device, torch.float64
    used = train_mask.to(dev).any(0)
    n_used = int(used.sum())
    if n_used < d:
        # d > n: the optimal W of every problem lies in the row span of its training rows
        # (stationarity: W = -C X^T R), a subspace of the span of all rows used by any problem.
        # Solving in an orthonormal basis Q of that span is exact (the L2 penalty and the
        # Gram-eigenbasis preconditioner are rotation invariant) and shrinks every GEMM and the
        # eigendecomposition from d to n_used.
        Q = _row_span_basis(X, used)  # (L, d, n_used)
        Xr = torch.bmm(X.to(f64), Q).to(X.dtype)
        init_r = None
        if init is not None:
            Pi, Ki = init.coef.shape[2], init.coef.shape[3]
            cr = torch.bmm(Q.transpose(1, 2), init.coef.to(dev, f64).reshape(L, d, Pi * Ki))
            init_r = init._with_coef(cr.view(L, n_used, Pi, Ki))
        fit = fit_logistic_batched(
            Xr, y, n_classes, train_mask=train_mask, C=C, target_index=target_index,
            init=init_r, active=active, max_iter=max_iter, tol=tol, history=history,
            max_linesearch=max_linesearch, warn=warn,
        )  # fmt: skip
        return _lift(fit, Q)
    if target_index is None:
        target_index = torch.zeros(P, dtype=torch.long, device=dev)
    eig = gram_eig if gram_eig is not None else _centred_gram_eig(X, used)
    obj = _LogisticObjective(X, y, n_classes, train_mask, C, target_index, eig)
    K = obj.K
    if init is None:
        x0 = torch.zeros(L * P, d + 1, K, dtype=f64, device=dev)
    else:
        th = torch.cat([init.coef, init.intercept.unsqueeze(1)], dim=1)  # (L, D1, P, K)
        x0 = th.to(dev, f64).permute(0, 2, 1, 3).reshape(L * P, d + 1, K)
    # every iteration's largest op is the logits X W of all problems (2 L n d P K flops): on
    # one thread when that is small, so a few hundred tiny ops do not spin against a busy core
    with small_work_threads(work=2 * L * n * d * P * K):
        res = lbfgs_batched(
            obj,
            x0,
            gtol=(tol * obj.n_p).repeat(L),
            max_iter=max_iter,
            history=history,
            max_linesearch=max_linesearch,
            f_noise=_F_NOISE * torch.finfo(X.dtype).eps,
            precondition=obj.precondition,
            active=None if active is None else active.to(dev).reshape(L * P),
        )
    th = res.x.view(L, P, d + 1, K)
    gmax = (res.grad_max.view(L, P) / obj.n_p.view(1, P)).to(f64)
    fit = BatchedLogisticFit(
        coef=th[:, :, :d].permute(0, 2, 1, 3).contiguous(),
        intercept=th[:, :, d].contiguous(),
        n_iter=res.n_iter.view(L, P),
        converged=res.converged.view(L, P),
        grad_max=gmax,
    )
    if warn:
        _warn_unconverged(res.active.view(L, P) & ~fit.converged, fit, C, tol, max_iter, X.dtype)
    return fit


def _warn_unconverged(
    bad: Tensor, fit: BatchedLogisticFit, C: Tensor, tol: float, max_iter: int, dtype: torch.dtype
) -> None:
    """One ``ConvergenceWarning`` naming how many problems missed ``tol`` and the worst one."""
    k = int(bad.sum())
    if k == 0:
        return
    g = torch.where(bad, fit.grad_max, torch.zeros_like(fit.grad_max))
    flat = int(g.argmax())
    layer, prob = divmod(flat, g.shape[1])
    hit = bool(fit.n_iter[layer, prob] >= max_iter)
    why = f"max_iter={max_iter} reached" if hit else "no further decrease representable"
    fix = "increase max_iter" if hit else "use dtype float64 or a larger tol"
    warnings.warn(
        f"logistic L-BFGS: {k} of {bad.numel()} (layer, problem) fits did not reach "
        f"max|grad|/n <= tol={tol:g}; worst: layer {layer}, problem {prob} "
        f"(C={float(C[prob]):.3g}) at {float(g.max()):.3g} ({why}, {dtype}); {fix}",
        ConvergenceWarning,
        stacklevel=3,
    )


@dataclass(frozen=True, kw_only=True)
class LogisticCVResult:
    """Batched CV over the C grid followed by a refit at the selected C, per layer.

    Attributes:
        Cs: the grid.
        fold_scores: ``(layer, fold, C)`` held-out accuracy.
        cv_scores: ``(layer, C)`` mean over folds.
        best_index: ``(layer,)`` first argmax of ``cv_scores`` (sklearn's tie rule; scores
            within 1e-9 of the maximum count as tied).
        best_C: ``(layer,)`` the selected C.
        fit: refit on all rows at the selected C (``problem`` axis of size 1).
    """

    Cs: np.ndarray
    fold_scores: Float[Tensor, "layer fold c"]
    cv_scores: Float[Tensor, "layer c"]
    best_index: Int[Tensor, " layer"]
    best_C: Float[Tensor, " layer"]
    fit: BatchedLogisticFit


@shape_checked
def cv_logistic_batched(
    X: Float[Tensor, "layer n d"],
    y: Int[Tensor, " n"],
    n_classes: int,
    *,
    Cs: int | Sequence[float] | np.ndarray,
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
    # First maximum, with ties judged up to rounding: fold means of equal counts can differ in
    # the last bit, which would otherwise break exact ties arbitrarily.
    top = cv_scores >= cv_scores.amax(1, keepdim=True) - 1e-9
    best = top.long().argmax(1)
    idx = torch.arange(nF, device=dev).view(1, nF) * nC + best.view(L, 1)  # (L, F)
    coef_f = torch.stack([cvfit.coef[ell, :, idx[ell]] for ell in range(L)])  # (L, d, F, k)
    int_f = torch.stack([cvfit.intercept[ell, idx[ell]] for ell in range(L)])  # (L, F, k)
    init = BatchedLogisticFit(
        coef=coef_f.mean(2, keepdim=True),
        intercept=int_f.mean(1, keepdim=True),
        n_iter=cvfit.n_iter[:, :1],
        converged=cvfit.converged[:, :1],
        grad_max=cvfit.grad_max[:, :1],
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
        grad_max=init.grad_max.expand(-1, U),
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
        grad_max=fit.grad_max[ar, inv].unsqueeze(1),
    )
