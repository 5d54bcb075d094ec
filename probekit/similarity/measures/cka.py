"""``measure = "cka"``: centred kernel alignment (Kornblith, Norouzi, Lee & Hinton, ICML 2019).

``CKA(X, Y) = HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L))`` of the layers' Gram matrices. Four
ways to compute every layer pair at once, chosen by the options of
:class:`~probekit.similarity.measure.SimilarityConfig`:

* linear kernel, feature space (the default for ``n`` large against the widths): the centred
  cross-products ``C_ij = Xc_i^T Xc_j`` streamed in two passes
  (:func:`~probekit.similarity.streaming.moments`); ``CKA = ||C_ij||_F^2 / (||C_ii||_F ||C_jj||_F)``
  and its debiased form from the same moments (:func:`~probekit.similarity.cka.linear_cka_from_moments`);
* linear kernel, Gram space (``layers * n^2 < sum d_i d_j``): one ``n x n`` Gram per layer;
* RBF kernel: one ``n x n`` Gram per layer (``n <= max_gram_n``);
* ``batch_size``: minibatch CKA (Nguyen, Raghu & Kornblith, ICLR 2021): unbiased HSIC of every
  pair per batch, averaged over batches, then the ratio; streams for either kernel.

``debiased``: the unbiased HSIC estimator (Song, Smola, Gretton, Bedo & Borgwardt, JMLR 2012).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from ...errors import ConfigError, DataError
from ...progress import track
from .._validation import check_finite
from ..cka import (
    _hsic_u,
    _ratio,
    centre,
    centre_gram,
    linear_cka_from_moments,
    linear_gram,
    rbf_gram,
)
from ..measure import Pairs, SimilarityConfig, SimilarityMeasure, register_similarity_measure
from ..streaming import (
    Moments,
    Rep,
    batches,
    choose_space,
    hsic_u_terms,
    load_centred,
    moments,
    u_terms,
)

Values = tuple[dict[tuple[int, int], float], int]


def check_traces(m: Moments, labels: Sequence[str]) -> dict[int, float]:
    """``tr C_ii`` of every layer in ``m``; a :class:`DataError` for a constant layer."""
    tr = {i: float(torch.trace(m.cross[(i, i)])) for i, j in m.cross if i == j}
    for i, t in tr.items():
        if t <= 0:
            raise DataError(
                f"representation {labels[i]!r} is constant over all {m.n} stimuli (every feature "
                "takes one value, e.g. the embedding of a fixed token at a fixed position), so "
                "its similarity is undefined; leave that site out"
            )
    return tr


def check_not_constant(X: dict[int, torch.Tensor], labels: Sequence[str], n: int) -> None:
    """A :class:`DataError` naming the first centred layer of ``X`` that is all zeros."""
    for k, x in X.items():
        if float(x.square().sum()) <= 0.0:
            raise DataError(f"representation {labels[k]!r} is constant over all {n} stimuli, so its "
                            "similarity is undefined; leave that site out")


def needed(pairs: Pairs) -> list[tuple[int, int]]:
    """``pairs`` plus the ``(k, k)`` of every layer they use, sorted."""
    return sorted(set(pairs) | {(k, k) for p in pairs for k in p})


@register_similarity_measure
class CKA(SimilarityMeasure):
    """Linear or RBF CKA, plain or debiased, whole or minibatch (see the module docstring)."""

    name = "cka"

    def check(self, config: SimilarityConfig) -> None:
        """Every option applies (``batch_size`` included)."""

    def label(self, config: SimilarityConfig) -> str:
        """``"linear CKA"``, ``"debiased rbf CKA"``, ``"minibatch linear CKA (batch 256)"``."""
        if config.batch_size is not None:
            return f"minibatch {config.kernel} CKA (batch {config.batch_size})"
        return f"{'debiased ' if config.debiased else ''}{config.kernel} CKA"

    def pair_values(
        self, reps: Sequence[Rep], labels: Sequence[str], pairs: Pairs, config: SimilarityConfig,
    ) -> Values:
        """Every pair's CKA by the path the options pick (see the module docstring)."""
        if config.batch_size is not None:
            return _minibatch(reps, labels, pairs, config)
        if config.kernel == "rbf":
            return _rbf(reps, labels, pairs, config)
        space = config.space if config.space != "auto" else choose_space(reps, needed(pairs), config.chunk_size)
        if space == "gram":
            return _linear_gram(reps, labels, pairs, config)
        m = moments(reps, labels, needed(pairs), config.chunk_size, config.dtype)
        tr = check_traces(m, labels)
        sq = {key: float(c.square().sum()) for key, c in m.cross.items()}
        out = {}
        for i, j in pairs:
            ssr = (float(m.ssr[i, j]), float(m.ssr[i, i]), float(m.ssr[j, j]))
            out[(i, j)] = linear_cka_from_moments(
                sq[(i, j)], sq[(i, i)], sq[(j, j)], debiased=config.debiased, ssr=ssr,
                tr=(tr[i], tr[j]), n=m.n,
            )
        return out, m.n


