"""In-advance correctness probe ("No Answer Needed", arXiv 2509.10625).

Input: residual stream after each block at the last prompt token (before any generated token),
raw (no standardisation). Labels: 1 = the model's greedy answer was correct. Per layer::

    w = mu_correct - mu_incorrect,   mu = (mu_correct + mu_incorrect) / 2,
    score(h) = (h - mu) . w / ||w||

Metric AUROC. ID: stratified k-fold CV (3 folds by default). OOD: for fold j, the direction fit
on the ID data minus fold j is scored on ID fold j and on fold j of every named OOD set (the
paper uses 5 folds and one fold of each OOD dataset per run), so the fold SD is over disjoint
OOD subsets. Capture of the activations is not done here.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from jaxtyping import Float
from sklearn.model_selection import KFold, StratifiedKFold
from torch import Tensor

from ..util.numeric import diff_of_means
from ._validation import as_float_tensor, check_layer_acts, check_n_labels
from .metrics import auroc

__all__ = ["CorrectnessProbeResult", "correctness_probe"]


@dataclass(frozen=True, kw_only=True)
class CorrectnessProbeResult:
    """Per-layer AUROC of the diff-of-means correctness direction.

    Attributes:
        layers: layer label of each row.
        fold_auroc: ``(layer, fold)`` held-out ID AUROC.
        auroc_mean, auroc_std: over folds (std with ddof=1).
        ood_fold_auroc, ood_mean, ood_std: per OOD split, same shapes.
        best_layer: layer with the highest mean ID CV AUROC (first on ties).
        direction: ``(layer, d)`` unit direction fit on all ID examples.
        midpoint: ``(layer, d)`` ``mu`` fit on all ID examples.
        n_correct, n_incorrect: ID label counts.
    """

    layers: tuple[int, ...]
    fold_auroc: np.ndarray
    auroc_mean: np.ndarray
    auroc_std: np.ndarray
    ood_fold_auroc: Mapping[str, np.ndarray] = field(default_factory=dict)
    ood_mean: Mapping[str, np.ndarray] = field(default_factory=dict)
    ood_std: Mapping[str, np.ndarray] = field(default_factory=dict)
    best_layer: int
    direction: np.ndarray = field(repr=False)
    midpoint: np.ndarray = field(repr=False)
    n_correct: int
    n_incorrect: int

    def score(self, acts: Float[Tensor, "layer n d"]) -> np.ndarray:
        """Scores ``(h - mu) . w / ||w||`` of new activations with the all-ID direction."""
        a = check_layer_acts(as_float_tensor(acts)).to(torch.float64).cpu().numpy()
        return np.einsum("lnd,ld->ln", a - self.midpoint[:, None], self.direction)


def _fit(X: Tensor, pos: Tensor) -> tuple[Tensor, Tensor]:
    """Unit direction and midpoint per layer from rows of X (layer, n, d) with labels pos."""
    w, mu = diff_of_means(X, pos)
    return w / w.norm(dim=-1, keepdim=True).clamp_min(1e-30), mu


def _scores(X: Tensor, w: Tensor, mu: Tensor) -> np.ndarray:
    return torch.einsum("lnd,ld->ln", X - mu.unsqueeze(1), w).double().cpu().numpy()


def _labels(correct: object, n: int, what: str) -> np.ndarray:
    c = correct.detach().cpu().numpy() if isinstance(correct, Tensor) else np.asarray(correct)
    check_n_labels(n, c, what=what)
    u = np.unique(c)
    if not set(u.tolist()) <= {0, 1}:
        raise ValueError(f"{what} must be boolean / 0-1 (1 = correct), got values {u[:5]}")
    return c.astype(bool)


def correctness_probe(
    acts: Float[Tensor, "layer n d"],
    correct: Sequence[bool] | np.ndarray | Tensor,
    *,
    layers: Sequence[int] | None = None,
    n_folds: int = 3,
    ood: Mapping[str, tuple[Tensor, Sequence[bool] | np.ndarray]] | None = None,
    random_state: int | None = 0,
) -> CorrectnessProbeResult:
    """Per-layer diff-of-means correctness probe with k-fold ID AUROC and fold-wise OOD AUROC.

    Args:
        acts: ``(layer, n, d)`` last-prompt-token activations of the ID questions.
        correct: ``(n,)`` 1 if the greedy answer was correct ("I don't know" counts as 0).
        layers: layer numbers of the rows (default ``0..layer-1``; e.g. every 2nd layer).
        n_folds: ID CV folds (paper: 3 for the layer sweep, 5 for OOD runs).
        ood: named OOD sets ``name -> (acts (layer, m, d), correct (m,))``.
        random_state: seed of the (shuffled, stratified) fold split.

    Returns:
        CorrectnessProbeResult.
    """
    X = check_layer_acts(as_float_tensor(acts))
    L, n, _ = X.shape
    y = _labels(correct, n, "correctness labels")
    if y.all() or not y.any() or min(y.sum(), (~y).sum()) < n_folds:
        raise ValueError(
            f"need at least {n_folds} correct and {n_folds} incorrect examples for {n_folds}-fold "
            f"CV, got {int(y.sum())} correct and {int((~y).sum())} incorrect"
        )
    layer_ids = tuple(range(L)) if layers is None else tuple(int(v) for v in layers)
    if len(layer_ids) != L:
        raise ValueError(f"got {len(layer_ids)} layer labels for {L} activation layers")
    yt = torch.as_tensor(y, device=X.device)
    skf = StratifiedKFold(n_folds, shuffle=random_state is not None, random_state=random_state)
    folds = list(skf.split(np.zeros(n), y))

    ood_sets = {}
    for name, (a, c) in (ood or {}).items():
        Xo = check_layer_acts(as_float_tensor(a, name=f"ood[{name!r}]")).to(X.device)
        if Xo.shape[0] != L or Xo.shape[2] != X.shape[2]:
            raise ValueError(
                f"OOD set {name!r} has shape {tuple(Xo.shape)} but ID activations are "
                f"(layer={L}, n, d={X.shape[2]}); capture the same layers and site"
            )
        yo = _labels(c, Xo.shape[1], f"labels of OOD set {name!r}")
        if Xo.shape[1] < n_folds:
            raise ValueError(
                f"OOD set {name!r} has {Xo.shape[1]} examples, fewer than {n_folds} folds"
            )
        splitter = (
            StratifiedKFold(n_folds, shuffle=random_state is not None, random_state=random_state)
            if min(yo.sum(), (~yo).sum()) >= n_folds
            else KFold(n_folds, shuffle=random_state is not None, random_state=random_state)
        )
        ood_sets[name] = (Xo, yo, [te for _, te in splitter.split(np.zeros(len(yo)), yo)])

    fold_auc = np.zeros((L, n_folds))
    ood_auc = {k: np.zeros((L, n_folds)) for k in ood_sets}
    for j, (tr, te) in enumerate(folds):
        tr_t = torch.as_tensor(tr, device=X.device)
        w, mu = _fit(X[:, tr_t], yt[tr_t])
        fold_auc[:, j] = auroc(_scores(X[:, torch.as_tensor(te, device=X.device)], w, mu), y[te])
        for k, (Xo, yo, ofolds) in ood_sets.items():
            idx = ofolds[j]
            sc = _scores(Xo[:, torch.as_tensor(idx, device=X.device)], w, mu)
            ood_auc[k][:, j] = auroc(sc, yo[idx])
    w_all, mu_all = _fit(X, yt)
    mean = fold_auc.mean(1)

    def sd(a: np.ndarray) -> np.ndarray:
        return a.std(1, ddof=1) if a.shape[1] > 1 else np.zeros(a.shape[0])

    return CorrectnessProbeResult(
        layers=layer_ids,
        fold_auroc=fold_auc,
        auroc_mean=mean,
        auroc_std=sd(fold_auc),
        ood_fold_auroc=ood_auc,
        ood_mean={k: v.mean(1) for k, v in ood_auc.items()},
        ood_std={k: sd(v) for k, v in ood_auc.items()},
        best_layer=layer_ids[int(np.argmax(mean))],
        direction=w_all.double().cpu().numpy(),
        midpoint=mu_all.double().cpu().numpy(),
        n_correct=int(y.sum()),
        n_incorrect=int((~y).sum()),
    )
