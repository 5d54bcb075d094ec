"""Issue 19 §1: the float32 solver stops on the gradient criterion ``tol`` names, like sklearn."""

import warnings

import numpy as np
import pytest
import torch
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression, LogisticRegressionCV
from sklearn.model_selection import StratifiedKFold

from probekit.probes import (
    LogisticProbe,
    SweepConfig,
    cv_logistic_batched,
    fit_logistic_batched,
    sweep_layers,
)


def _heavy_tailed_acts(n_layers, n, d, k, seed):
    """Activation-like features: Student-t(2.5) noise, correlated, 3 'massive' dimensions."""
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(k), n // k)
    rng.shuffle(y)
    out = np.empty((n_layers, n, d), np.float32)
    for ell in range(n_layers):
        mix = rng.normal(size=(d, d)) / np.sqrt(d) + np.eye(d)
        Z = rng.standard_t(2.5, size=(n, d)) @ mix
        Z[:, :3] *= 40.0
        mu = rng.normal(size=(k, d)) * (0.05 + 0.1 * ell)
        out[ell] = Z + mu[y] * np.abs(Z).mean(0)
    return out, y


# float32 reaches max|grad|/n ~ 1e-6 on these problems except where d > n makes the training
# data separable and large C gives huge weights (floor ~2e-6 at C = 100): tol 1e-5 there.
@pytest.mark.parametrize(
    ("n", "d", "Cs", "tol", "coef_rtol"),
    [(480, 32, np.logspace(-4, 4, 10), 1e-6, 2e-3), (96, 256, np.logspace(-4, 2, 7), 1e-5, 1e-2)],
    ids=["n>d", "d>n"],
)
def test_float32_sweep_selects_converged_sklearn_C_and_coefficients(n, d, Cs, tol, coef_rtol):
    X, y = _heavy_tailed_acts(3, n, d, 4, seed=0)
    n_tr = int(0.75 * n)
    tr, te = np.arange(n_tr), np.arange(n_tr, n)
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)  # float32 must reach tol
        res = sweep_layers(
            torch.from_numpy(X), y, train_idx=tr, test_idx=te, config=SweepConfig(Cs=Cs, tol=tol, dtype=torch.float32, max_iter=2000),
        )
    folds = list(StratifiedKFold(5).split(np.zeros(n_tr), y[tr]))
    for ell in range(X.shape[0]):
        Xl = X[ell].astype(np.float64)[tr]
        Z = (Xl - Xl.mean(0)) / Xl.std(0)
        sk = LogisticRegressionCV(
            Cs=Cs, cv=folds, l1_ratios=(0,), scoring="accuracy", use_legacy_attributes=False,
            tol=1e-10, max_iter=20000,
        ).fit(Z, y[tr])
        mean = np.asarray(sk.scores_).reshape(len(folds), len(Cs)).mean(0)
        sk_C = Cs[np.flatnonzero(mean >= mean.max() - 1e-9)[0]]  # first max, exact ties
        assert res.hyperparameter[ell] == pytest.approx(sk_C, rel=1e-9), f"layer {ell}"
        cv = cv_logistic_batched(
            torch.tensor(Z, dtype=torch.float32).unsqueeze(0), torch.tensor(y[tr]), 4, Cs=Cs,
            folds=folds, tol=tol, max_iter=2000,
        )
        assert bool(cv.fit.converged.all())
        ref = LogisticRegression(C=sk_C, tol=1e-10, max_iter=20000).fit(Z, y[tr]).coef_
        W = cv.fit.coef[0, :, 0, :].T.numpy()
        W = W - W.mean(0)  # sklearn's symmetric multinomial: class-centred weights
        assert np.abs(W - ref).max() <= coef_rtol * np.abs(ref).max(), f"layer {ell}"


def test_float32_small_C_reaches_tol_where_the_old_rule_stopped_early():
    # The old relative-decrease rule (1.2e-4) stopped C=1e-4 fits after ~3 iterations with a
    # gradient far above tol; now every problem must reach tol in float32.
    X, y = _heavy_tailed_acts(2, 96, 576, 6, seed=1)
    Z = torch.from_numpy((X - X.mean(1, keepdims=True)) / X.std(1, keepdims=True))
    C = torch.tensor([1e-4, 1e-2, 1.0], dtype=torch.float64)
    fit = fit_logistic_batched(
        Z, torch.tensor(y), 6, train_mask=torch.ones(3, 96, dtype=torch.bool), C=C, tol=1e-5
    )
    assert bool(fit.converged.all()) and float(fit.grad_max.max()) <= 1e-5
    for ell in range(2):
        for p, c in enumerate(C.tolist()):
            ref = LogisticRegression(C=c, tol=1e-10, max_iter=10000).fit(Z[ell].double(), y)
            W = fit.coef[ell, :, p].T.numpy()
            W = W - W.mean(0)
            assert np.abs(W - ref.coef_).max() <= 2e-2 * np.abs(ref.coef_).max()


def test_max_iter_warns_and_reports_unconverged():
    X, y = _heavy_tailed_acts(1, 201, 16, 3, seed=2)
    Z = torch.from_numpy((X - X.mean(1, keepdims=True)) / X.std(1, keepdims=True)).double()
    with pytest.warns(ConvergenceWarning, match="max_iter=2 reached"):
        fit = fit_logistic_batched(
            Z, torch.tensor(y), 3, train_mask=torch.ones(1, 201, dtype=torch.bool),
            C=torch.tensor([100.0], dtype=torch.float64), max_iter=2, tol=1e-8,
        )
    assert not bool(fit.converged[0, 0]) and int(fit.n_iter[0, 0]) == 2
    with pytest.warns(ConvergenceWarning, match="max_iter=2"):
        LogisticProbe(C=100.0, max_iter=2, tol=1e-8).fit(X[0], y)


@pytest.mark.parametrize("k", [2, 4])
@pytest.mark.parametrize("C", [1e-3, 1.0, 1e3])
def test_single_problem_route_matches_sklearn_at_equal_tol(k, C):
    X, y = _heavy_tailed_acts(1, 400, 24, k, seed=3)
    probe = LogisticProbe(C=C, tol=1e-7, max_iter=5000).fit(X[0], y)
    ref = LogisticRegression(C=C, tol=1e-10, max_iter=20000).fit(
        (X[0] - probe.mean_) / probe.scale_, y
    )
    W = probe.coef_ * probe.scale_
    if k > 2:
        W = W - W.mean(0)
    assert np.abs(W - ref.coef_).max() <= 1e-4 * np.abs(ref.coef_).max()
    assert (probe.predict(X[0]) == ref.predict((X[0] - probe.mean_) / probe.scale_)).mean() == 1.0


def test_convergence_is_reported_per_row_and_per_estimator():
    X, y = _heavy_tailed_acts(2, 200, 8, 2, seed=4)
    res = sweep_layers(torch.from_numpy(X), y, train_idx=np.arange(150), test_idx=np.arange(150, 200))
    assert res.converged.tolist() == [True, True]
    assert LogisticProbe(C=1.0).fit(X[0], y).converged_ is True
    assert LogisticProbe(Cs=3, cv=3).fit(X[0], y).converged_ is True
