"""Concept factorization on constructed additive / interacting representations."""

import numpy as np
import pytest
import torch
from factorization_cases import grid

from probekit.errors import DataError
from probekit.geometry.factorization import concept_factorization


def _grid(**options):
    """``factorization_cases.grid`` plus a training mask holding out a diagonal band of combinations."""
    z, a, b = grid(**options)
    return z, a, b, (a + b) % 4 != 0


def test_additive_representation_generalizes_exactly():
    z, a, b, train = _grid()
    res = concept_factorization(z, a, b, train=train)
    assert res.n_heldout_combinations > 0
    assert float(res.r2_train[0]) == pytest.approx(1.0, abs=1e-9)
    assert float(res.r2_heldout[0]) == pytest.approx(1.0, abs=1e-9)
    assert int(res.rank_a[0]) == 2 and int(res.rank_b[0]) == 3
    np.testing.assert_allclose(res.principal_angles[0].numpy(), 90.0, atol=1e-6)


def test_overlapping_spans_give_zero_angles():
    z, a, b, train = _grid(ra=2, rb=2, overlap=True)
    res = concept_factorization(z, a, b, train=train)
    np.testing.assert_allclose(res.principal_angles[0].numpy(), 0.0, atol=1e-4)


def test_interaction_breaks_heldout_r2_and_layers_at_once():
    z0, a, b, train = _grid()
    z1, *_ = _grid(interaction=3.0)
    res = concept_factorization(torch.stack([z0, z1]), a, b, train=train)
    assert float(res.r2_heldout[0]) == pytest.approx(1.0, abs=1e-9)
    assert float(res.r2_heldout[1]) < 0.5
    # rotation + translation invariance
    q, _ = torch.linalg.qr(torch.randn(12, 12, dtype=torch.float64))
    moved = concept_factorization(torch.stack([z0, z1]) @ q + 4.0, a, b, train=train)
    torch.testing.assert_close(moved.r2_heldout, res.r2_heldout)
    torch.testing.assert_close(moved.principal_angles, res.principal_angles, atol=1e-5, rtol=0,
                               equal_nan=True)  # NaN pads the layer with fewer angles


def test_unidentified_factor_raises():
    z, a, b, _ = _grid()
    with pytest.raises(DataError, match="never occurs"):
        concept_factorization(z, a, b, train=a != 0)


def test_matches_sklearn_and_scipy_on_an_interacting_grid():
    # brute force: least squares on the one-hot design of the fitted combination means
    # (sklearn), R2 on the held-out combination means, angles by scipy.linalg.subspace_angles
    from scipy.linalg import subspace_angles
    from sklearn.linear_model import LinearRegression

    z, a, b, train = _grid(interaction=0.7, seed=4)
    res = concept_factorization(z, a, b, train=train)

    def means(mask):
        keys = sorted({(int(i), int(j)) for i, j in zip(a[mask], b[mask])})
        rows = np.array([z[(a == i) & (b == j) & mask].mean(0).numpy() for i, j in keys])
        design = np.array([np.r_[np.eye(6)[i], np.eye(5)[j]] for i, j in keys])
        return rows, design

    zt, dt = means(train)
    zh, dh = means(~train)
    reg = LinearRegression().fit(dt, zt)
    pred = reg.predict(dh)
    r2 = 1 - ((zh - pred) ** 2).sum() / ((zh - zh.mean(0)) ** 2).sum()
    assert float(res.r2_heldout[0]) == pytest.approx(r2, rel=1e-9)
    u = reg.coef_[:, :6].T - reg.coef_[:, :6].T.mean(0)
    v = reg.coef_[:, 6:].T - reg.coef_[:, 6:].T.mean(0)
    # both factor matrices have full centred rank here (5 and 4 of d = 12)
    assert (int(res.rank_a[0]), int(res.rank_b[0])) == (5, 4)
    ref = np.sort(np.rad2deg(subspace_angles(u.T, v.T)))
    np.testing.assert_allclose(res.principal_angles[0].numpy(), ref, atol=1e-6)
