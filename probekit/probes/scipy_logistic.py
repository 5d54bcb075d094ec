"""One L2 logistic regression with scipy's L-BFGS-B on numpy float64: the single-problem route.

Same objective and stopping rule as :mod:`probekit.probes.batched_logistic` (scikit-learn's
``LogisticRegression(C=C)``, mean loss ``sum CE / n + ||W||^2 / (2 C n)``, converged when
``max |grad| <= tol``) but without torch's per-operation overhead, which dominates a single small
problem. When ``n > d`` and the problem is badly enough conditioned that the iterations saved
pay for an eigendecomposition (see the cost model in the code), L-BFGS runs in
coordinates whitened by the inverse square root of Böhning's curvature bound
(``W = V diag((beta lam + 1/C)^{-1/2}) U``), in which the Hessian is close to the identity; the
stopping rule is still evaluated on the gradient with respect to ``W``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from jaxtyping import Float, Int
from scipy import optimize
from scipy.special import expit

from ..util.threads import small_work_threads

__all__ = ["SingleLogisticFit", "fit_logistic_scipy"]


@dataclass(frozen=True, kw_only=True)
class SingleLogisticFit:
    """Solution of one logistic problem.

    Attributes:
        coef: ``(d, k)`` weights (``k = 1`` for binary).
        intercept: ``(k,)``.
        n_iter: L-BFGS-B iterations.
        converged: ``grad_max <= tol``.
        grad_max: final ``max |grad|`` of the mean-loss objective.
        whitened: whether the iterations ran in whitened coordinates.
    """

    coef: Float[np.ndarray, "d k"]
    intercept: Float[np.ndarray, " k"]
    n_iter: int
    converged: bool
    grad_max: float
    whitened: bool


def _loss_grad(
    W: np.ndarray, b: np.ndarray, X: np.ndarray, Y: np.ndarray, binary: bool, lam: float
) -> tuple[float, np.ndarray, np.ndarray]:
    """Mean CE + ``lam/2 ||W||^2`` and its gradients in ``W`` ``(d, k)`` and ``b`` ``(k,)``."""
    n = X.shape[0]
    Z = X @ W
    Z += b
    if binary:
        z, y = Z[:, 0], Y[:, 0]
        loss = float(np.logaddexp(0.0, z).sum() - z @ y)
        R = expit(Z)
        R -= Y
    else:
        Z -= Z.max(1, keepdims=True)
        R = np.exp(Z)
        s = R.sum(1, keepdims=True)
        loss = float(np.log(s).sum() - np.vdot(Z, Y))
        R /= s
        R -= Y
    R /= n
    f = loss / n + 0.5 * lam * float(np.vdot(W, W))
    gW = X.T @ R
    if lam:
        gW += lam * W
    return f, gW, R.sum(0)


def fit_logistic_scipy(
    X: Float[np.ndarray, "n d"],
    codes: Int[np.ndarray, " n"],
    n_classes: int,
    *,
    C: float,
    tol: float = 1e-4,
    max_iter: int = 200,
    whiten: bool | None = None,
) -> SingleLogisticFit:
    """Fit one L2 logistic regression (scikit-learn's objective and ``tol``) with L-BFGS-B.

    Args:
        X: ``(n, d)`` features (standardised by the caller if desired).
        codes: class codes in ``[0, n_classes)``.
        n_classes: ``K`` (``K == 2``: one logit, as scikit-learn).
        C: inverse regularisation of the summed loss.
        tol: converged when ``max |grad| <= tol`` on the mean-loss objective.
        max_iter: iteration cap.
        whiten: force whitened (True) or plain (False) coordinates; ``None`` decides by the
            conditioning rule in the module docstring.

    Returns:
        SingleLogisticFit.
    """
    X = np.ascontiguousarray(X, dtype=np.float64)
    n, d = X.shape
    binary = n_classes == 2
    K = 1 if binary else n_classes
    Y = (codes == 1).astype(np.float64)[:, None] if binary else np.eye(K)[codes]
    lam = 1.0 / (C * n)
    beta = 0.25 if binary else 0.5
    if whiten is None:
        # Whiten when the iterations it saves pay for it. Plain L-BFGS needs about
        # 4 sqrt(kappa) iterations, kappa = 1 + beta C lambda_mean (the curvature bound over the
        # ridge in an average direction, lambda_mean = ||X_c||_F^2 / d); whitened, ~7. The
        # Gram matrix, its eigendecomposition and X T cost ~3 n d^2 flops, i.e. ~0.75 d / k
        # iterations of 4 n d k. For d >= n the iterations do not drop (the loss saturates).
        mean = X.mean(0)
        kappa = 1.0 + beta * C * (float(np.vdot(X, X)) - n * float(mean @ mean)) / d
        whiten = n > d and 4.0 * np.sqrt(kappa) - 7.0 > 0.75 * d / max(K, 2)
    if whiten:
        Xc = X - X.mean(0)
        ev, V = np.linalg.eigh(Xc.T @ Xc)
        s = 1.0 / np.sqrt(beta * np.clip(ev, 0.0, None) / n + lam)  # per eigen-direction
        T = V * s  # W = T U
        Tinv_t = V / s  # grad_U = T' grad_W  =>  grad_W = V diag(1/s) grad_U
        sb = 1.0 / np.sqrt(beta)
        XT = X @ T
    state = {"gmax": np.inf}

    def fun(theta: np.ndarray) -> tuple[float, np.ndarray]:
        P = theta.reshape(-1, K)
        if whiten:
            U, c = P[:d], P[d]
            f, gW, gb = _loss_grad(U, c * sb, XT, Y, binary, 0.0)
            W = T @ U
            f += 0.5 * lam * float((W * W).sum())
            gU = gW + lam * (T.T @ W)
            state["gmax"] = max(float(np.abs(Tinv_t @ gU).max()), float(np.abs(gb).max()))
            return f, np.concatenate([gU, (gb * sb)[None]]).ravel()
        f, gW, gb = _loss_grad(P[:d], P[d], X, Y, binary, lam)
        state["gmax"] = max(float(np.abs(gW).max()), float(np.abs(gb).max()))
        return f, np.concatenate([gW, gb[None]]).ravel()

    def stop(intermediate_result: optimize.OptimizeResult) -> None:
        if state["gmax"] <= tol:
            raise StopIteration

    # each evaluation is a few BLAS calls, the largest X @ W (2 n d K flops; T @ U is 2 d^2 K,
    # d < n): scipy's BLAS on one thread when that is small (util.threads)
    with small_work_threads(work=2 * max(n, d) * d * K):
        res = optimize.minimize(
            fun,
            np.zeros((d + 1) * K),
            method="L-BFGS-B",
            jac=True,
            callback=stop,
            options={"maxiter": max_iter, "maxls": 50, "gtol": 0.0,
                     "ftol": 64 * np.finfo(float).eps},
        )
        fun(res.x)  # the gradient at the returned point
    P = res.x.reshape(-1, K)
    coef, icpt = (T @ P[:d], P[d] * sb) if whiten else (P[:d], P[d])
    return SingleLogisticFit(
        coef=coef,
        intercept=icpt,
        n_iter=int(res.nit),
        converged=state["gmax"] <= tol,
        grad_max=state["gmax"],
        whitened=bool(whiten),
    )
