"""Dimension and class-separation measures on constructed cases with known answers."""

import numpy as np
import pytest
import torch

from probekit.errors import DataError, NonFiniteError
from probekit.geometry.dimension import (
    covariance_spectrum,
    fisher_ratio,
    n_components_for_variance,
    nc1,
    numerical_rank,
    participation_ratio,
    participation_ratio_per_class,
)


def _planted(n=400, d=20, scales=(3.0, 2.0, 1.0), seed=0):
    g = torch.Generator().manual_seed(seed)
    z = torch.randn(n, len(scales), generator=g, dtype=torch.float64) * torch.tensor(scales)
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    return z @ q[:, : len(scales)].T


def test_spectrum_matches_numpy_cov():
    x = _planted()
    ev = covariance_spectrum(x)[0]
    ref = np.sort(np.linalg.eigvalsh(np.cov(x.numpy().T)))[::-1]
    np.testing.assert_allclose(ev[:20].numpy(), ref, atol=1e-9)


def test_pr_of_equal_variance_subspace_is_its_dimension():
    g = torch.Generator().manual_seed(1)
    k = 5
    z = torch.linalg.qr(torch.randn(1000, k, generator=g, dtype=torch.float64)).Q  # exact equal var
    z = z - z.mean(0)
    q, _ = torch.linalg.qr(torch.randn(30, 30, generator=g, dtype=torch.float64))
    x = z @ q[:, :k].T
    # centred orthonormal-ish columns: PR from the exact eigenvalues
    ev = covariance_spectrum(x)[0]
    expect = float(ev.sum() ** 2 / (ev**2).sum())
    assert float(participation_ratio(x)[0]) == pytest.approx(expect, rel=1e-9)
    assert float(participation_ratio(x)[0]) == pytest.approx(k, rel=0.02)
    assert int(numerical_rank(x)[0]) == k


def test_pcs_and_rank_on_planted_scales():
    x = _planted(scales=(10.0, 1.0, 0.1))
    assert int(n_components_for_variance(x, 0.9)[0]) == 1
    assert int(n_components_for_variance(x, 0.999)[0]) == 2
    assert int(numerical_rank(x, rtol=1e-3)[0]) == 3
    assert int(numerical_rank(x, rtol=0.05)[0]) == 2


def test_layers_at_once_equal_one_by_one_and_invariance():
    a, b = _planted(seed=2), _planted(scales=(1.0, 1.0), seed=3)
    both = torch.stack([a, b])
    y = np.arange(400) % 4
    q, _ = torch.linalg.qr(torch.randn(20, 20, dtype=torch.float64, generator=torch.Generator().manual_seed(5)))
    moved = 2.5 * both @ q + 7.0
    for fn in (participation_ratio, n_components_for_variance, numerical_rank):
        got = fn(both)
        assert torch.equal(got[1:], fn(b)) or torch.allclose(got[1:], fn(b))
        torch.testing.assert_close(fn(moved).to(torch.float64), got.to(torch.float64))
    for fn in (nc1, fisher_ratio):
        torch.testing.assert_close(fn(moved, y), fn(both, y))


def test_nc1_and_fisher_on_separated_classes():
    g = torch.Generator().manual_seed(0)
    c, per, d = 4, 50, 6
    means = 10 * torch.eye(d, dtype=torch.float64)[:c]
    noise = torch.randn(c * per, d, generator=g, dtype=torch.float64)
    y = np.repeat(np.arange(c), per)
    for sigma in (0.0, 1.0):
        x = means[torch.from_numpy(y)] + sigma * noise
        if sigma == 0.0:
            assert float(nc1(x, y)[0]) == pytest.approx(0.0, abs=1e-20)
        else:
            # brute force: scatter matrices from the definitions
            xn = x.numpy()
            mu = np.stack([xn[y == k].mean(0) for k in range(c)])
            sw = sum(np.outer(r - mu[k], r - mu[k]) for r, k in zip(xn, y)) / len(xn)
            sb = np.cov((mu - mu.mean(0)).T, bias=True)
            ev, vec = np.linalg.eigh(sb)
            keep = ev >= 1e-3 * ev[-1]
            pinv = (vec[:, keep] / ev[keep]) @ vec[:, keep].T
            assert float(nc1(x, y)[0]) == pytest.approx(np.trace(sw @ pinv) / c, rel=1e-9)
            assert float(fisher_ratio(x, y)[0]) == pytest.approx(np.trace(sb) / np.trace(sw), rel=1e-9)
    pr = participation_ratio_per_class(means[torch.from_numpy(y)] + noise, y)
    assert pr.shape == (1, c) and torch.all((pr > 4) & (pr <= 6))


def test_bad_inputs():
    x = torch.randn(10, 3)
    with pytest.raises(DataError, match="one point"):
        nc1(x, [0] * 9 + [1])
    with pytest.raises(DataError, match="at least 2"):
        fisher_ratio(x, [0] * 10)
    x[0, 0] = float("inf")
    with pytest.raises(NonFiniteError):
        participation_ratio(x)
    with pytest.raises(DataError, match="one label per row"):
        nc1(torch.randn(10, 3), [0, 1])
