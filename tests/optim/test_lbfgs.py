"""Batched L-BFGS vs exact solutions and scipy's L-BFGS-B."""

import numpy as np
import torch
from scipy import optimize

from probekit.optim import lbfgs_batched


def _quadratics(B, p, seed):
    """f_b(x) = 0.5 x'A_b x - c_b'x with condition numbers 1 .. 1e4."""
    g = torch.Generator().manual_seed(seed)
    A = []
    for b in range(B):
        Q = torch.linalg.qr(torch.randn(p, p, generator=g, dtype=torch.float64)).Q
        ev = torch.logspace(0, float(b), p, dtype=torch.float64)
        A.append(Q @ torch.diag(ev) @ Q.T)
    A = torch.stack(A)
    c = torch.randn(B, p, generator=g, dtype=torch.float64)

    def fun(x, idx):
        Ax = torch.einsum("bij,bj->bi", A[idx], x)
        return 0.5 * (x * Ax).sum(1) - (c[idx] * x).sum(1), Ax - c[idx]

    return fun, torch.linalg.solve(A, c)


def test_quadratics_reach_exact_minimiser_with_per_problem_iterations():
    fun, xstar = _quadratics(5, 12, seed=0)
    res = lbfgs_batched(fun, torch.zeros(5, 12, dtype=torch.float64), gtol=1e-10, max_iter=500)
    assert bool(res.converged.all()) and not bool(res.stalled.any())
    assert float(res.grad_max.max()) <= 1e-10
    torch.testing.assert_close(res.x, xstar, rtol=0, atol=1e-8)
    # Harder problems (larger condition number) need more iterations; each stops on its own.
    it = res.n_iter.tolist()
    assert it[0] <= 2 and it[-1] > it[0]


def test_rosenbrock_batch_matches_scipy_lbfgsb():
    starts = torch.tensor([[-1.2, 1.0, -0.5, 0.3], [0.0, 0.0, 0.0, 0.0], [2.0, -1.0, 1.5, 0.5]])

    def rosen(x, idx):
        x = x.detach().requires_grad_(True)
        f = (100 * (x[:, 1:] - x[:, :-1] ** 2) ** 2 + (1 - x[:, :-1]) ** 2).sum(1)
        (g,) = torch.autograd.grad(f.sum(), x)
        return f.detach(), g

    res = lbfgs_batched(rosen, starts.double(), gtol=1e-9, max_iter=2000)
    assert bool(res.converged.all())
    for b in range(3):
        ref = optimize.minimize(
            optimize.rosen, starts[b].double().numpy(), jac=optimize.rosen_der,
            method="L-BFGS-B", options={"gtol": 1e-9, "ftol": 0, "maxiter": 2000},
        )
        np.testing.assert_allclose(res.x[b].numpy(), ref.x, atol=1e-6)
        np.testing.assert_allclose(res.x[b].numpy(), np.ones(4), atol=1e-6)


def test_max_iter_and_active_masks_are_reported():
    fun, xstar = _quadratics(4, 10, seed=1)
    x0 = torch.full((4, 10), 3.0, dtype=torch.float64)
    active = torch.tensor([True, True, False, True])
    res = lbfgs_batched(fun, x0, gtol=1e-12, max_iter=3, active=active)
    assert res.n_iter[2] == 0 and torch.equal(res.x[2], x0[2]) and not bool(res.converged[2])
    assert res.max_iter_reached.tolist() == [False, True, False, True]
    assert bool(res.converged[0])  # condition number 1: one step


def test_gtol_is_per_problem_and_preconditioner_is_used():
    fun, xstar = _quadratics(3, 8, seed=2)
    gtol = torch.tensor([1e-2, 1e-6, 1e-10], dtype=torch.float64)
    res = lbfgs_batched(fun, torch.zeros(3, 8, dtype=torch.float64), gtol=gtol, max_iter=500)
    assert bool((res.grad_max <= gtol).all())
    # With the exact inverse Hessian as preconditioner every problem converges in one step.
    H = torch.stack(
        [torch.func.jacrev(lambda x, b=b: fun(x[None], torch.tensor([b]))[1][0])(xstar[b])
         for b in range(3)]
    )

    def pre(q, idx):
        return torch.linalg.solve(H[idx], q)

    res2 = lbfgs_batched(fun, torch.zeros(3, 8, dtype=torch.float64), gtol=1e-9, precondition=pre)
    assert res2.n_iter.tolist() == [1, 1, 1]
    torch.testing.assert_close(res2.x, xstar, rtol=0, atol=1e-8)
