"""``measure = "svcca"`` and ``"pwcca"``: canonical correlation similarities of truncated principal subspaces.

One orthonormal principal basis ``Q_k`` per layer (truncated by ``keep``), then per pair the
canonical correlations ``rho = svd(Q_i^T Q_j)`` (Bjorck & Golub 1973). SVCCA (Raghu, Gilmer,
Yosinski & Sohl-Dickstein, NeurIPS 2017): the mean ``rho``, default ``keep=0.99`` of the
variance. PWCCA (Morcos, Raghu & Bengio, NeurIPS 2018): ``sum_c a_c rho_c`` with weights
``a_c ∝ sum_j |<h_c, x_j>|`` from the canonical variates ``h_c`` of the first layer and its
centred neurons ``x_j`` (asymmetric), default no truncation. Both hold every layer in memory
and need ``n`` larger than the kept dimensions.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ...progress import track
from ..measure import Pairs, SimilarityConfig, SimilarityMeasure, register_similarity_measure
from ..shape import _basis
from ..streaming import Rep, load_centred


class _CCA(SimilarityMeasure):
    """Shared preparation: one centred layer and its truncated principal basis per layer."""

    default_keep: float | None = None

    def label(self, config: SimilarityConfig) -> str:
        """``"SVCCA"``, or ``"PWCCA (keep=20)"`` with a truncation given."""
        return f"{self.name.upper()} (keep={config.keep})" if config.keep is not None else self.name.upper()

    def pair_values(
        self, reps: Sequence[Rep], labels: Sequence[str], pairs: Pairs, config: SimilarityConfig,
    ) -> tuple[dict[tuple[int, int], float], int]:
        """Bases once per layer, then :meth:`value` per pair."""
        X = load_centred(reps, labels, sorted({k for p in pairs for k in p}), config.chunk_size)
        n = next(iter(X.values())).shape[0]
        keep = self.default_keep if config.keep is None else config.keep
        Q = {k: _basis(x, keep, f"representation {labels[k]!r}") for k, x in X.items()}
        out = {(i, j): self.value(Q[i], Q[j], X[i])
               for i, j in track(pairs, desc=f"layer similarity ({self.name})", unit="pair")}
        return out, n

    def value(self, Qi: torch.Tensor, Qj: torch.Tensor, Xi: torch.Tensor) -> float:
        """The similarity of one pair from its bases (and the first layer's centred neurons)."""
        raise NotImplementedError


@register_similarity_measure
class SVCCA(_CCA):
    """Mean canonical correlation of the top principal directions (Raghu et al. 2017)."""

    name = "svcca"
    default_keep = 0.99

    def value(self, Qi: torch.Tensor, Qj: torch.Tensor, Xi: torch.Tensor) -> float:
        """``mean(rho)``."""
        return float(torch.linalg.svdvals(Qi.T @ Qj).clamp(0.0, 1.0).mean())


@register_similarity_measure
class PWCCA(_CCA):
    """Projection-weighted mean canonical correlation (Morcos et al. 2018), weights from layer ``i``."""

    name = "pwcca"
    symmetric = False

    def value(self, Qi: torch.Tensor, Qj: torch.Tensor, Xi: torch.Tensor) -> float:
        """``sum_c a_c rho_c`` with ``a`` the normalised absolute projections of ``Xi`` on the variates."""
        U, rho, _ = torch.linalg.svd(Qi.T @ Qj, full_matrices=False)
        alpha = ((Qi @ U).T @ Xi).abs().sum(1)
        return float((alpha / alpha.sum() * rho.clamp(0.0, 1.0)).sum())
