import numpy as np
import pytest
import torch

from probekit.errors import ConfigError, DataError, NonFiniteError
from probekit.similarity import cca_similarity, cka, minibatch_cka, procrustes_distance, rdm, rsa
from tests.similarity._helpers import randn

MEASURES = {
    "cka": cka,
    "cka_debiased": lambda x, y: cka(x, y, debiased=True),
    "cka_rbf": lambda x, y: cka(x, y, "rbf"),
    "procrustes": procrustes_distance,
    "svcca": cca_similarity,
    "pwcca": lambda x, y: cca_similarity(x, y, "pwcca"),
    "minibatch": lambda x, y: minibatch_cka(x, y, batch_size=16),
}


@pytest.mark.parametrize("fn", MEASURES.values(), ids=MEASURES.keys())
def test_bad_inputs_raise_probekit_errors_naming_the_problem(fn):
    X = randn(0, 30, 4)
    with pytest.raises(DataError, match=r"X has shape \(30, 4\) but Y has shape \(29, 4\)"):
        fn(X, X[:29])
    bad = X.clone()
    bad[7, 1] = float("inf")
    with pytest.raises(NonFiniteError, match="first in row 7"):
        fn(X, bad)
    with pytest.raises(DataError, match=r"has 2 stimuli \(shape \(2, 4\)\)"):
        fn(X[:2], X[:2])
    with pytest.raises(DataError, match="is constant"):
        fn(X, torch.full((30, 4), 3.0, dtype=torch.float64))
    # a 3-D input: the annotation's check (probekit.shapes), before jaxtyping's under pytest
    with pytest.raises(DataError, match=r"X has shape \(30, 2, 2\) \(3-D\); expected \(n1, d1\)"):
        fn(X.reshape(30, 2, 2), X)


def test_constant_feature_columns_are_harmless_for_cka():
    X = randn(1, 40, 5)
    Xpad = torch.cat([X, torch.full((40, 2), 7.0, dtype=torch.float64)], 1)  # dead units
    assert cka(Xpad, X) == pytest.approx(1.0, abs=1e-9)
    assert cca_similarity(Xpad, X, keep=1.0) == pytest.approx(1.0, abs=1e-9)


def test_option_and_rdm_errors():
    X = randn(2, 20, 3)
    with pytest.raises(ConfigError, match="kernel='cosine' is not supported"):
        cka(X, X, kernel="cosine")
    with pytest.raises(ConfigError, match="space='feature' needs kernel='linear'"):
        cka(X, X, "rbf", space="feature")
    with pytest.raises(DataError, match=r"CCA needs n > kept dimensions"):
        cca_similarity(randn(3, 10, 20), randn(4, 10, 20), keep=None)
    with pytest.raises(ConfigError, match="keep=1.5"):
        cca_similarity(X, X, keep=1.5)
    Xc = X.clone()
    Xc[4] = 2.0
    with pytest.raises(DataError, match="stimulus row 4 .* constant across features"):
        rdm(Xc, "correlation")
    with pytest.raises(DataError, match=r"rdm_a has shape \(20, 20\) but rdm_b has shape \(19, 19\)"):
        rsa(rdm(X), rdm(X[:19]))
    with pytest.raises(DataError, match="not symmetric"):
        rsa(np.triu(rdm(X).numpy()), rdm(X))
    with pytest.raises(ConfigError, match="method='pearson' is not supported"):
        rsa(rdm(X), rdm(X), "pearson")
