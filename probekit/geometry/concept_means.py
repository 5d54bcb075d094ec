"""Concept-mean scores of Uselis, Dittadi & Oh (arXiv 2602.24264), as their code computes them.

The paper's released analysis (oshapio/necessary-compositionality,
``src/complinearity/analyse_embeddings_probes.py``) scores a representation ``X`` (rows =
inputs, globally centred) against several concepts (each row has one value per concept):

* concept-value means ``m_h[c] = mean{X_i : y_h(i) = c}`` (of the centred ``X``);
* linear factorization ``R^2 = 1 - |X - X_hat|^2 / |X|^2`` with ``X_hat_i = sum_h m_h[y_h(i)]``
  (the additive model of marginal means, fitted on all rows: no held-out combinations), and
  the same after PCA whitening of ``X`` (``eigvals = s^2 / (N - 1)``, scale ``1/sqrt(eig +
  1e-9)``);
* rank of each concept: ``k95``, the number of singular values of ``m_h`` needed for 95% of
  its squared norm;
* orthogonality: the mean ``|cos|`` between value means of the same concept (off-diagonal
  pairs, pooled over concepts) and between value means of different concepts (all pairs,
  pooled over concept pairs); factorized, orthogonal concepts give a cross-concept ``|cos|``
  near 0.

The textbook least-squares variant with held-out combinations and principal angles lives in
:mod:`probekit.geometry.factorization`. All layers are scored in one pass.
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
from probekit.report.blocks import Block
from probekit.report.notebook import NotebookMixin

from ..shapes import shape_checked
from ._validation import as_tensor64


@dataclass(frozen=True, repr=False)
class ConceptMeansScores(NotebookMixin):
    """Uselis et al.'s concept-mean scores per layer.

    Attributes:
        linear_r2: ``(layer,)`` R^2 of the sum of concept-value means.
        linear_r2_whitened: ``(layer,)`` the same after PCA whitening.
        k95: ``(layer, concept)`` singular values of each concept's mean matrix for 95%.
        same_concept_abs_cos: ``(layer,)`` mean ``|cos|`` between means of one concept.
        cross_concept_abs_cos: ``(layer,)`` mean ``|cos|`` between means of different concepts.
        n_values: number of distinct values of each concept.
    """

    linear_r2: Float[Tensor, " layer"]
    linear_r2_whitened: Float[Tensor, " layer"]
    k95: Int[Tensor, "layer concept"]
    same_concept_abs_cos: Float[Tensor, " layer"]
    cross_concept_abs_cos: Float[Tensor, " layer"]
    n_values: tuple[int, ...]

    def to_records(self) -> list[dict[str, Any]]:
        """One row per layer: the R^2s, ``k95_<concept>`` per concept and the mean |cos|."""
        out = []
        for i in range(self.linear_r2.shape[0]):
            rec: dict[str, Any] = {"layer": i, "linear_r2": float(self.linear_r2[i]),
                                   "linear_r2_whitened": float(self.linear_r2_whitened[i])}
            rec.update({f"k95_{'ab'[c] if self.k95.shape[1] == 2 else c}": int(self.k95[i, c])
                        for c in range(self.k95.shape[1])})
            rec.update(same_concept_abs_cos=float(self.same_concept_abs_cos[i]),
                       cross_concept_abs_cos=float(self.cross_concept_abs_cos[i]))
            out.append(rec)
        return out

    def _blocks(self) -> tuple[Block, ...]:
        from .blocks import factorization_blocks

        recs = self.to_records()
        keys = [k for k in recs[0] if k != "layer"]
        text = (f"Uselis et al.'s concept-mean scores over {len(self.n_values)} concepts "
                f"({' x '.join(map(str, self.n_values))} values): R2 of the summed concept-value "
                "means, k95 ranks, mean |cos| between value means.")
        if self.k95.shape[1] != 2:  # the factorization view names two concepts a and b
            from ..report.blocks import Column, Table

            return (Table(columns=tuple(Column(key=k, header=k, fmt=".4g") for k in recs[0]),
                          rows=tuple(recs), caption=text),)
        return tuple(factorization_blocks([str(r["layer"]) for r in recs],
                                          {k: [r[k] for r in recs] for k in keys}, text=text))

    def _summary(self) -> str:
        return (f"{self.linear_r2.shape[0]} layers, {len(self.n_values)} concepts "
                f"{self.n_values}; linear R2 {float(self.linear_r2.min()):.3f}.."
                f"{float(self.linear_r2.max()):.3f}")


def _means(x: Float[Tensor, "lay n d"], codes: np.ndarray, k: int) -> Float[Tensor, "lay k d"]:
    """Mean row of ``x`` per value code ``0..k-1`` (every code occurs)."""
    onehot = torch.nn.functional.one_hot(torch.from_numpy(codes), k).to(x.dtype)  # (n, k)
    return (onehot.T @ x) / onehot.sum(dim=0)[:, None]


def _k95(m: Float[Tensor, "k d"]) -> int:
    """Singular values of ``m`` needed for 95% of its squared Frobenius norm (their k95)."""
    var = torch.linalg.svdvals(m) ** 2
    cev = torch.cumsum(var / var.sum(), dim=0)
    return int(min(int(torch.searchsorted(cev, torch.tensor(0.95, dtype=cev.dtype))) + 1,
                   var.numel()))


def _unit_rows(m: Float[Tensor, "... k d"]) -> Float[Tensor, "... k d"]:
    """Rows divided by ``norm + 1e-9`` (their ``norm_rows``)."""
    return m / (m.norm(dim=-1, keepdim=True) + 1e-9)


@shape_checked
def concept_means_scores(
    acts: Float[Tensor, "*lay n d"] | np.ndarray,
    concepts: Sequence[Sequence[object] | np.ndarray],
) -> ConceptMeansScores:
    """Linear-factorization R^2 (raw, whitened), k95 and mean |cos| of concept-value means.

    Args:
        acts: ``(layer, n, d)`` or ``(n, d)`` representations (centred here).
        concepts: two or more label arrays of length ``n`` (one value per row and concept).

    Returns:
        ConceptMeansScores per layer.
    """
    x = as_tensor64(acts, name="acts")
    x = x.unsqueeze(0) if x.ndim == 2 else x
    if x.ndim != 3 or len(concepts) < 2:
        raise DataError(
            f"acts of shape {tuple(x.shape)} with {len(concepts)} concept(s); expected (layer, n, "
            "d) or (n, d) activations and at least two concept label arrays"
        )
    n = x.shape[1]
    codes, sizes = [], []
    for i, c in enumerate(concepts):
        arr = np.asarray(c)
        if arr.shape != (n,):
            raise DataError(f"concept {i} has shape {arr.shape}; expected ({n},), one per row")
        vals, inv = np.unique(arr, return_inverse=True)
        if vals.size < 2:
            raise DataError(f"concept {i} takes {vals.size} value(s); expected at least 2")
        codes.append(inv.reshape(-1).astype(np.int64))
        sizes.append(int(vals.size))
    xc = x - x.mean(dim=1, keepdim=True)
    means = [_means(xc, c, k) for c, k in zip(codes, sizes)]
    fit = sum(m[:, torch.from_numpy(c)] for m, c in zip(means, codes))
    r2 = 1.0 - ((xc - fit) ** 2).sum(dim=(1, 2)) / ((xc**2).sum(dim=(1, 2)) + 1e-9)

    _, s, vh = torch.linalg.svd(xc, full_matrices=False)  # (lay, r), (lay, r, d)
    scale = 1.0 / torch.sqrt(s**2 / max(n - 1, 1) + 1e-9)

    def whiten(z: Tensor) -> Tensor:
        return ((z @ vh.mT) * scale.unsqueeze(1)) @ vh

    xw = whiten(xc)
    fit_w = sum(whiten(m)[:, torch.from_numpy(c)] for m, c in zip(means, codes))
    sst_w = (xw**2).sum(dim=(1, 2))
    r2_w = torch.where(sst_w > 0, 1.0 - ((xw - fit_w) ** 2).sum(dim=(1, 2)) / sst_w, torch.nan)

    k95 = torch.tensor([[_k95(m[layer]) for m in means] for layer in range(x.shape[0])])
    units = [_unit_rows(m) for m in means]
    same, cross = [], []
    for i, ui in enumerate(units):
        sims = (ui @ ui.mT).abs()
        off = ~torch.eye(sims.shape[1], dtype=torch.bool)
        same.append(sims[:, off])
        cross.extend((ui @ uj.mT).abs().flatten(1) for uj in units[i + 1 :])
    return ConceptMeansScores(
        linear_r2=r2,
        linear_r2_whitened=r2_w,
        k95=k95,
        same_concept_abs_cos=torch.cat(same, dim=1).mean(dim=1),
        cross_concept_abs_cos=torch.cat(cross, dim=1).mean(dim=1),
        n_values=tuple(sizes),
    )
