"""Batched probe metrics: accuracy, AUROC (Mann-Whitney), R^2 along the last axis."""

from __future__ import annotations

import numpy as np
from jaxtyping import Float, Shaped
from scipy.stats import rankdata

from ..shapes import shape_checked

__all__ = ["accuracy", "auroc", "r2_score", "within_group_auroc"]


@shape_checked
def auroc(
    scores: Float[np.ndarray, "*batch n"], labels: Shaped[np.ndarray, "*#batch n"]
) -> Float[np.ndarray, "*batch"]:
    """Area under the ROC curve of ``scores`` for ``labels == 1``, batched over leading axes.

    AUROC = (R_1 - n_1 (n_1 + 1) / 2) / (n_1 n_0), with R_1 the sum of (average, tie-aware)
    ranks of the positives (Mann & Whitney 1947; Hanley & McNeil 1982). Equals
    ``sklearn.metrics.roc_auc_score``. Returns NaN where a row has only one class.
    """
    scores = np.asarray(scores, dtype=np.float64)
    pos = np.broadcast_to(np.asarray(labels).astype(bool), scores.shape)
    ranks = rankdata(scores, axis=-1)
    n1 = pos.sum(-1)
    n0 = scores.shape[-1] - n1
    r1 = np.where(pos, ranks, 0.0).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray((r1 - n1 * (n1 + 1) / 2.0) / (n1 * n0))


@shape_checked
def accuracy(
    pred: Shaped[np.ndarray, "*batch n"], labels: Shaped[np.ndarray, "*#batch n"]
) -> Float[np.ndarray, "*batch"]:
    """Fraction of ``pred == labels`` along the last axis."""
    return np.asarray((np.asarray(pred) == np.asarray(labels)).mean(-1))


@shape_checked
def r2_score(
    pred: Float[np.ndarray, "*batch n"], target: Float[np.ndarray, "*#batch n"]
) -> Float[np.ndarray, "*batch"]:
    """Coefficient of determination ``1 - SS_res / SS_tot`` along the last axis (sklearn's)."""
    pred = np.asarray(pred, dtype=np.float64)
    target = np.broadcast_to(np.asarray(target, dtype=np.float64), pred.shape)
    ss_res = ((target - pred) ** 2).sum(-1)
    ss_tot = ((target - target.mean(-1, keepdims=True)) ** 2).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(1.0 - ss_res / ss_tot)


@shape_checked
def within_group_auroc(
    scores: Float[np.ndarray, "*batch n"],
    labels: Shaped[np.ndarray, "*#batch n"],
    groups: Shaped[np.ndarray, "*#batch n"],
) -> Float[np.ndarray, "*batch"]:
    """AUROC over positive/negative pairs *of the same group* only, batched over leading axes.

    ``sum_g U_g / sum_g n1_g n0_g`` with ``U_g`` the Mann-Whitney count of group ``g`` (the
    stratified AUROC): a score that only encodes group membership gets exactly 0.5, whatever the
    groups' base rates. Groups with one class contribute no pairs; NaN if no group has both.
    ``groups`` may differ per batch row (e.g. bootstrap resamples).
    """
    scores = np.asarray(scores, dtype=np.float64)
    lab = np.broadcast_to(np.asarray(labels).astype(bool), scores.shape).astype(np.float64)
    uniq, codes = np.unique(np.asarray(groups), return_inverse=True)
    codes = np.broadcast_to(codes.reshape(np.shape(groups)), scores.shape)
    n = scores.shape[-1]
    onehot = (codes[..., None] == np.arange(len(uniq))).astype(np.float64)  # (*batch, n, G)
    counts = onehot.sum(-2)
    n1 = np.einsum("...n,...ng->...g", lab, onehot)
    # Ranks within each group in one pass: sort key = (group, dense rank of the score), ties
    # averaged by rankdata, minus the number of rows in earlier groups.
    dense = rankdata(scores, method="dense", axis=-1)
    within = rankdata(codes * (n + 1.0) + dense, axis=-1)
    start = np.cumsum(counts, -1) - counts
    within -= np.take_along_axis(start, codes, -1)
    num = (within * lab).sum(-1) - (n1 * (n1 + 1) / 2).sum(-1)
    den = (n1 * (counts - n1)).sum(-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.asarray(num / den)
