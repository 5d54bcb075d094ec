"""Multinomial L2 logistic-regression probe: a scikit-learn estimator on the batched solver.

The estimator standardises the features, selects ``C`` by stratified k-fold CV (all folds x Cs
solved as one batch by :func:`~probekit.probes.batched_logistic.cv_logistic_batched`) and refits.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import torch
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.exceptions import ConvergenceWarning
from sklearn.model_selection import StratifiedKFold
from sklearn.utils.validation import check_is_fitted

from ..errors import ConfigError, DataError
from ..util.numeric import standardization, standardize
from ._validation import check_class_targets, validate_finite
from .batched_logistic import BatchedLogisticFit as BatchedLogisticFit
from .batched_logistic import LogisticCVResult as LogisticCVResult
from .batched_logistic import c_grid as c_grid
from .batched_logistic import cv_logistic_batched as cv_logistic_batched
from .batched_logistic import fit_logistic_batched as fit_logistic_batched
from .scipy_logistic import fit_logistic_scipy

__all__ = [
    "BatchedLogisticFit",
    "LogisticCVResult",
    "LogisticProbe",
    "c_grid",
    "cv_logistic_batched",
    "fit_logistic_batched",
]

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


class LogisticProbe(ClassifierMixin, BaseEstimator):
    """Multinomial L2 logistic-regression probe with C chosen by stratified k-fold CV.

    Features are standardised inside the estimator (mean/std of the training data, as
    ``StandardScaler``); the fitted ``coef_``/``intercept_`` are mapped back to the raw
    activation space, so ``decision_function(X) = X @ coef_.T + intercept_``.

    For each candidate ``C`` the objective is ``sum_i CE_i + ||W||^2 / (2C)`` on the
    standardised features (sklearn's ``LogisticRegression(C=C)``). With ``C=None`` the value is
    chosen from ``Cs`` by mean held-out accuracy over ``cv`` stratified folds of the training
    data (first maximum on ties, as ``LogisticRegressionCV``), then refit on all of it. All
    folds x Cs are solved in one batched L-BFGS pass (see ``fit_logistic_batched``). A fixed
    ``C`` on the CPU is a single problem and goes to scipy's L-BFGS-B on numpy float64
    (``fit_logistic_scipy``), which is faster there than the batched torch solver.

    Args:
        C: fixed inverse regularisation; ``None`` selects it by CV over ``Cs``.
        Cs: grid size (``logspace(-4, 4, Cs)``) or explicit grid.
        cv: number of stratified folds.
        max_iter: L-BFGS iteration cap.
        tol: converged when ``max |grad| <= tol`` on the mean-loss objective (sklearn's
            ``tol`` for ``lbfgs``); a ``ConvergenceWarning`` says when it was not reached.
        dtype: ``"float64"`` (default) or ``"float32"`` for the batched GEMMs.
        device: torch device for the solve (``None``: CPU).
        random_state: ``None`` keeps folds in data order (sklearn default); an int shuffles
            the stratified folds with that seed.

    Attributes:
        classes_, coef_ (``(1, d)`` binary or ``(K, d)``), intercept_, C_, Cs_, cv_scores_
        (mean CV accuracy per C, or ``None`` with fixed C), mean_, scale_, n_iter_,
        converged_ (the final fit reached ``tol``), n_features_in_.
    """

    def __init__(  # types in the class docstring; sklearn checks pass bad values
        self,
        *,
        C=None,
        Cs=10,
        cv=5,
        max_iter=200,
        tol=1e-5,
        dtype="float64",
        device=None,
        random_state=None,
    ):
        self.C = C
        self.Cs = Cs
        self.cv = cv
        self.max_iter = max_iter
        self.tol = tol
        self.dtype = dtype
        self.device = device
        self.random_state = random_state

    def __sklearn_tags__(self):  # noqa: D105
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        return tags

    def _cdtype(self) -> torch.dtype:
        if self.dtype not in _DTYPES:
            raise ValueError(f"dtype must be 'float32' or 'float64', got {self.dtype!r}")
        return _DTYPES[self.dtype]

    def fit(self, X, y) -> LogisticProbe:
        """Standardise, select C by CV (if ``C is None``), and fit on all of ``X``."""
        X, y = validate_finite(self, X, y, dtype=np.float64)
        check_class_targets(y, estimator="LogisticProbe")
        self.classes_, codes = np.unique(y, return_inverse=True)
        K = len(self.classes_)
        if K < 2:
            raise DataError(
                f"LogisticProbe needs samples of at least 2 classes, but the data contains only "
                f"one class: {self.classes_[0].item()!r}; check the labels of the training split "
                "(every training row has this label)"
            )
        cdt = self._cdtype()
        dev = torch.device(self.device) if self.device is not None else torch.device("cpu")
        n = X.shape[0]
        self.mean_, self.scale_ = standardization(X)
        Xn = standardize(X, self.mean_, self.scale_)
        if self.C is not None:
            if isinstance(self.C, bool) or not isinstance(self.C, (int, float, np.number)) \
                    or not (math.isfinite(float(self.C)) and float(self.C) > 0):
                raise ConfigError(
                    f"LogisticProbe(C={self.C!r}): C (the inverse regularisation) must be a finite "
                    "number > 0 (C=0 would be infinite regularisation); pass e.g. C=1.0, or "
                    "C=None to choose it by cross-validation"
                )
            self.Cs_ = np.array([float(self.C)])
            self.C_ = float(self.C)
            self.cv_scores_ = None
            if dev.type == "cpu":
                # One problem: scipy's L-BFGS-B on numpy float64 beats torch's per-op overhead.
                single = fit_logistic_scipy(
                    Xn, codes, K, C=self.C_, tol=self.tol,
                    max_iter=self.max_iter,
                )  # fmt: skip
                if not single.converged:
                    hit = single.n_iter >= self.max_iter
                    why = (
                        f"in max_iter={self.max_iter} iterations; increase max_iter"
                        if hit
                        else "before float64 rounding stopped progress; use a larger tol"
                    )
                    warnings.warn(
                        f"LogisticProbe(C={self.C_:g}) did not reach max|grad| <= tol={self.tol:g} "
                        f"{why} (at {single.grad_max:.3g})",
                        ConvergenceWarning,
                        stacklevel=2,
                    )
                self._set_coef(single.coef.T, single.intercept)
                self.n_iter_ = single.n_iter
                self.converged_ = single.converged
                return self
            Xs = torch.as_tensor(Xn, dtype=cdt, device=dev).unsqueeze(0)
            fit = fit_logistic_batched(
                Xs,
                torch.as_tensor(codes, device=dev),
                K,
                train_mask=torch.ones(1, n, dtype=torch.bool, device=dev),
                C=torch.tensor([self.C_], dtype=torch.float64),
                max_iter=self.max_iter,
                tol=self.tol,
            )
        else:
            splitter = StratifiedKFold(
                n_splits=self.cv,
                shuffle=self.random_state is not None,
                random_state=self.random_state,
            )
            folds = list(splitter.split(np.zeros(n), codes))
            Xs = torch.as_tensor(Xn, dtype=cdt, device=dev).unsqueeze(0)
            res = cv_logistic_batched(
                Xs, torch.as_tensor(codes, device=dev), K, Cs=self.Cs, folds=folds, max_iter=self.max_iter, tol=self.tol
            )
            fit = res.fit
            self.Cs_ = res.Cs
            self.C_ = float(res.best_C[0])
            self.cv_scores_ = res.cv_scores[0].cpu().numpy()
        self._set_coef(fit.coef[0, :, 0, :].T.cpu().numpy(), fit.intercept[0, 0, :].cpu().numpy())
        self.n_iter_ = int(fit.n_iter[0, 0])
        self.converged_ = bool(fit.converged[0, 0])
        return self

    def _set_coef(self, w: np.ndarray, b: np.ndarray) -> None:
        """Map standardised-space weights ``(k, d)``/``(k,)`` back to the raw features."""
        self.coef_ = w / self.scale_
        self.intercept_ = b - self.coef_ @ self.mean_

    def decision_function(self, X) -> np.ndarray:
        """Logits ``X @ coef_.T + intercept_`` (1-D for binary problems)."""
        check_is_fitted(self)
        X = validate_finite(self, X, reset=False, dtype=np.float64)
        z = X @ self.coef_.T + self.intercept_
        return z.ravel() if z.shape[1] == 1 else z

    def predict_proba(self, X) -> np.ndarray:
        """Class probabilities (softmax, or sigmoid for binary)."""
        z = self.decision_function(X)
        if z.ndim == 1:
            p1 = 1.0 / (1.0 + np.exp(-z))
            return np.stack([1 - p1, p1], axis=1)
        z = z - z.max(1, keepdims=True)
        e = np.exp(z)
        return e / e.sum(1, keepdims=True)

    def predict(self, X) -> np.ndarray:
        """Most probable class."""
        z = self.decision_function(X)
        idx = (z > 0).astype(int) if z.ndim == 1 else z.argmax(1)
        return self.classes_[idx]
