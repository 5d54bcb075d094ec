import warnings

import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
from sklearn.model_selection import StratifiedKFold
from sklearn.utils.estimator_checks import parametrize_with_checks

from probekit.probes import DiffMeansProbe, LogisticProbe, RidgeProbe, fit_logistic_batched
from probekit.probes._validation import check_n_labels


def blobs(n=1500, d=20, k=3, sep=0.35, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    mu = rng.normal(size=(k, d)) * sep
    scales = rng.uniform(0.3, 4.0, d)
    X = (rng.normal(size=(n, d)) + mu[y]) * scales + rng.normal(size=d) * 3
    return X, y


def standardise(Xtr, *others):
    m, s = Xtr.mean(0), Xtr.std(0)
    return [(Xtr - m) / s] + [(o - m) / s for o in others]


@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.parametrize("C", [1e-3, 0.1, 10.0])
def test_fixed_C_matches_sklearn(k, C):
    X, y = blobs(k=k, seed=k)
    Xtr, ytr, Xte, yte = X[:1000], y[:1000], X[1000:], y[1000:]
    probe = LogisticProbe(C=C).fit(Xtr, ytr)
    Ztr, Zte = standardise(Xtr, Xte)
    ref = LogisticRegression(C=C, tol=1e-10, max_iter=5000).fit(Ztr, ytr)
    p, r = probe.predict(Xte), ref.predict(Zte)
    assert (p == r).mean() >= 0.99
    assert abs((p == yte).mean() - (r == yte).mean()) <= 0.005
    # Same parametrisation: coefficients on the standardised scale agree.
    np.testing.assert_allclose(probe.coef_ * Xtr.std(0), ref.coef_, atol=2e-3 * max(1, np.abs(ref.coef_).max()))
    assert probe.coef_.shape == ((1, 20) if k == 2 else (k, 20))
    np.testing.assert_allclose(probe.predict_proba(Xte), ref.predict_proba(Zte), atol=1e-3)


def test_cv_selects_same_C_as_logisticregressioncv():
    X, y = blobs(n=1800, d=10, k=3, sep=0.5, seed=3)
    Xtr, ytr, Xte = X[:1200], y[:1200], X[1200:]
    probe = LogisticProbe(Cs=6, cv=4).fit(Xtr, ytr)
    Ztr, Zte = standardise(Xtr, Xte)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = LogisticRegressionCV(
            Cs=6, cv=StratifiedKFold(4), l1_ratios=(0,), scoring="accuracy",
            use_legacy_attributes=False, tol=1e-8, max_iter=2000,
        ).fit(Ztr, ytr)
    np.testing.assert_allclose(probe.cv_scores_, ref.scores_.mean(0).ravel(), atol=2 / 300)
    assert pytest.approx(float(ref.C_)) == probe.C_
    assert (probe.predict(Xte) == ref.predict(Zte)).mean() >= 0.99


def test_batched_problems_equal_individual_solves():
    X, y = blobs(n=600, d=8, k=3, seed=5)
    Z = torch.tensor(standardise(X)[0]).unsqueeze(0)
    rng = np.random.default_rng(0)
    ys = torch.tensor(np.stack([y, rng.permutation(y), rng.permutation(y)]))
    masks = torch.ones(3, 600, dtype=torch.bool)
    masks[1, :100] = False
    C = torch.tensor([0.01, 1.0, 100.0], dtype=torch.float64)
    fit = fit_logistic_batched(Z, ys, 3, train_mask=masks, C=C, target_index=torch.arange(3), tol=1e-8)
    assert bool(fit.converged.all())
    for p in range(3):
        rows = masks[p].numpy()
        ref = LogisticRegression(C=float(C[p]), tol=1e-10, max_iter=5000).fit(Z[0, rows].numpy(), ys[p, rows].numpy())
        np.testing.assert_allclose(fit.coef[0, :, p].T.numpy(), ref.coef_, atol=1e-4)
        np.testing.assert_allclose(fit.intercept[0, p].numpy(), ref.intercept_, atol=1e-4)


def test_float32_agrees_with_float64():
    X, y = blobs(n=1200, d=30, k=4, seed=7)
    a = LogisticProbe(C=1.0, dtype="float32").fit(X[:900], y[:900]).predict(X[900:])
    b = LogisticProbe(C=1.0, dtype="float64").fit(X[:900], y[:900]).predict(X[900:])
    assert (a == b).mean() >= 0.99


def test_label_count_mismatch_names_both_counts():
    X, y = blobs(n=100)
    with pytest.raises(ValueError, match="100.*90"):
        LogisticProbe(C=1.0).fit(X, y[:90])
    with pytest.raises(ValueError, match="got 100 activations but 90 labels"):
        check_n_labels(100, y[:90])


def test_single_class_and_bad_dtype_errors():
    X, _ = blobs(n=50)
    with pytest.raises(ValueError, match="only one class"):
        LogisticProbe(C=1.0).fit(X, np.zeros(50))
    with pytest.raises(ValueError, match="float16"):
        LogisticProbe(C=1.0, dtype="float16").fit(X, np.arange(50) % 2)


def _expected_failures(est):
    return {}


@parametrize_with_checks(
    [LogisticProbe(Cs=3, cv=3), LogisticProbe(C=1.0), RidgeProbe(), RidgeProbe(alphas=[0.1, 1.0], cv=3), DiffMeansProbe()],
    expected_failed_checks=_expected_failures,
)
def test_sklearn_compatible(estimator, check):
    check(estimator)


@pytest.mark.parametrize("k", [2, 3])
def test_wide_d_greater_than_n_matches_sklearn(k):
    # d > n: the solver works in the row span of the training rows; the weights mapped back to
    # the d input features must equal sklearn's full-space solution, per fold mask and C.
    rng = np.random.default_rng(11 + k)
    n, d = 70, 150
    y = rng.integers(0, k, n)
    X = rng.normal(size=(n, d)) + 0.8 * rng.normal(size=(k, d))[y]
    Z = torch.tensor(standardise(X)[0]).unsqueeze(0).repeat(2, 1, 1)
    Z[1] = Z[1] * 0.5 + 0.1
    masks = torch.ones(3, n, dtype=torch.bool)
    masks[1, :20] = False
    masks[2, 30:55] = False
    masks[:, -5:] = False  # rows no problem trains on
    C = torch.tensor([0.01, 0.3, 3.0], dtype=torch.float64)
    fit = fit_logistic_batched(Z, torch.tensor(y), k, train_mask=masks, C=C, tol=1e-9, max_iter=2000)
    assert fit.coef.shape == (2, d, 3, 1 if k == 2 else k)
    assert bool(fit.converged.all())
    for ell in range(2):
        for p in range(3):
            rows = masks[p].numpy()
            ref = LogisticRegression(C=float(C[p]), tol=1e-12, max_iter=20000).fit(
                Z[ell, rows].numpy(), y[rows]
            )
            scale = max(1.0, np.abs(ref.coef_).max())
            np.testing.assert_allclose(fit.coef[ell, :, p].T.numpy(), ref.coef_, atol=1e-4 * scale)
            np.testing.assert_allclose(fit.intercept[ell, p].numpy(), ref.intercept_, atol=1e-4 * scale)
    # A warm start from the solution is (already) converged and left in place.
    again = fit_logistic_batched(
        Z, torch.tensor(y), k, train_mask=masks, C=C, init=fit, tol=1e-9, max_iter=2000
    )
    np.testing.assert_allclose(again.coef.numpy(), fit.coef.numpy(), atol=1e-6)


def test_wide_d_greater_than_n_probe_cv_matches_sklearn():
    rng = np.random.default_rng(5)
    n, d, k = 150, 300, 3
    y = rng.integers(0, k, n)
    X = rng.normal(size=(n, d)) * rng.uniform(0.5, 3, d) + 1.5 * rng.normal(size=(k, d))[y]
    Xtr, ytr, Xte = X[:100], y[:100], X[100:]
    probe = LogisticProbe(Cs=5, cv=3).fit(Xtr, ytr)
    Ztr, Zte = standardise(Xtr, Xte)
    ref = LogisticRegression(C=probe.C_, tol=1e-10, max_iter=10000).fit(Ztr, ytr)
    assert (probe.predict(Xte) == ref.predict(Zte)).mean() >= 0.99
