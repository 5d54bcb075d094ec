import itertools

import numpy as np
import pytest
import torch

from probekit.similarity import MinibatchCKA, cka, hsic, linear_gram, minibatch_cka, rbf_gram
from tests.similarity._helpers import np_linear_cka, orthogonal, randn, related


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
@pytest.mark.parametrize("debiased", [False, True])
def test_identical_inputs_give_one(kernel, debiased):
    X = randn(0, 60, 9)
    assert cka(X, X, kernel, debiased) == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
@pytest.mark.parametrize("debiased", [False, True])
def test_invariant_to_orthogonal_maps_scaling_and_shift(kernel, debiased):
    X, Y = related(1)
    ref = cka(X, Y, kernel, debiased)
    moved = 3.7 * X @ orthogonal(5, X.shape[1]) + 2.0
    assert cka(moved, Y, kernel, debiased) == pytest.approx(ref, abs=1e-9)
    assert cka(X, 0.01 * Y @ orthogonal(6, Y.shape[1]), kernel, debiased) == pytest.approx(ref, abs=1e-9)


@pytest.mark.parametrize("kernel", ["linear", "rbf"])
def test_not_invariant_to_general_invertible_maps(kernel):
    X = randn(2, 300, 10)
    A = torch.diag(torch.logspace(0, 2, 10, dtype=torch.float64)) @ orthogonal(3, 10)  # cond 100
    assert torch.linalg.matrix_rank(A) == 10
    assert cka(X, X @ A, kernel) < 0.8  # CCA would call these identical; CKA does not


@pytest.mark.parametrize("d", [10, 100, 1000])
def test_debiased_cka_of_independent_data_is_near_zero_at_any_d_over_n(d):
    n = 200  # sd of debiased CKA under independence is ~0.008 here (measured over 40 seeds)
    vals = [cka(randn(s, n, d), randn(s + 100, n, d), debiased=True) for s in range(5)]
    assert abs(np.mean(vals)) < 0.015
    assert max(abs(v) for v in vals) < 0.05
    if d > n:  # the biased estimator is far from 0 here (Nguyen et al. 2021, fig. 1)
        assert cka(randn(0, n, d), randn(100, n, d)) > 0.5


@pytest.mark.parametrize("shape", [(50, 8, 5), (30, 70, 40), (200, 3, 3)])
def test_linear_cka_matches_direct_numpy_formula(shape):
    n, dx, dy = shape
    X, Y = related(7, n, dx, dy)
    got = cka(X.float(), Y.numpy())  # mixed float32 tensor / float64 array inputs
    ref = np_linear_cka(X.float().double(), Y)
    assert got == pytest.approx(ref, abs=1e-6)
    assert cka(X, Y) == pytest.approx(np_linear_cka(X, Y), abs=1e-9)


def _np_gram_cka(K, L, debiased):
    n = K.shape[0]
    if not debiased:
        H = np.eye(n) - np.ones((n, n)) / n
        h = lambda A, B: np.trace(A @ H @ B @ H)  # noqa: E731
    else:
        h = _np_hsic_u
    return h(K, L) / np.sqrt(h(K, K) * h(L, L))


def _np_hsic_u(K, L):
    """The closed form of Song et al. (2012) / Nguyen et al. (2021) in numpy (checked against brute force below)."""
    n = K.shape[0]
    Kt, Lt = K - np.diag(np.diag(K)), L - np.diag(np.diag(L))
    one = np.ones(n)
    return (
        np.trace(Kt @ Lt) + (one @ Kt @ one) * (one @ Lt @ one) / ((n - 1) * (n - 2))
        - 2 / (n - 2) * one @ Kt @ Lt @ one
    ) / (n * (n - 3))


def _brute_hsic_u(K, L):
    """Song et al. 2012 U-statistic: mean over ordered distinct (i, j, q, r) of
    K_ij L_ij + K_ij L_qr - 2 K_ij L_iq."""
    n = K.shape[0]
    tot, cnt = 0.0, 0
    for i, j, q, r in itertools.permutations(range(n), 4):
        tot += K[i, j] * L[i, j] + K[i, j] * L[q, r] - 2 * K[i, j] * L[i, q]
        cnt += 1
    return tot / cnt


def test_unbiased_hsic_equals_brute_force_u_statistic():
    X, Y = related(3, n=7, dx=4, dy=3)
    K, L = (X @ X.T).numpy(), rbf_gram(Y).numpy()
    brute = _brute_hsic_u(K, L)
    assert hsic(torch.from_numpy(K), torch.from_numpy(L), debiased=True) == pytest.approx(brute, rel=1e-9)
    assert _np_hsic_u(K, L) == pytest.approx(brute, rel=1e-9)


@pytest.mark.parametrize("debiased", [False, True])
def test_feature_space_equals_gram_space(debiased):
    for n, dx, dy in [(40, 6, 9), (12, 50, 30)]:
        X, Y = related(11, n, dx, dy)
        f = cka(X, Y, debiased=debiased, space="feature")
        g = cka(X, Y, debiased=debiased, space="gram")
        assert f == pytest.approx(g, abs=1e-9)


def test_rbf_cka_matches_numpy_formula():
    X, Y = related(4, n=40)

    def np_rbf(A, f=0.8):
        A = A.numpy()
        d2 = ((A[:, None, :] - A[None, :, :]) ** 2).sum(-1)
        med = np.median(d2[np.triu_indices(len(A), 1)])
        return np.exp(-d2 / (2 * f * f * med))

    for deb in (False, True):
        ref = _np_gram_cka(np_rbf(X), np_rbf(Y), deb)
        assert cka(X, Y, "rbf", deb) == pytest.approx(ref, abs=1e-9)
    assert cka(X, Y, "linear", True) == pytest.approx(
        _np_gram_cka(linear_gram(X).numpy(), linear_gram(Y).numpy(), True), abs=1e-9
    )


def test_minibatch_cka_one_batch_equals_debiased_cka_and_streaming_matches():
    X, Y = related(8, n=300)
    assert minibatch_cka(X, Y, batch_size=1000) == pytest.approx(cka(X, Y, debiased=True), abs=1e-9)
    acc = MinibatchCKA()
    for xb, yb in zip(X.split(100), Y.split(100)):
        acc.update(xb, yb)
    assert acc.n_seen == 300 and acc.n_batches == 3
    ref = MinibatchCKA()
    for xb, yb in zip(X.split(100), Y.split(100)):
        ref.update(xb.numpy(), yb.numpy())
    assert acc.value() == pytest.approx(ref.value(), abs=1e-9)


@pytest.mark.parametrize(("kernel", "n", "batches"), [("linear", 3000, (50, 300, 1500)), ("rbf", 1500, (100, 750))])
def test_minibatch_cka_converges_to_full_cka(kernel, n, batches):
    X, Y = related(9, n=3000, dx=16, dy=8, noise=2.0)
    X, Y = X[:n], Y[:n]
    full = cka(X, Y, kernel, debiased=True)
    assert 0.3 < full < 0.6
    for b in batches:  # measured: |error| <= 0.0013 for these batch sizes
        assert minibatch_cka(X, Y, batch_size=b, kernel=kernel) == pytest.approx(full, abs=0.005)
    if kernel == "linear":
        assert minibatch_cka(X, Y, batch_size=batches[-1]) == pytest.approx(full, abs=1e-3)
