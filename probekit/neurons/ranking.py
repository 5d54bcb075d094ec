"""Exact ranking statistics of many units at once: average precision and one-vs-rest AUROC.

Both are computed from one sort per unit column (shared by every class) and agree with scikit-learn's
``average_precision_score`` and ``roc_auc_score`` (ties included) to float64 precision.
"""

from __future__ import annotations

import torch
from jaxtyping import Bool, Float, Int
from torch import Tensor

from ..errors import DataError
from ..shapes import shape_checked


def _check(scores: Tensor, labels: Tensor) -> None:
    if scores.ndim != 2:
        raise DataError(
            f"expected scores of shape (n_prompts, n_units), got {tuple(scores.shape)}; "
            "add a unit axis with scores[:, None]"
        )
    if labels.shape != (scores.shape[0],):
        raise DataError(
            f"{labels.numel()} labels for {scores.shape[0]} prompts; pass one label per prompt"
        )
    n_pos = int(labels.sum())
    if n_pos == 0 or n_pos == labels.numel():
        raise DataError(
            f"labels have {n_pos} positives of {labels.numel()}; a ranking statistic needs both "
            "positive and negative prompts"
        )


def one_vs_rest(
    scores: Float[Tensor, "prompt unit"], codes: Int[Tensor, " prompt"], n_classes: int
) -> tuple[Float[Tensor, "unit cls"], Float[Tensor, "unit cls"]]:
    """AP and AUROC of every unit for every class ``c`` (positives ``codes == c``), one sort per unit.

    The sort (and the tie groups) of a unit's column do not depend on the labels, so they are
    computed once and each class costs a gather, a cumulative sum and a few sums.

    - AP ``= sum_k (R_k - R_{k-1}) P_k`` over the distinct thresholds in decreasing order, as
      ``sklearn.metrics.average_precision_score`` (tied scores share one threshold): the mean
      over positives j of ``#pos(score >= s_j) / #(score >= s_j)``.
    - AUROC: Mann-Whitney U / (n_pos n_neg) with mid-ranks for ties (``roc_auc_score``).
    """
    for c in range(n_classes):
        _check(scores, codes == c)
    n = scores.shape[0]
    cols = scores.T.contiguous()  # (unit, n)
    order = torch.argsort(cols, dim=1, descending=True, stable=True)
    asc = torch.gather(cols, 1, order).flip(1)
    below = torch.searchsorted(asc, cols, right=False)  # #scores < s_j
    below_or_equal = torch.searchsorted(asc, cols, right=True)  # #scores <= s_j
    at_or_above = n - below  # #scores >= s_j
    last_of_tie = at_or_above - 1  # the last index of j's tie group in descending order
    mid_rank = (below + below_or_equal + 1).to(scores.dtype) / 2  # 1-based average ranks
    ap = torch.empty(cols.shape[0], n_classes, dtype=scores.dtype)
    auroc = torch.empty_like(ap)
    for c in range(n_classes):
        y = (codes == c).to(scores.dtype)
        n_pos = y.sum()
        tp_at = torch.gather(torch.cumsum(y[order], dim=1), 1, last_of_tie)
        ap[:, c] = (tp_at / at_or_above.to(scores.dtype) * y).sum(dim=1) / n_pos
        auroc[:, c] = ((mid_rank * y).sum(dim=1) - n_pos * (n_pos + 1) / 2) / (
            n_pos * (n - n_pos)
        )
    return ap, auroc


@shape_checked
def average_precision(
    scores: Float[Tensor, "prompt unit"], labels: Bool[Tensor, " prompt"]
) -> Float[Tensor, " unit"]:
    """Average precision of each unit's scores for a binary label (Liu et al. 2025's "expertise").

    Equals ``sklearn.metrics.average_precision_score`` per unit (ties included); chance level is
    the positive rate. See :func:`one_vs_rest`.
    """
    _check(scores, labels)
    return one_vs_rest(scores, (~labels).long(), 1)[0][:, 0]


@shape_checked
def roc_auc(
    scores: Float[Tensor, "prompt unit"], labels: Bool[Tensor, " prompt"]
) -> Float[Tensor, " unit"]:
    """One-vs-rest AUROC of each unit (Mann-Whitney U / (n_pos n_neg), ties count one half).

    Equals ``sklearn.metrics.roc_auc_score(labels, scores[:, i])`` per unit.
    """
    _check(scores, labels)
    return one_vs_rest(scores, (~labels).long(), 1)[1][:, 0]
