"""Batched L-BFGS: minimise many independent smooth objectives in one loop.

Each problem ``b`` has its own parameters ``x_b``, history, step size and stopping state; the
objective is evaluated for a *subset* of problems at a time (those still searching), so a closure
can batch them into one GEMM. The algorithm is L-BFGS (Nocedal & Wright 2006, Alg. 7.4, two-loop
recursion, Alg. 7.5) with an optional initial inverse Hessian ``H0 = gamma_k * P^{-1}`` supplied
by the caller (``precondition``) and a per-problem backtracking line search.

Stopping, per problem (the rule scipy's L-BFGS-B applies with ``pgtol``, which scikit-learn's
``lbfgs`` solver passes as ``gtol=tol``)::

    converged   <=>  max_i |grad_i f(x)| <= gtol            (projected gradient; unconstrained)

A problem also stops, *without* being reported converged, when no further progress is
representable: the line search finds no acceptable step, or ``patience`` iterations in a row
neither decrease ``f`` by more than ``ftol * max(|f_k|, |f_k+1|, 1)`` (``ftol = 64 *
eps(float64)``, scipy's ``factr`` rule as scikit-learn sets it) nor reach a new smallest
``max |grad|``. Requiring both makes the relative-decrease rule a safeguard that cannot pre-empt
``gtol``: as long as the gradient keeps improving the problem keeps iterating. Objectives computed
in float32 have ``f`` noise around ``1e-7 |f|``, so near the optimum Armijo's test compares
rounding errors; the line search therefore also accepts the approximate Wolfe step of Hager &
Zhang (2005, eq. 4.1: ``f(t) <= f(0) + eps_f`` and ``phi'(t) <= (2 delta - 1) phi'(0)``), which
relies on the gradient -- accurate far below ``gtol`` -- where differences of ``f`` drown in
rounding. That keeps float32 iterations descending until the gradient criterion holds.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

__all__ = ["LBFGSResult", "Objective", "Preconditioner", "lbfgs_batched"]

Objective = Callable[[Tensor, Tensor], tuple[Tensor, Tensor]]
"""``fun(x, idx) -> (f, g)``: ``x`` ``(b, *param)`` float64 parameters of problems ``idx`` ``(b,)``;
returns ``f`` ``(b,)`` and ``g = grad f`` ``(b, *param)``, both float64."""

Preconditioner = Callable[[Tensor, Tensor], Tensor]
"""``precondition(q, idx) -> P^{-1} q`` for problems ``idx``; ``P`` symmetric positive definite."""

_C1 = 1e-4  # Armijo sufficient-decrease constant (Nocedal & Wright 2006, p. 33)
_DELTA = 0.1  # Hager-Zhang approximate-Wolfe constant (delta < 1/2)
_PATIENCE = 10  # iterations without f or gradient progress before a problem counts as stalled


@dataclass(frozen=True, kw_only=True)
class LBFGSResult:
    """Per-problem outcome of :func:`lbfgs_batched`.

    Attributes:
        x: ``(batch, *param)`` final parameters (inactive problems: ``x0``).
        fun: ``(batch,)`` objective at ``x``.
        grad_max: ``(batch,)`` ``max |grad f(x)|`` (the quantity compared with ``gtol``).
        n_iter: ``(batch,)`` accepted iterations.
        converged: ``(batch,)`` ``grad_max <= gtol``.
        stalled: ``(batch,)`` stopped before ``gtol`` because no decrease was representable.
        active: ``(batch,)`` problems that were solved.
    """

    x: Float[Tensor, " batch *param"]
    fun: Float[Tensor, " batch"]
    grad_max: Float[Tensor, " batch"]
    n_iter: Int[Tensor, " batch"]
    converged: Bool[Tensor, " batch"]
    stalled: Bool[Tensor, " batch"]
    active: Bool[Tensor, " batch"]

    @property
    def max_iter_reached(self) -> Bool[Tensor, " batch"]:
        """Active problems that ran out of iterations (neither converged nor stalled)."""
        return self.active & ~self.converged & ~self.stalled


def _dot(a: Tensor, b: Tensor) -> Tensor:
    return (a * b).flatten(1).sum(1)


def _col(v: Tensor, like: Tensor) -> Tensor:
    return v.view(-1, *([1] * (like.ndim - 1)))


def lbfgs_batched(
    fun: Objective,
    x0: Float[Tensor, " batch *param"],
    *,
    gtol: float | Float[Tensor, " batch"],
    max_iter: int = 200,
    history: int = 10,
    max_linesearch: int = 20,
    ftol: float = 64 * torch.finfo(torch.float64).eps,
    f_noise: float = 1e3 * torch.finfo(torch.float64).eps,
    precondition: Preconditioner | None = None,
    active: Bool[Tensor, " batch"] | None = None,
    compact_below: float = 0.6,
) -> LBFGSResult:
    """Minimise ``batch`` independent objectives with L-BFGS, stopping each on ``max|g| <= gtol``.

    Args:
        fun: objective and gradient of a subset of problems (see :data:`Objective`).
        x0: starting points; the iterates are float64.
        gtol: absolute tolerance on ``max |grad|`` per problem (scalar or ``(batch,)``).
        max_iter: iteration cap per problem.
        history: number of ``(s, y)`` pairs kept.
        max_linesearch: step halvings before a problem is declared stalled.
        ftol: relative-decrease safeguard (see the module docstring); it stops a problem only
            after ``patience`` iterations without a new smallest ``max |grad|`` either.
        f_noise: relative rounding noise of ``f`` (e.g. ``1e3 * eps(float32)`` for float32
            GEMMs): the approximate-Wolfe acceptance tolerance ``eps_f = f_noise * |f|``
            (default: float64 rounding of a sum of ~1e3 terms).
        precondition: ``P^{-1}`` of the initial inverse Hessian ``H0 = gamma P^{-1}`` (default
            identity); ``gamma = s'y / y'P^{-1}y`` is refreshed every iteration.
        active: problems to solve (default all); the others are returned at ``x0``.
        compact_below: drop finished problems from the working set once fewer than this
            fraction of it is still running (fewer rows in every later ``fun`` call).

    Returns:
        LBFGSResult.
    """
    if max_iter < 0 or history < 1 or max_linesearch < 1:
        raise ValueError(
            f"need max_iter >= 0, history >= 1, max_linesearch >= 1; got {max_iter}, {history}, "
            f"{max_linesearch}"
        )
    f64 = torch.float64
    dev = x0.device
    B = x0.shape[0]
    x_out = x0.detach().to(f64).clone()
    gtol_all = torch.as_tensor(gtol, dtype=f64, device=dev).expand(B).clone()
    act = torch.ones(B, dtype=torch.bool, device=dev) if active is None else active.to(dev)
    f_out = torch.zeros(B, dtype=f64, device=dev)
    gmax_out = torch.zeros(B, dtype=f64, device=dev)
    it_out = torch.zeros(B, dtype=torch.long, device=dev)
    conv_out = torch.zeros(B, dtype=torch.bool, device=dev)
    stall_out = torch.zeros(B, dtype=torch.bool, device=dev)
    idx = act.nonzero().squeeze(1)
    if idx.numel() == 0:
        return LBFGSResult(
            x=x_out,
            fun=f_out,
            grad_max=gmax_out,
            n_iter=it_out,
            converged=conv_out,
            stalled=stall_out,
            active=act,
        )

    def h0(q: Tensor, ids: Tensor) -> Tensor:
        return q if precondition is None else precondition(q, ids)

    x = x_out[idx]
    f, g = fun(x, idx)
    gt = gtol_all[idx]
    m = idx.numel()
    gamma = torch.ones(m, dtype=f64, device=dev)
    n_iter = torch.zeros(m, dtype=torch.long, device=dev)
    converged = torch.zeros(m, dtype=torch.bool, device=dev)
    stalled = torch.zeros(m, dtype=torch.bool, device=dev)
    best_g = g.abs().flatten(1).amax(1)
    idle = torch.zeros(m, dtype=torch.long, device=dev)
    S: list[Tensor] = []
    Y: list[Tensor] = []
    rho: list[Tensor] = []

    def write_back() -> None:
        x_out[idx], f_out[idx], it_out[idx] = x, f, n_iter
        gmax_out[idx] = g.abs().flatten(1).amax(1)
        conv_out[idx], stall_out[idx] = converged, stalled

    for _ in range(max_iter):
        converged |= g.abs().flatten(1).amax(1) <= gt
        done = converged | stalled
        if bool(done.all()):
            break
        if int((~done).sum()) <= compact_below * idx.numel():
            write_back()
            keep = (~done).nonzero().squeeze(1)
            idx, x, f, g, gt = idx[keep], x[keep], f[keep], g[keep], gt[keep]
            gamma, n_iter, best_g, idle = gamma[keep], n_iter[keep], best_g[keep], idle[keep]
            converged, stalled, done = converged[keep], stalled[keep], done[keep]
            S, Y, rho = [s[keep] for s in S], [y[keep] for y in Y], [r[keep] for r in rho]
        # Two-loop recursion (Nocedal & Wright Alg. 7.4) with H0 = gamma * P^{-1}.
        q = g.clone()
        alphas = []
        for s_i, y_i, r_i in zip(reversed(S), reversed(Y), reversed(rho)):
            a_i = r_i * _dot(s_i, q)
            q -= _col(a_i, q) * y_i
            alphas.append(a_i)
        q = h0(q, idx) * _col(gamma, q)
        for s_i, y_i, r_i, a_i in zip(S, Y, rho, reversed(alphas)):
            q += _col(a_i - r_i * _dot(y_i, q), q) * s_i
        d = -q
        gd = _dot(g, d)
        bad = gd >= 0
        if bool(bad.any()):  # not a descent direction: fall back to the preconditioned gradient
            d = torch.where(_col(bad, d), -h0(g, idx), d)
            gd = _dot(g, d)
        # Backtracking line search; only problems still searching are evaluated.
        t = torch.ones_like(f)
        accepted = done.clone()
        x_new, f_new, g_new = x.clone(), f.clone(), g.clone()
        eps_f = f_noise * f.abs()
        for _ls in range(max_linesearch):
            pend = (~accepted).nonzero().squeeze(1)
            tp = t[pend]
            x_try = x[pend] + _col(tp, x) * d[pend]
            f_try, g_try = fun(x_try, idx[pend])
            armijo = f_try <= f[pend] + _C1 * tp * gd[pend]
            wolfe = (f_try <= f[pend] + eps_f[pend]) & (
                _dot(g_try, d[pend]) <= (2 * _DELTA - 1) * gd[pend]
            )
            ok = armijo | wolfe
            hit = pend[ok]
            x_new[hit], f_new[hit], g_new[hit] = x_try[ok], f_try[ok], g_try[ok]
            accepted[hit] = True
            if bool(accepted.all()):
                break
            t[pend[~ok]] *= 0.5
        failed = ~accepted
        moved = accepted & ~done
        n_iter += moved.long()
        scale = torch.maximum(torch.maximum(f.abs(), f_new.abs()), torch.ones_like(f))
        g_new_max = g_new.abs().flatten(1).amax(1)
        progress = ((f - f_new) > ftol * scale) | (g_new_max < best_g)
        best_g = torch.minimum(best_g, g_new_max)
        idle = torch.where(progress, 0, idle + moved.long())
        stalled |= failed | (idle >= _PATIENCE)
        s_k, y_k = x_new - x, g_new - g
        sy = _dot(s_k, y_k)
        valid = sy > 1e-12 * _dot(y_k, y_k).sqrt() * _dot(s_k, s_k).sqrt()
        S.append(s_k)
        Y.append(y_k)
        rho.append(torch.where(valid, 1.0 / torch.where(valid, sy, torch.ones_like(sy)), 0.0))
        if len(S) > history:
            S.pop(0), Y.pop(0), rho.pop(0)
        yHy = _dot(y_k, h0(y_k, idx))
        gamma = torch.where(valid & (yHy > 0), sy / yHy.clamp_min(1e-300), gamma)
        x, f, g = x_new, f_new, g_new
    converged |= g.abs().flatten(1).amax(1) <= gt
    stalled &= ~converged
    write_back()
    return LBFGSResult(
        x=x_out,
        fun=f_out,
        grad_max=gmax_out,
        n_iter=it_out,
        converged=conv_out,
        stalled=stall_out,
        active=act,
    )
