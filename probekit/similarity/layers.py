"""Layer x layer similarity: within a model, between models, across checkpoints and seeds.

All layer pairs are computed at once from statistics prepared once per layer, never by
calling a pairwise measure on raw activations ``L^2`` times: the measure (a registered
:class:`~probekit.similarity.measure.SimilarityMeasure`, picked by
``SimilarityConfig.measure``) receives every needed pair together and shares its per-layer
work across them:

* linear CKA and Procrustes (the default, streamable): one pass for the column means, one pass
  accumulating the centred cross-products ``C_ij = Xc_i^T Xc_j`` (``d_i x d_j``) for the pairs
  needed, plus the squared row norms' inner products for debiased CKA. Inputs are read chunk
  by chunk (in-memory tensors, or an activation store's shards via :func:`store_reps`), so
  memory is bounded by the ``d x d`` accumulators, not by ``n``. When ``n`` is small against
  the widths (``layers * n^2 < sum d_i d_j``), one ``n x n`` Gram (CKA) or SVD factor ``U S``
  (Procrustes) per layer instead;
* RBF CKA: one centred ``n x n`` Gram per layer (``n <= max_gram_n``);
* SVCCA / PWCCA: one truncated principal basis per layer, then ``svd(Qx_i^T Qx_j)`` per pair;
* RSA: one RDM per layer, then the comparison of their upper triangles per pair;
* minibatch CKA (``batch_size``, Nguyen et al. 2021): one ``batch x batch`` Gram per layer and
  batch, unbiased HSIC of every pair, streamed for either kernel.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from probekit.errors import DataError

from .measure import SimilarityConfig
from .results import CheckpointDrift, LayerSimilarity, PopulationSimilarity
from .streaming import Rep, StreamedRep, rep_label, store_reps

__all__ = [
    "CheckpointDrift",
    "LayerSimilarity",
    "PopulationSimilarity",
    "SimilarityConfig",
    "StreamedRep",
    "checkpoint_drift",
    "layer_similarity",
    "seed_similarity",
    "store_reps",
]

def layer_similarity(
    reps_a: Sequence[Rep],
    reps_b: Sequence[Rep] | None = None,
    *,
    config: SimilarityConfig | None = None,
    labels_a: Sequence[str] | None = None,
    labels_b: Sequence[str] | None = None,
) -> LayerSimilarity:
    """Layer x layer similarity within one model (``reps_b=None``) or between two models.

    Args:
        reps_a: one representation per layer, each ``(n, d_l)``: tensors, arrays or
            :class:`StreamedRep` (e.g. ``store_reps(ActivationStore(dir), sites)``).
        reps_b: the second model's layers (same stimuli, same order), or None for ``reps_a``
            against itself (each pair of a symmetric measure computed once).
        config: the measure and its options (:class:`SimilarityConfig`; None: linear CKA).
        labels_a: row labels (default: layer index, or the store site name).
        labels_b: column labels.

    Linear CKA and Procrustes stream (two passes) with memory ``O(sum_ij d_i d_j)``; the other
    measures hold every layer in memory.
    """
    config = config if config is not None else SimilarityConfig()
    measure = config.strategy
    A = list(reps_a)
    B = list(reps_b) if reps_b is not None else None
    if not A or (B is not None and not B):
        raise DataError("layer_similarity needs at least one layer in each model")
    la = tuple(labels_a) if labels_a is not None else tuple(rep_label(r, i) for i, r in enumerate(A))
    if B is None:
        pairs = [(i, j) for i in range(len(A)) for j in range(i, len(A))]
        if not measure.symmetric:  # both orders of every off-diagonal pair
            pairs += [(j, i) for i, j in pairs if i != j]
        vals, n = measure.pair_values(A, la, pairs, config)
        M = np.empty((len(A), len(A)))
        for (i, j), v in vals.items():
            M[i, j] = v
            if measure.symmetric:
                M[j, i] = v
        return LayerSimilarity(values=M, labels_a=la, labels_b=la, measure=config.label, n=n)
    lb = tuple(labels_b) if labels_b is not None else tuple(rep_label(r, i) for i, r in enumerate(B))
    off = len(A)
    pairs = [(i, off + j) for i in range(len(A)) for j in range(len(B))]
    vals, n = measure.pair_values(A + B, la + lb, pairs, config)
    M = np.array([[vals[(i, off + j)] for j in range(len(B))] for i in range(len(A))])
    return LayerSimilarity(values=M, labels_a=la, labels_b=lb, measure=config.label, n=n)


def checkpoint_drift(
    reps: Sequence[Rep],
    *,
    config: SimilarityConfig | None = None,
    labels: Sequence[str] | None = None,
) -> CheckpointDrift:
    """Similarity of each checkpoint's representation (one site) to the final and the previous.

    ``reps[t]`` is the ``(n, d)`` representation of the same stimuli at checkpoint ``t`` (in
    training order), e.g. ``store_reps(ActivationStore(f"acts/step{t}"), ["resid_post@0"])[0]``.
    A grokking run typically shows a plateau of high similarity to the previous checkpoint
    with low similarity to the final one, then a jump when the generalizing circuit forms.
    ``config``: the measure and its options (:class:`SimilarityConfig`).
    """
    config = config if config is not None else SimilarityConfig()
    measure = config.strategy
    R = list(reps)
    if len(R) < 2:
        raise DataError(f"checkpoint_drift needs at least 2 checkpoints, got {len(R)}")
    lab = tuple(labels) if labels is not None else tuple(rep_label(r, i) for i, r in enumerate(R))
    T = len(R) - 1
    pairs = sorted({(t, T) for t in range(T + 1)} | {(t - 1, t) for t in range(1, T + 1)})
    vals, n = measure.pair_values(R, lab, pairs, config)
    return CheckpointDrift(
        labels=lab,
        to_final=np.array([vals[(t, T)] for t in range(T + 1)]),
        to_previous=np.array([math.nan] + [vals[(t - 1, t)] for t in range(1, T + 1)]),
        measure=config.label,
        n=n,
    )


def seed_similarity(
    models: Sequence[Sequence[Rep]],
    *,
    config: SimilarityConfig | None = None,
    labels: Sequence[str] | None = None,
) -> PopulationSimilarity:
    """Layer x layer similarity between every pair of models of a population, with its spread.

    ``models[s][l]`` is layer ``l`` of model (seed) ``s``; all models need the same number of
    layers and the same stimuli. Every cross-model layer pair of every model pair is computed
    in one pass of the measure (per-layer statistics shared across pairs). ``config``: the
    measure and its options (:class:`SimilarityConfig`).
    """
    config = config if config is not None else SimilarityConfig()
    measure = config.strategy
    Ms = [list(m) for m in models]
    if len(Ms) < 2:
        raise DataError(f"seed_similarity needs at least 2 models, got {len(Ms)}")
    L = len(Ms[0])
    if any(len(m) != L for m in Ms):
        raise DataError(f"every model needs the same number of layers, got {[len(m) for m in Ms]}")
    lab = tuple(labels) if labels is not None else tuple(rep_label(r, i) for i, r in enumerate(Ms[0]))
    flat = [r for m in Ms for r in m]
    flat_labels = [f"model{s}/{lab[layer]}" for s in range(len(Ms)) for layer in range(L)]
    model_pairs = tuple(itertools.combinations(range(len(Ms)), 2))
    pairs = [(a * L + i, b * L + j) for a, b in model_pairs for i in range(L) for j in range(L)]
    vals, n = measure.pair_values(flat, flat_labels, pairs, config)
    V = np.array([[[vals[(a * L + i, b * L + j)] for j in range(L)] for i in range(L)] for a, b in model_pairs])
    std = V.std(0, ddof=1) if len(model_pairs) > 1 else np.full((L, L), math.nan)
    return PopulationSimilarity(values=V, mean=V.mean(0), std=std, pairs=model_pairs, labels=lab,
                                measure=config.label, n=n)
