"""``measure = "procrustes"``: the angular Procrustes distance (Williams, Kunz, Kornblith & Linderman, NeurIPS 2021).

``d(X, Y) = arccos(||Xc^T Yc||_* / (||Xc||_F ||Yc||_F))`` in radians, ``[0, pi/2]``: 0 when
the centred layers are equal up to rotation and scale. Every pair at once: in feature space
from the streamed centred cross-products ``C_ij`` (``||C_ij||_* / sqrt(tr C_ii tr C_jj)``,
:func:`~probekit.similarity.streaming.moments`), or in Gram space when ``n`` is small against
the widths, from one SVD factor ``P = U S`` per layer (``||Xc_i^T Xc_j||_* = ||P_i^T P_j||_*``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from ..measure import Pairs, SimilarityConfig, SimilarityMeasure, register_similarity_measure
from ..streaming import Rep, choose_space, load_centred, moments
from .cka import check_not_constant, check_traces, needed


def _angle(cos: float) -> float:
    return math.acos(min(1.0, max(-1.0, cos)))


@register_similarity_measure
class Procrustes(SimilarityMeasure):
    """Angular Procrustes distance, streamed in feature space or from per-layer SVDs."""

    name = "procrustes"
    distance = True

    def label(self, config: SimilarityConfig) -> str:
        """``"angular Procrustes distance (rad)"``."""
        return "angular Procrustes distance (rad)"

    def pair_values(
        self, reps: Sequence[Rep], labels: Sequence[str], pairs: Pairs, config: SimilarityConfig,
    ) -> tuple[dict[tuple[int, int], float], int]:
        """Every pair's distance (see the module docstring)."""
        space = config.space if config.space != "auto" else choose_space(reps, needed(pairs), config.chunk_size)
        if space == "gram":
            X = load_centred(reps, labels, sorted({k for p in pairs for k in p}), config.chunk_size)
            n = next(iter(X.values())).shape[0]
            check_not_constant(X, labels, n)
            P, tr = {}, {}
            for k, x in X.items():
                U, S, _ = torch.linalg.svd(x, full_matrices=False)
                P[k], tr[k] = U * S, float(S.square().sum())
            return {(i, j): _angle(float(torch.linalg.svdvals(P[i].T @ P[j]).sum()) / math.sqrt(tr[i] * tr[j]))
                    for i, j in pairs}, n
        m = moments(reps, labels, needed(pairs), config.chunk_size, config.dtype)
        tr = check_traces(m, labels)
        return {(i, j): _angle(float(torch.linalg.svdvals(m.cross[(i, j)]).sum()) / math.sqrt(tr[i] * tr[j]))
                for i, j in pairs}, m.n
