import itertools

import numpy as np
import pytest
import torch
from scipy.linalg import orthogonal_procrustes

from probekit.similarity import canonical_correlations, cca_similarity, procrustes_distance
from probekit.similarity.shape import nuclear_cross
from tests.similarity._helpers import orthogonal, randn, related


def _np_procrustes(X, Y):
    """Reference: scipy's optimal rotation R, then the angle between Xn R and Yn."""
    X, Y = np.asarray(X), np.asarray(Y)
    d = max(X.shape[1], Y.shape[1])
    pad = lambda A: np.pad(A - A.mean(0), ((0, 0), (0, d - A.shape[1])))  # noqa: E731
    Xn, Yn = pad(X), pad(Y)
    Xn, Yn = Xn / np.linalg.norm(Xn), Yn / np.linalg.norm(Yn)
    R, _ = orthogonal_procrustes(Xn, Yn)
    return float(np.arccos(np.clip(np.sum(Xn @ R * Yn), -1, 1)))


def test_procrustes_is_zero_under_rotation_scaling_and_translation():
    X = randn(0, 80, 10)
    assert procrustes_distance(X, 4.2 * X @ orthogonal(1, 10) - 3.0) < 1e-6
    assert procrustes_distance(X, X @ torch.diag(torch.linspace(1, 3, 10, dtype=torch.float64))) > 0.05


@pytest.mark.parametrize("shape", [(60, 8, 5), (20, 40, 30)])
def test_procrustes_matches_scipy_orthogonal_procrustes(shape):
    n, dx, dy = shape
    X, Y = related(3, n, dx, dy)
    assert procrustes_distance(X, Y) == pytest.approx(_np_procrustes(X, Y), abs=1e-8)
    assert procrustes_distance(Y, X) == pytest.approx(procrustes_distance(X, Y), abs=1e-9)


def test_nuclear_norm_routes_agree():
    A, B = randn(5, 10, 30), randn(6, 10, 25)  # n < d: the n x n route
    assert nuclear_cross(A, B) == pytest.approx(float(torch.linalg.svdvals(A.T @ B).sum()), rel=1e-9)


def test_procrustes_triangle_inequality():
    reps = [randn(10 + k, 30, 6) + (0.5 * randn(0, 30, 6) if k % 2 else 0) for k in range(6)]
    for a, b, c in itertools.permutations(reps, 3):
        assert procrustes_distance(a, c) <= procrustes_distance(a, b) + procrustes_distance(b, c) + 1e-10


def _np_cca(Xc, Yc):
    """Raghu et al. / Morcos et al. (cca_core): whitened cross-covariance SVD."""
    sxx, syy, sxy = Xc.T @ Xc, Yc.T @ Yc, Xc.T @ Yc

    def inv_sqrt(S):
        w, V = np.linalg.eigh(S)
        return V @ np.diag(w**-0.5) @ V.T

    Wx, Wy = inv_sqrt(sxx), inv_sqrt(syy)
    U, rho, _ = np.linalg.svd(Wx @ sxy @ Wy, full_matrices=False)
    return rho, Xc @ Wx @ U  # correlations, canonical variates of X (n, k)


def _np_svcca(X, Y, keep=0.99):
    def reduce(A):
        Ac = A - A.mean(0)
        U, s, Vt = np.linalg.svd(Ac, full_matrices=False)
        k = int(np.searchsorted(np.cumsum(s**2) / np.sum(s**2), keep) + 1)
        return Ac @ Vt[:k].T  # top-k PC scores (Raghu et al.: 99% of the variance)

    rho, _ = _np_cca(reduce(np.asarray(X)), reduce(np.asarray(Y)))
    return float(rho.mean())


def _np_pwcca(X, Y):
    Xc, Yc = np.asarray(X) - np.asarray(X).mean(0), np.asarray(Y) - np.asarray(Y).mean(0)
    rho, H = _np_cca(Xc, Yc)
    P, _ = np.linalg.qr(H)  # Morcos et al.: orthonormalise the canonical variates
    w = np.abs(P.T @ Xc).sum(1)
    return float(np.sum(w / w.sum() * rho))


@pytest.mark.parametrize("shape", [(300, 12, 7), (300, 6, 9)])
def test_svcca_and_pwcca_match_direct_numpy(shape):
    n, dx, dy = shape
    X, Y = related(8, n, dx, dy, noise=1.5)
    X = X @ torch.diag(torch.logspace(0, -3, dx, dtype=torch.float64))  # decaying spectrum
    assert cca_similarity(X, Y, "svcca") == pytest.approx(_np_svcca(X, Y), abs=1e-8)
    assert cca_similarity(X, Y, "svcca", keep=0.9) == pytest.approx(_np_svcca(X, Y, 0.9), abs=1e-8)
    assert cca_similarity(X, Y, "pwcca") == pytest.approx(_np_pwcca(X, Y), abs=1e-8)
    rho, _ = _np_cca(X.numpy() - X.numpy().mean(0), Y.numpy() - Y.numpy().mean(0))
    np.testing.assert_allclose(canonical_correlations(X, Y).numpy(), rho, atol=1e-8)


def test_cca_is_invariant_to_invertible_linear_maps_and_truncation_by_count():
    X, Y = related(4, 200, 8, 8)
    A = randn(9, 8, 8)
    assert cca_similarity(X, X @ A, "svcca", keep=1.0) == pytest.approx(1.0, abs=1e-9)
    assert cca_similarity(X, Y, "svcca", keep=3) == pytest.approx(
        float(canonical_correlations(X, Y, keep_x=3, keep_y=3).mean()), abs=1e-9
    )
    assert canonical_correlations(X, Y, keep_x=3, keep_y=5).shape == (3,)
