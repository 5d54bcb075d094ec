"""``logistic``: multinomial L2 logistic regression on standardised activations; accuracy.

C by stratified k-fold CV; every ``row x fold x C`` problem of a sweep is one batched L-BFGS
(:func:`~probekit.probes.logistic.cv_logistic_batched`), on CUDA when the activations are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

import numpy as np

from ...progress import track
from ..kind import GroupFit, ProbeKind, register_probe_kind

if TYPE_CHECKING:
    import torch
    from torch import Tensor

    from ..sweep import SweepConfig


@register_probe_kind
class Logistic(ProbeKind):
    """Multinomial logistic probe (accuracy; chance = the majority-class rate)."""

    name = "logistic"
    metric = "accuracy"
    chance_text = "majority-class rate of the test split"
    supports_permutation = True

    def grid(self, config: SweepConfig) -> np.ndarray | None:
        """The C grid (``config.Cs``: a size of a log-spaced grid, or the values)."""
        from ..batched_logistic import c_grid

        return c_grid(config.Cs)

    def fit_batched(
        self,
        X: Tensor,
        labels: np.ndarray,
        train_idx: np.ndarray,
        splits: Mapping[str, np.ndarray],
        config: SweepConfig,
    ) -> GroupFit:
        """Standardise with training statistics, choose C by stratified CV, refit, predict."""
        import torch
        from sklearn.model_selection import StratifiedKFold

        from ...util.numeric import standardization, standardize
        from ..logistic import cv_logistic_batched

        dev = X.device
        Xtr = X[:, torch.as_tensor(train_idx, device=dev)]
        ytr = labels[train_idx]
        mean, std = standardization(Xtr)

        def z(ix: np.ndarray) -> Tensor:
            return standardize(X[:, torch.as_tensor(ix, device=dev)], mean, std).to(config.dtype)

        Ztr = z(train_idx)
        classes, codes = np.unique(ytr, return_inverse=True)
        if len(classes) < 2:
            raise ValueError(
                f"the training split has a single class ({classes[0]!r}); a logistic probe "
                "needs >= 2"
            )
        folds = list(StratifiedKFold(config.cv).split(np.zeros(len(train_idx)), codes))
        yt = torch.as_tensor(codes, device=dev)
        res = cv_logistic_batched(Ztr, yt, len(classes), Cs=config.Cs, folds=folds,
                                  max_iter=config.max_iter, tol=config.tol)

        def predict_labels(Zk: Tensor) -> np.ndarray:
            return classes[res.fit.predict_codes(Zk)[:, :, 0].cpu().numpy()]

        return GroupFit(
            train=(predict_labels(Ztr) == ytr).mean(-1),
            val=res.cv_scores.max(1).values.cpu().numpy(),
            hyperparameter=res.best_C.cpu().numpy(),
            predictions={k: predict_labels(z(idx)) for k, idx in splits.items()},
            converged=res.fit.converged[:, 0].cpu().numpy(),
        )

    def score(self, predictions: np.ndarray, y: np.ndarray) -> np.ndarray:
        """Accuracy over the last axis."""
        return (predictions == y).mean(-1)

    def chance(self, y_test: np.ndarray) -> float:
        """Majority-class rate of ``y_test``."""
        _, counts = np.unique(y_test, return_counts=True)
        return float(counts.max() / counts.sum())

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
        """Accuracy of refits with C fixed (given, or chosen once by CV on the real labels)."""
        import torch

        from ...util.device import resolve_device
        from ...util.numeric import standardization, standardize
        from ..logistic import LogisticProbe, fit_logistic_batched

        tr, te = train_idx, test_idx
        n_classes = len(np.unique(labels))
        C = hyperparameter
        if C is None:
            C = LogisticProbe(Cs=Cs, cv=cv).fit(X[tr], labels[tr]).C_
        m, sd = standardization(X[tr])
        dev = resolve_device(device) or torch.device("cpu")
        Xtr = torch.as_tensor(standardize(X[tr], m, sd), dtype=dtype, device=dev).unsqueeze(0)
        Xte = torch.as_tensor(standardize(X[te], m, sd), dtype=dtype, device=dev).unsqueeze(0)
        scores = np.empty(len(perms))
        for s in track(range(0, len(perms), batch_size), desc="permutation test", unit="refit",
                       total=len(perms), weight=lambda s: min(batch_size, len(perms) - s)):
            yy = torch.as_tensor(perms[s : s + batch_size], device=dev)
            B = yy.shape[0]
            fit = fit_logistic_batched(
                Xtr,
                yy[:, tr],
                n_classes,
                train_mask=torch.ones(B, len(tr), dtype=torch.bool, device=dev),
                C=torch.full((B,), float(C), dtype=torch.float64, device=dev),
                target_index=torch.arange(B, device=dev),
            )
            pred = fit.predict_codes(Xte)[0]  # (n_te, B)
            scores[s : s + B] = (pred == yy[:, te].T).double().mean(0).cpu().numpy()
        return scores, f"permutation test (logistic accuracy, C={C:.3g})"
