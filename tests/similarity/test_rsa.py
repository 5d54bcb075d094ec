import numpy as np
import pytest
import torch
from scipy.spatial.distance import pdist, squareform

from probekit.similarity import rdm, rsa, rsa_test
from tests.similarity._helpers import randn, related

rsatoolbox = pytest.importorskip("rsatoolbox")  # test-only dependency (dev extra)


def _rsatb_rdm(D):
    return rsatoolbox.rdm.RDMs(squareform(np.asarray(D), checks=False)[None, :])


def _rdm_pairs():
    X, Y = related(0, n=30, dx=10, dy=6, noise=1.5)
    yield rdm(X), rdm(Y, "euclidean")
    # a categorical model RDM (many ties) against a data RDM: where tau-a differs from tau-b
    cats = np.repeat(np.arange(5), 6)
    model = (cats[:, None] != cats[None, :]).astype(float)
    yield torch.from_numpy(model), rdm(X, "cosine")
    yield rdm(X, "sqeuclidean"), rdm(X + 0.3 * randn(3, 30, 10), "correlation")


@pytest.mark.parametrize(("ours", "theirs"), [("spearman", "spearman"), ("kendall_tau_a", "tau-a"), ("cosine", "cosine")])
def test_rsa_matches_rsatoolbox_compare(ours, theirs):
    for A, B in _rdm_pairs():
        ref = float(rsatoolbox.rdm.compare(_rsatb_rdm(A), _rsatb_rdm(B), method=theirs)[0, 0])
        assert rsa(A, B, ours) == pytest.approx(ref, abs=1e-6)


def test_rdms_match_rsatoolbox_and_scipy():
    X = randn(1, 25, 8).numpy()
    data = rsatoolbox.data.Dataset(X)
    corr = rsatoolbox.rdm.calc_rdm(data, method="correlation").get_matrices()[0]
    sqe = rsatoolbox.rdm.calc_rdm(data, method="euclidean").get_matrices()[0]  # squared / d
    np.testing.assert_allclose(rdm(X, "correlation").numpy(), corr, atol=1e-9)
    np.testing.assert_allclose(rdm(X, "sqeuclidean").numpy() / X.shape[1], sqe, atol=1e-9)
    np.testing.assert_allclose(rdm(X, "euclidean").numpy(), squareform(pdist(X)), atol=1e-9)
    np.testing.assert_allclose(rdm(X, "cosine").numpy(), squareform(pdist(X, "cosine")), atol=1e-9)


def test_rsa_test_finds_planted_similarity_with_a_bootstrap_ci():
    X, Y = related(2, n=40, dx=10, dy=6, noise=1.0)
    res = rsa_test(rdm(X), rdm(Y), "spearman", n_permutations=199)
    assert res.statistic == pytest.approx(rsa(rdm(X), rdm(Y)), abs=1e-9)
    assert res.p_value == pytest.approx(1 / 200)  # floor: no permutation reaches the observed
    assert res.ci_low < res.statistic < res.ci_high
    assert res.ci_low > 0.1 and res.ci_high - res.ci_low < 0.5
    assert res.null_distribution.shape == (199,) and abs(res.null_distribution.mean()) < 0.05


def test_rsa_permutation_test_is_calibrated_under_the_null():
    pvals = []
    for s in range(40):
        X, Y = randn(100 + s, 15, 5), randn(200 + s, 15, 5)
        pvals.append(rsa_test(rdm(X), rdm(Y), "cosine", n_permutations=99, n_bootstrap=0, random_state=s).p_value)
    assert np.isnan(rsa_test(rdm(X), rdm(Y), n_permutations=1, n_bootstrap=0).ci_low)  # no CI asked
    rate = np.mean(np.array(pvals) <= 0.1)
    assert rate <= 0.25  # nominal 0.1; 40 draws
    assert 0.3 < np.median(pvals) < 0.7


def test_identical_rdms_have_similarity_one_and_a_degenerate_ci():
    D = rdm(randn(4, 20, 6))
    res = rsa_test(D, D, "spearman", n_permutations=50)
    assert res.statistic == pytest.approx(1.0)
    assert res.ci_low == pytest.approx(1.0) and res.ci_high == pytest.approx(1.0)
