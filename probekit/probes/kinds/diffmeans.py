"""``diffmeans``: difference of class means on raw activations (binary labels); AUROC.

Direction ``w = mu_1 - mu_0`` and midpoint ``mu``; score ``(h - mu) . w``. No hyperparameter;
validation is the stratified k-fold AUROC.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from ...errors import DataError
from ...progress import track
from ..kind import GroupFit, ProbeKind, need_binary, register_probe_kind

if TYPE_CHECKING:
    import torch
    from torch import Tensor

    from ..sweep import SweepConfig


@register_probe_kind
class DiffMeans(ProbeKind):
    """Difference-of-means probe (AUROC of the second class vs the first; chance 0.5)."""

    name = "diffmeans"
    metric = "auroc"
    chance_text = "AUROC of a random score"
    supports_permutation = True

    def prepare_labels(self, labels: np.ndarray, train_idx: np.ndarray) -> np.ndarray:
        """``1`` for the second of the two training classes, else ``0`` (AUROC of it)."""
        classes = need_binary(self.name, labels[train_idx])
        return (labels == classes[1]).astype(np.int64)

    def fit_batched(
        self,
        X: Tensor,
        labels: np.ndarray,
        train_idx: np.ndarray,
        splits: Mapping[str, np.ndarray],
        config: SweepConfig,
    ) -> GroupFit:
        """CV AUROC of fold directions, then the all-training direction scored on each split."""
        import torch
        from sklearn.model_selection import StratifiedKFold

        from ..diffmeans import diffmeans_direction
        from ..metrics import auroc

        G = X.shape[0]
        dev = X.device
        tr = train_idx
        ytr = labels[tr]
        classes = need_binary(self.name, ytr)
        pos = ytr == classes[1]
        Xn = X[:, torch.as_tensor(tr, device=dev)].to(torch.float64).cpu().numpy()
        folds = list(StratifiedKFold(config.cv).split(np.zeros(len(tr)), pos))
        val = np.zeros(G)
        for f_tr, f_te in folds:
            w, mu = diffmeans_direction(Xn[:, f_tr], pos[f_tr])
            s = np.einsum("gnd,gd->gn", Xn[:, f_te] - mu[:, None], w)
            val += auroc(s, pos[f_te]) / len(folds)
        w, mu = diffmeans_direction(Xn, pos)
        w = w / np.linalg.norm(w, axis=-1, keepdims=True)
        train = auroc(np.einsum("gnd,gd->gn", Xn - mu[:, None], w), pos)
        preds = {}
        for k, idx in splits.items():
            Xk = X[:, torch.as_tensor(idx, device=dev)].to(torch.float64).cpu().numpy()
            preds[k] = np.einsum("gnd,gd->gn", Xk - mu[:, None], w)
        return GroupFit(train=train, val=val, hyperparameter=np.full(G, np.nan), predictions=preds)

    def score(self, predictions: np.ndarray, y: np.ndarray) -> np.ndarray:
        """AUROC over the last axis."""
        from ..metrics import auroc

        return auroc(predictions, y)

    def chance(self, y_test: np.ndarray) -> float:
        """0.5: the AUROC of a random score."""
        return 0.5

    def permutation_scores(
        self,
        X: np.ndarray,
        labels: np.ndarray,
        perms: np.ndarray,
        train_idx: np.ndarray,
        test_idx: np.ndarray,
        *,
        hyperparameter: float | None,
        Cs: int,
        cv: int,
        batch_size: int,
        dtype: torch.dtype,
        device: str | torch.device | None,
    ) -> tuple[np.ndarray, str]:
        """Test AUROC of the diff-of-means direction refit on each labelling."""
        from ...util.numeric import diff_of_means
        from ..metrics import auroc

        n_classes = len(np.unique(labels))
        if n_classes != 2:
            raise DataError(f"probe='diffmeans' needs 2 classes, got {n_classes}; use "
                            "probe='logistic'")
        tr, te = train_idx, test_idx
        scores = np.empty(len(perms))
        for s in track(range(0, len(perms), batch_size), desc="permutation test", unit="refit",
                       total=len(perms), weight=lambda s: min(batch_size, len(perms) - s)):
            yy = perms[s : s + batch_size]  # (B, n)
            w, mu = diff_of_means(X[tr], yy[:, tr] == 1)  # (B, d) each
            sc = np.einsum("nd,bd->bn", X[te], w) - (mu * w).sum(1, keepdims=True)
            scores[s : s + len(yy)] = auroc(sc, yy[:, te])
        return scores, "permutation test (diff-of-means AUROC)"
