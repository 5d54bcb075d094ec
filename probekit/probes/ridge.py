"""Ridge-regression probe for continuous targets, closed form, batched over layers.

Objective (sklearn ``Ridge(alpha, fit_intercept=True)`` parametrisation)::

    min_{w, b} ||y - X w - b||^2 + alpha ||w||^2

Solution: centre ``X`` and ``y`` on the training rows, ``w = (X_c^T X_c + alpha I)^{-1} X_c^T y_c``,
``b = mean(y) - mean(X) w`` (Hoerl & Kennard 1970). Features are standardised inside the
estimator; the reported ``coef_``/``intercept_`` act on raw activations.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from jaxtyping import Bool, Float
from sklearn.base import BaseEstimator, RegressorMixin
from sklearn.model_selection import KFold
from sklearn.utils.validation import check_is_fitted
from torch import Tensor

from ..shapes import shape_checked
from ..util.numeric import standardization, standardize
from ._validation import validate_finite

__all__ = ["RidgeProbe", "alpha_grid", "fit_ridge_batched"]


def alpha_grid(alphas: int | Sequence[float] | np.ndarray) -> np.ndarray:
    """Ridge grid: an int ``k`` means ``np.logspace(-3, 5, k)``."""
    if isinstance(alphas, (int, np.integer)):
        if alphas < 1:
            raise ValueError(f"alphas must be a positive int or a sequence, got {alphas}")
        return np.logspace(-3, 5, int(alphas))
    grid = np.asarray(alphas, dtype=np.float64).reshape(-1)
    if grid.size == 0 or not np.all(grid > 0):
        raise ValueError(f"alphas must be positive, got {grid.tolist()}")
    return grid


@shape_checked
def fit_ridge_batched(
    X: Float[Tensor, "layer n d"],
    y: Float[Tensor, "n t"],
    *,
    alphas: Float[Tensor, " alpha"],
    train_mask: Bool[Tensor, "fold n"],
) -> tuple[Float[Tensor, "layer fold alpha d t"], Float[Tensor, "layer fold alpha t"]]:
    """Closed-form ridge for every ``(layer, fold, alpha)`` in float64.

    Returns ``(coef, intercept)`` so that predictions are ``X @ coef + intercept``.
    """
    L, n, d = X.shape
    X = X.to(torch.float64)
    y = y.to(X.device, torch.float64)
    alphas = alphas.to(X.device, torch.float64)
    eye = torch.eye(d, dtype=torch.float64, device=X.device)
    coefs, ints = [], []
    for mask in train_mask.to(X.device):
        Xf, yf = X[:, mask], y[mask]
        mx, my = Xf.mean(1, keepdim=True), yf.mean(0, keepdim=True)
        Xc, yc = Xf - mx, yf - my
        G = Xc.transpose(1, 2) @ Xc  # (L, d, d)
        b = Xc.transpose(1, 2) @ yc  # (L, d, t)
        A = G.unsqueeze(1) + alphas.view(1, -1, 1, 1) * eye  # (L, A, d, d)
        w = torch.linalg.solve(A, b.unsqueeze(1).expand(-1, len(alphas), -1, -1))
        coefs.append(w)
        ints.append(my.view(1, 1, -1) - (mx.unsqueeze(1) @ w).squeeze(2))
    return torch.stack(coefs, 1), torch.stack(ints, 1)


class RidgeProbe(RegressorMixin, BaseEstimator):
    """Standardised ridge-regression probe; ``score`` is R^2.

    Args:
        alpha: penalty (sklearn ``Ridge`` parametrisation, on standardised features).
        alphas: optional grid; if given, ``alpha`` is ignored and chosen by k-fold CV R^2 on
            the training data (mean over folds; first maximum on ties).
        cv: folds for the grid search.
        random_state: ``None`` keeps fold order; an int shuffles folds with that seed.

    Attributes:
        coef_ (``(d,)`` or ``(t, d)``), intercept_, alpha_, cv_scores_, mean_, scale_.
    """

    def __init__(  # types in the class docstring; sklearn checks pass bad values
        self,
        *,
        alpha=1.0,
        alphas=None,
        cv=5,
        random_state=None,
    ):
        self.alpha = alpha
        self.alphas = alphas
        self.cv = cv
        self.random_state = random_state

    def __sklearn_tags__(self):  # noqa: D105
        tags = super().__sklearn_tags__()
        tags.input_tags.sparse = False
        tags.target_tags.multi_output = True
        return tags

    def fit(self, X, y) -> RidgeProbe:
        """Standardise ``X``, pick ``alpha`` (if a grid is given) and solve in closed form."""
        X, y = validate_finite(self, X, y, dtype=np.float64, multi_output=True, y_numeric=True)
        y = np.asarray(y, dtype=np.float64)
        one_d = y.ndim == 1
        Y = y.reshape(len(y), -1)
        n = X.shape[0]
        self.mean_, self.scale_ = standardization(X)
        Xs = torch.tensor(standardize(X, self.mean_, self.scale_)).unsqueeze(0)
        Yt = torch.tensor(Y)
        if self.alphas is None:
            if not float(self.alpha) >= 0:
                raise ValueError(f"alpha must be >= 0, got {self.alpha}")
            grid = np.array([float(self.alpha)])
            best = 0
            self.cv_scores_ = None
        else:
            grid = alpha_grid(self.alphas)
            folds = list(
                KFold(
                    self.cv, shuffle=self.random_state is not None, random_state=self.random_state
                ).split(X)
            )
            masks = torch.ones(len(folds), n, dtype=torch.bool)
            for i, (_, te) in enumerate(folds):
                masks[i, te] = False
            coef, icpt = fit_ridge_batched(Xs, Yt, alphas=torch.as_tensor(grid), train_mask=masks)
            pred = torch.einsum("nd,fadt->fant", Xs[0], coef[0]) + icpt[0].unsqueeze(2)
            scores = np.zeros((len(folds), len(grid)))
            for i, (_, te) in enumerate(folds):
                r = Yt[te]
                ss_res = ((pred[i][:, te] - r) ** 2).sum((1, 2))
                ss_tot = ((r - r.mean(0)) ** 2).sum()
                scores[i] = (1 - ss_res / ss_tot).numpy()
            self.cv_scores_ = scores.mean(0)
            best = int(np.argmax(self.cv_scores_))
        self.alpha_ = float(grid[best])
        coef, icpt = fit_ridge_batched(
            Xs,
            Yt,
            alphas=torch.tensor([self.alpha_], dtype=torch.float64),
            train_mask=torch.ones(1, n, dtype=torch.bool),
        )
        w = coef[0, 0, 0].numpy().T / self.scale_  # (t, d)
        b = icpt[0, 0, 0].numpy() - w @ self.mean_
        self.coef_ = w[0] if one_d else w
        self.intercept_ = float(b[0]) if one_d else b
        return self

    def predict(self, X) -> np.ndarray:
        """Linear prediction ``X @ coef_.T + intercept_``."""
        check_is_fitted(self)
        X = validate_finite(self, X, reset=False, dtype=np.float64)
        return X @ self.coef_.T + self.intercept_
