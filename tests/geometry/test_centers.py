"""The common-centre subspace search when a larger K turns singular (geometry/centers.py)."""

from __future__ import annotations

import pytest
import torch

from probekit.errors import DataError
from probekit.geometry import centers


def _singular_from(k_bad: int, real=centers._fit_subspaces):
    def fit(x, k, *args, **kwargs):
        if k >= k_bad:
            raise torch.linalg.LinAlgError("planted: singular Gram matrix")
        return real(x, k, *args, **kwargs)
    return fit


def test_a_singular_fit_at_a_larger_k_ends_the_search_at_the_fitted_ks(monkeypatch):
    gen = torch.Generator().manual_seed(0)
    c = torch.randn(20, 8, generator=gen, dtype=torch.float64)
    full = centers.common_center_subspace(c, max_k=3, n_reps=2, max_iter=50)
    monkeypatch.setattr(centers, "_fit_subspaces", _singular_from(2))
    cut = centers.common_center_subspace(c, max_k=3, n_reps=2, max_iter=50)
    assert cut.n_common == 1 and len(cut.residual_correlation) == 1
    assert cut.basis.shape == (20, 1)
    assert cut.residual_correlation[0] == pytest.approx(full.residual_correlation[0], rel=1e-9)


def test_a_singular_fit_at_k_1_is_named(monkeypatch):
    monkeypatch.setattr(centers, "_fit_subspaces", _singular_from(1))
    c = torch.randn(20, 8, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    with pytest.raises(DataError, match=r"fit of K=1 became singular"):
        centers.common_center_subspace(c, max_k=3, n_reps=2, max_iter=50)