def _linear_gram(reps: Sequence[Rep], labels: Sequence[str], pairs: Pairs, config: SimilarityConfig) -> Values:
    """Linear CKA of centred ``n x n`` Grams (or the unbiased HSIC of zero-diagonal Grams)."""
    X = load_centred(reps, labels, sorted({k for p in pairs for k in p}), config.chunk_size)
    n = next(iter(X.values())).shape[0]
    check_not_constant(X, labels, n)
    G = {k: linear_gram(x) for k, x in X.items()}
    if config.debiased:
        T = {k: u_terms(g) for k, g in G.items()}
        h = {k: hsic_u_terms(t, t, n) for k, t in T.items()}
        return {(i, j): _ratio(hsic_u_terms(T[i], T[j], n), h[i], h[j]) for i, j in pairs}, n
    h = {k: float(g.square().sum()) for k, g in G.items()}
    return {(i, j): _ratio(float((G[i] * G[j]).sum()), h[i], h[j]) for i, j in pairs}, n


def _rbf(reps: Sequence[Rep], labels: Sequence[str], pairs: Pairs, config: SimilarityConfig) -> Values:
    """RBF CKA: one centred (or raw, for debiased) ``n x n`` Gram per layer."""
    X = load_centred(reps, labels, sorted({k for p in pairs for k in p}), config.chunk_size)
    n = next(iter(X.values())).shape[0]
    if n > config.max_gram_n:
        raise ConfigError(
            f"kernel='rbf' needs an n x n Gram per layer and n={n} > max_gram_n={config.max_gram_n}; "
            "use kernel='linear' (streams in feature space), subsample, set batch_size (minibatch "
            "CKA) or raise max_gram_n"
        )
    G = {k: rbf_gram(x, config.bandwidth) for k, x in X.items()}
    if config.debiased:
        h = {k: _hsic_u(g, g) for k, g in G.items()}
        return {(i, j): _ratio(_hsic_u(G[i], G[j]), h[i], h[j]) for i, j in pairs}, n
    Gc = {k: centre_gram(g) for k, g in G.items()}
    h = {k: float(g.square().sum()) for k, g in Gc.items()}
    return {(i, j): _ratio(float((Gc[i] * Gc[j]).sum()), h[i], h[j]) for i, j in pairs}, n


def _minibatch(reps: Sequence[Rep], labels: Sequence[str], pairs: Pairs, config: SimilarityConfig) -> Values:
    """Minibatch CKA (Nguyen et al. 2021) of every pair, batch by batch.

    Per batch one Gram per layer and the unbiased HSIC of each needed pair; averaged over
    batches, then the CKA ratio.
    """
    used = sorted({k for p in pairs for k in p})
    need = needed(pairs)
    sums = dict.fromkeys(need, 0.0)
    n, n_batches = 0, 0
    for batch in track(batches(reps, labels, config.batch_size, config.chunk_size), desc="minibatch CKA",
                       unit="example", weight=lambda b: b[0].shape[0]):
        b = batch[0].shape[0]
        terms = {}
        for k in used:
            x = batch[k].to(torch.float64)
            check_finite(x, name=f"representation {labels[k]!r}")
            terms[k] = u_terms(linear_gram(centre(x)) if config.kernel == "linear"
                               else rbf_gram(x, config.bandwidth))
        for i, j in need:
            sums[(i, j)] += hsic_u_terms(terms[i], terms[j], b)
        n += b
        n_batches += 1
    if n_batches == 0:
        raise DataError(f"minibatch CKA got fewer than 4 rows in total (batch_size={config.batch_size})")
    mean = {key: v / n_batches for key, v in sums.items()}
    return {(i, j): _ratio(mean[(i, j)], mean[(i, i)], mean[(j, j)]) for i, j in pairs}, n
