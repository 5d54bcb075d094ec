import numpy as np
import pytest
from sklearn.linear_model import Ridge
from sklearn.metrics import roc_auc_score

from probekit.probes import DiffMeansProbe, RidgeProbe, auroc, diffmeans_direction, r2_score
from probekit.probes.diffmeans import best_threshold


def regression_data(n=400, d=15, t=None, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, d)) * rng.uniform(0.1, 5, d) + rng.normal(size=d) * 4
    W = rng.normal(size=(d,) if t is None else (d, t))
    y = X @ W + rng.normal(size=(n,) if t is None else (n, t)) * 3
    return X, y


@pytest.mark.parametrize("alpha", [1e-3, 1.0, 100.0])
@pytest.mark.parametrize("t", [None, 3])
def test_ridge_matches_sklearn(alpha, t):
    X, y = regression_data(t=t, seed=int(alpha * 10) % 7)
    probe = RidgeProbe(alpha=alpha).fit(X, y)
    m, s = X.mean(0), X.std(0)
    ref = Ridge(alpha=alpha, fit_intercept=True, solver="cholesky").fit((X - m) / s, y)
    np.testing.assert_allclose(probe.predict(X[:50]), ref.predict((X[:50] - m) / s), rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(probe.coef_ * s, ref.coef_, rtol=1e-6, atol=1e-8)
    assert probe.score(X, y) == pytest.approx(ref.score((X - m) / s, y), abs=1e-9)


def test_ridge_cv_picks_grid_argmax_by_brute_force():
    X, y = regression_data(n=300, d=40, seed=3)
    grid = [0.01, 1.0, 100.0, 1e4]
    probe = RidgeProbe(alphas=grid, cv=3).fit(X, y)
    folds = np.array_split(np.arange(300), 3)
    Z = (X - X.mean(0)) / X.std(0)  # standardised once on the training data, then CV
    brute = []
    for a in grid:
        r2 = []
        for te in folds:
            tr = np.setdiff1d(np.arange(300), te)
            r2.append(Ridge(alpha=a).fit(Z[tr], y[tr]).score(Z[te], y[te]))
        brute.append(np.mean(r2))
    np.testing.assert_allclose(probe.cv_scores_, brute, atol=1e-9)
    assert probe.alpha_ == grid[int(np.argmax(brute))]


def test_auroc_matches_sklearn_with_ties_batched():
    rng = np.random.default_rng(0)
    y = rng.integers(0, 2, (4, 300))
    s = np.round(rng.normal(size=(4, 300)) + y * 0.8, 1)  # many ties
    got = auroc(s, y)
    for i in range(4):
        assert got[i] == pytest.approx(roc_auc_score(y[i], s[i]), abs=1e-12)
    assert np.isnan(auroc(s[0], np.ones(300)))


def test_r2_matches_definition():
    rng = np.random.default_rng(1)
    t = rng.normal(size=50)
    p = t + rng.normal(size=50) * 0.5
    assert r2_score(p, t) == pytest.approx(1 - ((t - p) ** 2).sum() / ((t - t.mean()) ** 2).sum())


def binary_data(n=600, d=12, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    w = rng.normal(size=d)
    X = rng.normal(size=(n, d)) + np.outer(y, w) * 0.4 + 2.0
    return X, y


def test_diffmeans_formula_and_auroc():
    X, y = binary_data()
    probe = DiffMeansProbe().fit(X[:400], y[:400])
    mu1, mu0 = X[:400][y[:400] == 1].mean(0), X[:400][y[:400] == 0].mean(0)
    w = mu1 - mu0
    expected = (X[400:] - (mu1 + mu0) / 2) @ w / np.linalg.norm(w)
    np.testing.assert_allclose(probe.decision_function(X[400:]), expected, atol=1e-9)
    assert probe.score(X[400:], y[400:]) == pytest.approx(roc_auc_score(y[400:], expected), abs=1e-12)
    assert probe.score(X[400:], y[400:]) > 0.8
    # Batched helper agrees.
    wb, mub = diffmeans_direction(np.stack([X[:400], X[:400]]), y[:400])
    np.testing.assert_allclose(wb[1], w)
    np.testing.assert_allclose(mub[0], (mu1 + mu0) / 2)


def test_diffmeans_string_labels_orient_to_second_class():
    X, y = binary_data(seed=1)
    labels = np.where(y == 1, "correct", "wrong")  # classes_ = ['correct', 'wrong']
    probe = DiffMeansProbe().fit(X, labels)
    assert probe.score(X, labels) == pytest.approx(roc_auc_score(labels == "wrong", probe.decision_function(X)))
    assert probe.score(X, labels) > 0.7  # direction points from classes_[0] to classes_[1]
    assert np.all((probe.decision_function(X) > 0) == (probe.predict(X) == "wrong"))


def test_train_threshold_maximises_training_accuracy():
    X, y = binary_data(n=200, seed=2)
    s = np.round(X[:, 0] + y, 1)
    t = best_threshold(s, y)
    cand = np.concatenate([[s.min() - 1], (np.sort(np.unique(s))[1:] + np.sort(np.unique(s))[:-1]) / 2, [s.max()]])
    best = max(((s > c) == y).mean() for c in cand)
    assert ((s > t) == y).mean() == pytest.approx(best)
    probe = DiffMeansProbe(threshold="train").fit(X, y)
    mid = DiffMeansProbe().fit(X, y)
    assert probe.score(X, y) == pytest.approx(mid.score(X, y))  # AUROC independent of the cut
    assert (probe.predict(X) == y).mean() >= (mid.predict(X) == y).mean()


def test_diffmeans_errors():
    X, y = binary_data(n=60)
    with pytest.raises(ValueError, match="Only binary classification"):
        DiffMeansProbe().fit(X, np.arange(60) % 3)
    with pytest.raises(ValueError, match="got 60 positives and 0 negatives"):
        diffmeans_direction(X, np.ones(60))
