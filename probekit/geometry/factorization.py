"""Concept factorization of representations (Uselis, Dittadi & Oh, arXiv 2602.24264).

For two concepts ``a`` and ``b`` (e.g. the operands of a task), average the representations of each
observed combination, ``z(a, b)``, and fit the additive model

    z(a, b) ~ mu + u_a + v_b

by least squares on the observed (training) combinations. Compositional generalization in that
paper requires the factors to be *linear* (the additive model predicts unseen combinations:
held-out ``R^2`` on combinations never used in the fit) and *orthogonal* (principal angles between
``span{u_a - mean u}`` and ``span{v_b - mean v}`` near 90 degrees). The rank of each concept's
factor matrix is reported too. Exact score definitions of the paper's code
(oshapio/necessary-compositionality) were not checked here; these are the textbook forms.
All layers are fitted in one least-squares solve (the design matrix is shared).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

from probekit.errors import DataError

from ..report.blocks import Block
from ..report.notebook import NotebookMixin
from ..shapes import shape_checked
from ._validation import as_tensor64


@dataclass(frozen=True, repr=False)
class FactorizationResult(NotebookMixin):
    """Additive concept factorization per layer.

    Attributes:
        r2_train: ``(layer,)`` R^2 of the additive fit on the fitted combinations.
        r2_heldout: ``(layer,)`` R^2 on held-out combinations (nan if none).
        principal_angles: ``(layer, k)`` principal angles (degrees, ascending) between the two
            concepts' factor spans: ``min(rank_a, rank_b)`` per layer, NaN-padded to the
            largest ``k`` over layers.
        rank_a: ``(layer,)`` numerical rank of the centred ``u_a`` matrix.
        rank_b: ``(layer,)`` numerical rank of the centred ``v_b`` matrix.
        n_train_combinations: combinations used in the fit.
        n_heldout_combinations: combinations scored as held out.
    """

    r2_train: Float[Tensor, " layer"]
    r2_heldout: Float[Tensor, " layer"]
    principal_angles: Float[Tensor, "layer k"]
    rank_a: Int[Tensor, " layer"]
    rank_b: Int[Tensor, " layer"]
    n_train_combinations: int
    n_heldout_combinations: int

    def to_records(self) -> list[dict[str, Any]]:
        """One row per layer: R^2 fitted / held out, min and mean principal angle, ranks.

        Undefined values (no held-out combination, no angle) are ``None``.
        """
        out = []
        for i in range(self.r2_train.shape[0]):
            angles = self.principal_angles[i]
            angles = angles[~torch.isnan(angles)]
            held = float(self.r2_heldout[i])
            out.append({
                "layer": i, "r2_train": float(self.r2_train[i]),
                "r2_heldout": held if np.isfinite(held) else None,
                "angle_min": float(angles.min()) if angles.numel() else None,
                "angle_mean": float(angles.mean()) if angles.numel() else None,
                "rank_a": int(self.rank_a[i]), "rank_b": int(self.rank_b[i]),
            })
        return out

    def _blocks(self) -> tuple[Block, ...]:
        from .blocks import factorization_blocks

        recs = self.to_records()
        keys = ("r2_train", "r2_heldout", "angle_min", "angle_mean", "rank_a", "rank_b")
        text = (f"Additive model z(a, b) ~ mu + u_a + v_b fitted on {self.n_train_combinations} "
                f"combinations, scored on {self.n_heldout_combinations} unseen ones; "
                "orthogonality = principal angles between span(u) and span(v) (90 deg: "
                "orthogonal).")
        return tuple(factorization_blocks([str(r["layer"]) for r in recs],
                                          {k: [r[k] for r in recs] for k in keys}, text=text))

    def _summary(self) -> str:
        return (f"{self.r2_train.shape[0]} layers, {self.n_train_combinations} fitted / "
                f"{self.n_heldout_combinations} held-out combinations; R2 fitted "
                f"{float(self.r2_train.min()):.3f}..{float(self.r2_train.max()):.3f}")


def _combination_means(x: Tensor, a: np.ndarray, b: np.ndarray, rows: np.ndarray
                       ) -> tuple[np.ndarray, Tensor]:
    """Mean representation of each (a, b) combination present in ``rows``."""
    pairs = np.stack([a[rows], b[rows]], axis=1)
    combos, inv = np.unique(pairs, axis=0, return_inverse=True)
    inv = inv.reshape(-1)
    onehot = torch.nn.functional.one_hot(torch.from_numpy(inv), len(combos)).to(x.dtype)
    means = (onehot.T @ x[:, torch.from_numpy(rows)]) / onehot.sum(0)[:, None]
    return combos, means  # (k, 2), (layer, k, d)


def _r2(z: Tensor, pred: Tensor) -> Tensor:
    resid = ((z - pred) ** 2).sum(dim=(1, 2))
    total = ((z - z.mean(dim=1, keepdim=True)) ** 2).sum(dim=(1, 2))
    return 1.0 - resid / total


@shape_checked
def concept_factorization(
    acts: Float[Tensor, "*lay n d"] | np.ndarray,
    concept_a: Sequence[object] | np.ndarray,
    concept_b: Sequence[object] | np.ndarray,
    *,
    train: Sequence[bool] | np.ndarray | None = None,
    rtol: float = 1e-3,
) -> FactorizationResult:
    """Fit ``z(a, b) ~ mu + u_a + v_b`` on training combinations; score held-out ones.

    Args:
        acts: ``(layer, n, d)`` or ``(n, d)`` representations.
        concept_a: ``n`` values of the first concept.
        concept_b: ``n`` values of the second concept.
        train: ``n`` booleans, True for rows whose combinations are fitted; the combinations of
            the other rows that never occur in training are held out (default: all rows fitted).
        rtol: singular-value threshold of the per-concept rank, relative to the largest
            singular value of either factor.

    Returns:
        FactorizationResult per layer.
    """
    x = as_tensor64(acts, name="acts")
    x = x.unsqueeze(0) if x.ndim == 2 else x
    n = x.shape[1]
    a, b = np.asarray(concept_a), np.asarray(concept_b)
    tr = np.ones(n, dtype=bool) if train is None else np.asarray(train, dtype=bool)
    if x.ndim != 3 or a.shape != (n,) or b.shape != (n,) or tr.shape != (n,):
        raise DataError(
            f"acts {tuple(x.shape)}, concept_a {a.shape}, concept_b {b.shape}, train {tr.shape}; "
            "expected (layer, n, d) activations and n values for each concept and train mask"
        )
    _, a = np.unique(a, return_inverse=True)
    _, b = np.unique(b, return_inverse=True)
    na, nb = int(a.max()) + 1, int(b.max()) + 1
    combos, z = _combination_means(x, a, b, np.flatnonzero(tr))
    if len(np.unique(combos[:, 0])) < na or len(np.unique(combos[:, 1])) < nb:
        raise DataError(
            "some concept value never occurs in a training combination; every value of a and b "
            "needs at least one training row for its factor to be identified"
        )
    design = torch.cat([
        torch.ones(len(combos), 1, dtype=x.dtype),
        torch.nn.functional.one_hot(torch.from_numpy(combos[:, 0]), na).to(x.dtype),
        torch.nn.functional.one_hot(torch.from_numpy(combos[:, 1]), nb).to(x.dtype),
    ], dim=1)  # (k, 1 + na + nb)
    coef = torch.linalg.pinv(design) @ z  # (layer, 1 + na + nb, d), min-norm solution
    r2_train = _r2(z, design @ coef)
    u = coef[:, 1 : 1 + na]
    v = coef[:, 1 + na :]
    u = u - u.mean(dim=1, keepdim=True)
    v = v - v.mean(dim=1, keepdim=True)

    seen = {tuple(c) for c in combos.tolist()}
    test_rows = np.flatnonzero(~tr)
    test_rows = test_rows[[(int(a[i]), int(b[i])) not in seen for i in test_rows]] \
        if test_rows.size else test_rows
    if test_rows.size:
        hcombos, hz = _combination_means(x, a, b, test_rows)
        hdesign = torch.cat([
            torch.ones(len(hcombos), 1, dtype=x.dtype),
            torch.nn.functional.one_hot(torch.from_numpy(hcombos[:, 0]), na).to(x.dtype),
            torch.nn.functional.one_hot(torch.from_numpy(hcombos[:, 1]), nb).to(x.dtype),
        ], dim=1)
        r2_held = _r2(hz, hdesign @ coef)
        n_held = len(hcombos)
    else:
        r2_held = torch.full((x.shape[0],), float("nan"), dtype=x.dtype)
        n_held = 0

    angles, ra, rb = _spans(u, v, rtol)
    return FactorizationResult(r2_train=r2_train, r2_heldout=r2_held, principal_angles=angles,
                               rank_a=ra, rank_b=rb, n_train_combinations=len(combos),
                               n_heldout_combinations=n_held)


def _spans(u: Tensor, v: Tensor, rtol: float) -> tuple[Tensor, Tensor, Tensor]:
    """Ranks of the factor matrices and principal angles (degrees) between their row spans.

    Singular values count toward a rank when they are at least ``rtol`` times the largest one
    of either factor (a factor that is zero up to rounding, e.g. a concept the site does not
    encode, has rank 0).
    """
    out_angles, ra, rb = [], [], []
    for ul, vl in zip(u, v):
        scale = max(float(torch.linalg.svdvals(ul)[0]), float(torch.linalg.svdvals(vl)[0]))
        qu, ku = _basis(ul, rtol * scale)
        qv, kv = _basis(vl, rtol * scale)
        cos = torch.linalg.svdvals(qu.T @ qv).clamp(max=1.0)
        out_angles.append(torch.rad2deg(torch.arccos(cos)))
        ra.append(ku)
        rb.append(kv)
    k = max(len(t) for t in out_angles)
    padded = torch.full((len(out_angles), k), torch.nan, dtype=u.dtype)
    for i, t in enumerate(out_angles):
        padded[i, : len(t)] = t
    return padded, torch.tensor(ra), torch.tensor(rb)


def _basis(m: Tensor, atol: float) -> tuple[Tensor, int]:
    """Orthonormal basis (d, r) of the row span of ``m``; ``r`` = singular values > ``atol``."""
    _, s, vh = torch.linalg.svd(m, full_matrices=False)
    r = int((s > atol).sum()) if atol > 0 else 0
    return vh[:r].T, r
