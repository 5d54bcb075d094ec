"""``ridge``: closed-form ridge regression on standardised activations; R^2.

alpha by k-fold CV R^2 (folds in data order); every ``row x fold x alpha`` problem is one
batched solve (:func:`~probekit.probes.ridge.fit_ridge_batched`, float64).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from ...errors import DataError
from ..kind import GroupFit, ProbeKind, register_probe_kind

if TYPE_CHECKING:
    from torch import Tensor

    from ..sweep import SweepConfig


@register_probe_kind
class Ridge(ProbeKind):
    """Ridge regression probe of a numeric target (R^2; chance 0 = the training mean)."""

    name = "ridge"
    metric = "r2"
    chance_text = "R^2 of predicting the training mean"
    is_classifier = False
    supports_control = False  # a control task re-draws classes; a regression has none

    def prepare_labels(self, labels: np.ndarray, train_idx: np.ndarray) -> np.ndarray:
        """The targets as float64 (a :class:`DataError` for non-numeric labels)."""
        try:
            return np.asarray(labels, dtype=np.float64)
        except (TypeError, ValueError):
            raise DataError(
                f"probe='ridge' regresses numeric targets, got labels like {labels[0]!r}; use "
                "probe='logistic' for classes or pass numbers"
            ) from None

    def grid(self, config: SweepConfig) -> np.ndarray | None:
        """The alpha grid (``config.alphas``: a size of a log-spaced grid, or the values)."""
        from ..ridge import alpha_grid

        return alpha_grid(config.alphas)

    def fit_batched(
        self,
        X: Tensor,
        labels: np.ndarray,
        train_idx: np.ndarray,
        splits: Mapping[str, np.ndarray],
        config: SweepConfig,
    ) -> GroupFit:
        """Standardise, choose alpha by k-fold CV R^2, refit on all training rows, predict."""
        import torch
        from sklearn.model_selection import KFold

        from ...util.numeric import standardization, standardize
        from ..metrics import r2_score
        from ..ridge import fit_ridge_batched

        G = X.shape[0]
        dev = X.device
        tr = train_idx
        Xtr = X[:, torch.as_tensor(tr, device=dev)]
        ytr = labels[tr]
        mean, std = standardization(Xtr)

        def z(ix: np.ndarray) -> Tensor:
            return standardize(X[:, torch.as_tensor(ix, device=dev)], mean, std).to(config.dtype)

        Ztr = z(tr)
        y = torch.as_tensor(np.asarray(ytr, dtype=np.float64)).view(-1, 1)
        grid = self.grid(config)
        folds = list(KFold(config.cv).split(np.zeros(len(tr))))
        masks = torch.ones(len(folds), len(tr), dtype=torch.bool)
        for i, (_, f_te) in enumerate(folds):
            masks[i, f_te] = False
        coef, icpt = fit_ridge_batched(Ztr, y, alphas=torch.as_tensor(grid), train_mask=masks)
        Z64 = Ztr.to(torch.float64)
        scores = torch.zeros(G, len(grid), dtype=torch.float64)
        for i, (_, f_te) in enumerate(folds):
            pred = torch.einsum("gnd,gad->gan", Z64[:, f_te], coef[:, i, :, :, 0])
            pred = pred + icpt[:, i, :, :1]
            scores += torch.as_tensor(r2_score(pred.cpu().numpy(), ytr[f_te])) / len(folds)
        best = scores.argmax(1)
        a_best = torch.as_tensor(grid)[best]
        coef, icpt = fit_ridge_batched(
            Ztr, y, alphas=a_best, train_mask=torch.ones(1, len(tr), dtype=torch.bool)
        )
        ar = torch.arange(G)
        w = coef[ar, 0, ar, :, 0]  # (G, d) -- each row's own alpha
        b = icpt[ar, 0, ar, 0]

        def predict(Zk: Tensor) -> np.ndarray:
            return (torch.einsum("gnd,gd->gn", Zk.to(torch.float64), w) + b[:, None]).cpu().numpy()

        return GroupFit(
            train=r2_score(predict(Ztr), ytr),
            val=scores.max(1).values.numpy(),
            hyperparameter=a_best.numpy(),
            predictions={k: predict(z(idx)) for k, idx in splits.items()},
        )

    def score(self, predictions: np.ndarray, y: np.ndarray) -> np.ndarray:
        """R^2 over the last axis."""
        from ..metrics import r2_score

        return r2_score(predictions, y)

    def chance(self, y_test: np.ndarray) -> float:
        """0: the R^2 of predicting the training mean."""
        return 0.0
