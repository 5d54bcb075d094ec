"""``measure = "rsa"``: representational similarity analysis (Kriegeskorte, Mur & Bandettini 2008).

One representational dissimilarity matrix per layer (:func:`~probekit.similarity.rdm` with
``rdm_metric``; ``n x n``, so ``n <= max_gram_n``), then per pair the comparison of the two
RDMs' upper triangles (:func:`~probekit.similarity.rsa.compare_vectors` with ``rsa_method``:
Spearman, Kendall's tau-a or cosine, as ``rsatoolbox.rdm.compare``). Layers may differ in
width; values in ``[-1, 1]``, 1 = the same ordering of stimulus dissimilarities.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ...errors import ConfigError, DataError
from .._validation import check_choice
from ..measure import Pairs, SimilarityConfig, SimilarityMeasure, register_similarity_measure
from ..rsa import METHODS, METRICS, compare_vectors, rdm, upper_triangle
from ..streaming import Rep, iter_chunks


@register_similarity_measure
class RSA(SimilarityMeasure):
    """RDM per layer, compared over upper triangles (see the module docstring)."""

    name = "rsa"

    def check(self, config: SimilarityConfig) -> None:
        """``rdm_metric`` and ``rsa_method`` among their choices; no minibatches."""
        super().check(config)
        check_choice(config.rdm_metric, METRICS, name="rdm_metric")
        check_choice(config.rsa_method, METHODS, name="rsa_method")

    def label(self, config: SimilarityConfig) -> str:
        """``"RSA (spearman, correlation RDMs)"``."""
        return f"RSA ({config.rsa_method}, {config.rdm_metric} RDMs)"

    def pair_values(
        self, reps: Sequence[Rep], labels: Sequence[str], pairs: Pairs, config: SimilarityConfig,
    ) -> tuple[dict[tuple[int, int], float], int]:
        """One RDM's upper triangle per layer, then :func:`compare_vectors` per pair."""
        used = sorted({k for p in pairs for k in p})
        tri, ns = {}, {}
        for k in used:
            X = torch.cat([c.to(torch.float64) for c in iter_chunks(reps[k], config.chunk_size)])
            if X.shape[0] > config.max_gram_n:
                raise ConfigError(
                    f"measure='rsa' needs an n x n RDM per layer and n={X.shape[0]} > "
                    f"max_gram_n={config.max_gram_n}; subsample the stimuli or raise max_gram_n"
                )
            ns[labels[k]] = X.shape[0]
            tri[k] = upper_triangle(rdm(X, config.rdm_metric))
        if len(set(ns.values())) > 1:
            raise DataError(f"the representations have different row counts {ns}; pass the same stimuli to all")
        return {(i, j): compare_vectors(tri[i], tri[j], config.rsa_method) for i, j in pairs}, next(iter(ns.values()))
