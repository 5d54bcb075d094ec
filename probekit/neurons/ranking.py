"""Exact ranking statistics of many units at once: average precision and one-vs-rest AUROC.

Both are computed from one sort per unit column and agree with scikit-learn's
``average_precision_score`` and ``roc_auc_score`` (ties included) to float64 precision.
"""

from __future__ import annotations

import torch
from jaxtyping import Bool, Float
from torch import Tensor

from ..errors import DataError


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


def _tie_bounds(scores: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """Per unit: scores sorted ascending, and for every prompt #scores < it and #scores <= it."""
    cols = scores.T.contiguous()  # (unit, n)
    asc, _ = torch.sort(cols, dim=1)
    below = torch.searchsorted(asc, cols, right=False)
    below_or_equal = torch.searchsorted(asc, cols, right=True)
    return asc, below, below_or_equal


def average_precision(
    scores: Float[Tensor, "prompt unit"], labels: Bool[Tensor, " prompt"]
) -> Float[Tensor, " unit"]:
    """Average precision of each unit's scores for a binary label (Liu et al. 2025's "expertise").

    ``AP = sum_k (R_k - R_{k-1}) P_k`` over the distinct score thresholds in decreasing order,
    exactly as ``sklearn.metrics.average_precision_score`` (tied scores share one threshold). For
    prompt j with score s_j, the precision at its threshold is ``#pos(score >= s_j) / #(score >=
    s_j)``, so ``AP = mean over positives j of that precision``. Chance level is the positive rate.
    """
    _check(scores, labels)
    y = labels.to(scores.dtype)
    n = scores.shape[0]
    _, below, _ = _tie_bounds(scores)
    at_or_above = n - below  # (unit, n): #prompts with score >= s_j
    # positives with score >= s_j: rank positives descending and count through the tie group
    cols = scores.T
    order = torch.argsort(cols, dim=1, descending=True, stable=True)
    y_sorted = y[order]
    tp_cum = torch.cumsum(y_sorted, dim=1)  # tp after the first i+1 prompts in descending order
    # the last index of j's tie group in descending order is at_or_above - 1
    tp_at = torch.gather(tp_cum, 1, at_or_above - 1)  # (unit, n) in original prompt order
    precision = tp_at / at_or_above.to(scores.dtype)
    return (precision * y).sum(dim=1) / y.sum()


def roc_auc(
    scores: Float[Tensor, "prompt unit"], labels: Bool[Tensor, " prompt"]
) -> Float[Tensor, " unit"]:
    """One-vs-rest AUROC of each unit (Mann-Whitney U / (n_pos n_neg), ties count one half).

    Equals ``sklearn.metrics.roc_auc_score(labels, scores[:, i])`` per unit.
    """
    _check(scores, labels)
    y = labels.to(scores.dtype)
    _, below, below_or_equal = _tie_bounds(scores)
    mid_rank = (below + below_or_equal + 1).to(scores.dtype) / 2  # 1-based average ranks
    n_pos = y.sum()
    n_neg = y.numel() - n_pos
    rank_sum = (mid_rank * y).sum(dim=1)
    return (rank_sum - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg)
