"""Difference-of-means probe (mass-mean probe) scored by AUROC.

Direction ``w = mu_1 - mu_0`` (class means of the raw activations), centre
``mu = (mu_0 + mu_1) / 2`` and score ``s(h) = (h - mu) . w / ||w||`` -- the in-advance
correctness probe of "No Answer Needed" (arXiv 2509.10625), with class 1 = correct; also
Marks & Tegmark 2023's mass-mean probe without the covariance correction. No standardisation,
no sigmoid: the metric is AUROC; accuracy uses a threshold chosen on the training data.
"""

from __future__ import annotations

import numpy as np
from jaxtyping import Float, Shaped
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.utils.validation import check_is_fitted

from ..errors import DataError
from ..shapes import shape_checked
from ..util.numeric import diff_of_means
from ._validation import check_class_targets, validate_finite
from .metrics import auroc

__all__ = ["DiffMeansProbe", "best_threshold", "diffmeans_direction"]


@shape_checked
def diffmeans_direction(
    X: Float[np.ndarray, "*layer n d"], y: Shaped[np.ndarray, " n"]
) -> tuple[Float[np.ndarray, "*layer d"], Float[np.ndarray, "*layer d"]]:
    """Return ``(w, mu)``: ``w = mean(X[y==1]) - mean(X[y==0])``, ``mu`` the midpoint of the means.

    Batched over leading axes (e.g. layers). ``y`` is boolean / 0-1.
    """
    pos = np.asarray(y).astype(bool)
    if pos.all() or not pos.any():
        raise DataError(
            f"diff-of-means needs both classes; got {int(pos.sum())} positives and "
            f"{int((~pos).sum())} negatives"
        )
    return diff_of_means(X, pos)


def best_threshold(scores: Float[np.ndarray, " n"], y: Shaped[np.ndarray, " n"]) -> float:
    """Cut ``t`` maximising training accuracy of ``scores > t`` (midpoints between sorted scores)."""
    s = np.asarray(scores, dtype=np.float64)
    pos = np.asarray(y).astype(bool)
    order = np.argsort(s, kind="stable")
    s_sorted, p_sorted = s[order], pos[order]
    # Predict positive for indices >= k: correct = negatives below + positives at/above.
    neg_below = np.concatenate([[0], np.cumsum(~p_sorted)])
    pos_above = pos.sum() - np.concatenate([[0], np.cumsum(p_sorted)])
    correct = neg_below + pos_above
    # Only cut between distinct values.
    valid = np.ones(len(s) + 1, dtype=bool)
    valid[1:-1] = s_sorted[1:] != s_sorted[:-1]
    k = int(np.argmax(np.where(valid, correct, -1)))
    if k == 0:
        return float(s_sorted[0] - 1.0)
    if k == len(s):
        return float(s_sorted[-1])
    return float(0.5 * (s_sorted[k - 1] + s_sorted[k]))


class DiffMeansProbe(ClassifierMixin, BaseEstimator):
    """Binary difference-of-means probe on raw activations; ``score`` returns AUROC.

    ``decision_function(h) = (h - mu_) . coef_`` with ``coef_ = w / ||w||``,
    ``w = mu_{classes_[1]} - mu_{classes_[0]}``. ``predict`` thresholds the score at
    ``threshold_``: 0 (the midpoint of the class means) for ``threshold="midpoint"``, or the
    cut maximising training accuracy for ``threshold="train"``.

    Args:
        threshold: ``"midpoint"`` or ``"train"``.

    Attributes:
        classes_, coef_ ``(d,)`` unit direction, direction_ ``(d,)`` unnormalised ``w``,
        mean_ ``(d,)`` midpoint ``mu``, threshold_, n_features_in_.
    """

    def __init__(self, *, threshold="midpoint"):  # untyped: sklearn checks pass bad values
        self.threshold = threshold

    def __sklearn_tags__(self):  # noqa: D105
        tags = super().__sklearn_tags__()
        tags.classifier_tags.multi_class = False
        tags.input_tags.sparse = False
        return tags

    def fit(self, X, y) -> DiffMeansProbe:
        """Compute class means, the unit direction and the decision threshold."""
        X, y = validate_finite(self, X, y, dtype=np.float64)
        check_class_targets(y, estimator="DiffMeansProbe")
        self.classes_ = np.unique(y)
        if len(self.classes_) == 1:
            raise DataError(
                f"DiffMeansProbe needs 2 classes, but the data contains only one class: "
                f"{self.classes_[0]!r}; check the labels of the training split"
            )
        if len(self.classes_) != 2:
            raise DataError(
                "Only binary classification is supported. DiffMeansProbe expected 2 classes, "
                f"got {len(self.classes_)} ({self.classes_.tolist()[:10]}); use LogisticProbe "
                "for multi-class labels"
            )
        if self.threshold not in ("midpoint", "train"):
            raise ValueError(f"threshold must be 'midpoint' or 'train', got {self.threshold!r}")
        pos = y == self.classes_[1]
        w, mu = diffmeans_direction(X, pos)
        norm = np.linalg.norm(w)
        self.direction_ = w
        self.coef_ = w / norm if norm > 0 else w
        self.mean_ = mu
        if self.threshold == "train":
            self.threshold_ = best_threshold((X - mu) @ self.coef_, pos)
        else:
            self.threshold_ = 0.0
        return self

    def decision_function(self, X) -> np.ndarray:
        """Projection ``(h - mu) . w / ||w||`` (larger = more like ``classes_[1]``)."""
        check_is_fitted(self)
        X = validate_finite(self, X, reset=False, dtype=np.float64)
        return (X - self.mean_) @ self.coef_

    def predict(self, X) -> np.ndarray:
        """``classes_[1]`` where the score exceeds ``threshold_``."""
        above = self.decision_function(X) > self.threshold_
        return self.classes_[above.astype(int)]

    def score(self, X, y, sample_weight=None) -> float:
        """AUROC of the projection for ``y == classes_[1]`` (equals ``roc_auc_score``)."""
        if sample_weight is not None:
            raise ValueError("DiffMeansProbe.score does not support sample_weight; pass None")
        scores = self.decision_function(X)
        return float(auroc(scores, np.asarray(y) == self.classes_[1]))
