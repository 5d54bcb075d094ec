"""Layer x layer similarity: within a model, between models, across checkpoints and seeds.

All layer pairs are computed at once from statistics prepared once per layer, never by
calling a pairwise measure on raw activations ``L^2`` times:

* linear CKA and Procrustes (the default, streamable): one pass for the column means, one pass
  accumulating the centred cross-products ``C_ij = Xc_i^T Xc_j`` (``d_i x d_j``) for the pairs
  needed, plus the squared row norms' inner products for debiased CKA. Inputs are read chunk
  by chunk (in-memory tensors, or an activation store's shards via :func:`store_reps`), so
  memory is bounded by the ``d x d`` accumulators, not by ``n``. Linear CKA is
  ``||C_ij||_F^2 / (||C_ii||_F ||C_jj||_F)``; the angular Procrustes distance is
  ``arccos(||C_ij||_* / sqrt(tr C_ii tr C_jj))``.
  When ``n`` is small against the widths (``layers * n^2 < sum d_i d_j``), the same two
  measures use one ``n x n`` Gram (CKA) or SVD factor ``U S`` (Procrustes) per layer instead.
* RBF CKA: one centred ``n x n`` Gram per layer (``n <= max_gram_n``).
* SVCCA / PWCCA: one truncated principal basis per layer, then ``svd(Qx_i^T Qx_j)`` per pair.
* minibatch CKA (``batch_size``, Nguyen et al. 2021): one ``batch x batch`` Gram per layer and
  batch, unbiased HSIC of every pair, streamed for either kernel.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from probekit.errors import ConfigError, DataError
from probekit.progress import track

from ._validation import as_rep, check_choice, check_finite
from .cka import (
    DEFAULT_BANDWIDTH,
    _hsic_u,
    _ratio,
    centre,
    centre_gram,
    linear_cka_from_moments,
    linear_gram,
    rbf_gram,
)
from .results import CheckpointDrift, LayerSimilarity, PopulationSimilarity
from .shape import _basis

if TYPE_CHECKING:
    from probekit.store import ActivationStore

__all__ = [
    "CheckpointDrift",
    "LayerSimilarity",
    "PopulationSimilarity",
    "StreamedRep",
    "checkpoint_drift",
    "layer_similarity",
    "seed_similarity",
    "store_reps",
]

MEASURES = ("cka", "procrustes", "svcca", "pwcca")


@dataclass(frozen=True)
class StreamedRep:
    """A representation ``(n, d)`` read chunk by chunk (e.g. one site of an activation store).

    ``chunks`` is called once per pass and must yield the rows in the same order each time.
    """

    chunks: Callable[[], Iterable[Tensor]]
    label: str


Rep = Tensor | np.ndarray | StreamedRep


def store_reps(store: ActivationStore, sites: Sequence[Any] | None = None) -> list[StreamedRep]:
    """One :class:`StreamedRep` per site of an :class:`~probekit.store.ActivationStore`.

    Rows stream shard by shard from the memory-mapped files, so layer similarity over a store
    never holds a whole site in memory.
    """
    chosen = list(sites) if sites is not None else list(store.sites)
    return [
        StreamedRep(chunks=lambda s=s: store.iter_shards(s), label=getattr(s, "name", str(s)))
        for s in chosen
    ]


def _label(rep: Rep, i: int) -> str:
    return rep.label if isinstance(rep, StreamedRep) else str(i)


def _iter_chunks(rep: Rep, chunk_size: int) -> Iterator[Tensor]:
    if isinstance(rep, StreamedRep):
        yield from rep.chunks()
        return
    t = rep if isinstance(rep, Tensor) else torch.as_tensor(np.asarray(rep))
    if t.ndim != 2:
        raise DataError(f"a layer representation has shape {tuple(t.shape)}; expected (n_stimuli, d)")
    yield from t.split(chunk_size)


def _aligned(reps: Sequence[Rep], labels: Sequence[str], chunk_size: int) -> Iterator[list[Tensor]]:
    """Yield lists of equal-length row blocks, one per representation (re-chunking as needed)."""
    its = [_iter_chunks(r, chunk_size) for r in reps]
    pending: list[Tensor | None] = [None] * len(reps)
    done = [False] * len(reps)
    seen = [0] * len(reps)
    while True:
        for k, it in enumerate(its):
            while not done[k] and (pending[k] is None or pending[k].shape[0] == 0):
                try:
                    pending[k] = next(it)
                except StopIteration:
                    done[k] = True
                    pending[k] = None
        live = [p for p in pending if p is not None]
        if not live:
            return
        if len(live) < len(reps):
            counts = {labels[k]: seen[k] + (0 if pending[k] is None else pending[k].shape[0]) for k in range(len(reps))}
            raise DataError(
                f"the representations have different row counts (at least {counts}); every layer, "
                "model and checkpoint must hold the same stimuli in the same order"
            )
        m = min(p.shape[0] for p in live)
        out = []
        for k in range(len(reps)):
            p = pending[k]
            if p.ndim != 2:
                raise DataError(f"representation {labels[k]!r} yields rows of shape {tuple(p.shape[1:])}; expected (rows, d)")
            out.append(p[:m])
            pending[k] = p[m:]
            seen[k] += m
        yield out


@dataclass
class _Moments:
    n: int
    cross: dict[tuple[int, int], Tensor]  # centred X_i^T X_j
    ssr: Tensor  # (R, R): inner products of the per-row squared norms of the centred rows


def _moments(
    reps: Sequence[Rep], labels: Sequence[str], pairs: Sequence[tuple[int, int]], chunk_size: int,
    dtype: torch.dtype,
) -> _Moments:
    R = len(reps)
    sums: list[Tensor | None] = [None] * R
    n = 0
    for block in _aligned(reps, labels, chunk_size):
        for k, b in enumerate(block):
            b64 = b.to(torch.float64)
            check_finite(b64, name=f"representation {labels[k]!r}")
            s = b64.sum(0)
            sums[k] = s if sums[k] is None else sums[k] + s
        n += block[0].shape[0]
    if n < 4:
        raise DataError(f"layer similarity needs n >= 4 stimuli, got {n}")
    means = [s / n for s in sums]
    cross: dict[tuple[int, int], Tensor] = {}
    ssr = torch.zeros(R, R, dtype=torch.float64)
    for block in track(_aligned(reps, labels, chunk_size), desc="layer similarity", unit="example",
                       total=n, weight=lambda b: b[0].shape[0]):  # the second (slow) pass
        cs = [(b.to(torch.float64) - means[k]).to(dtype) for k, b in enumerate(block)]
        for i, j in pairs:
            prod = (cs[i].T @ cs[j]).to(torch.float64)
            if (i, j) in cross:
                cross[(i, j)] += prod
            else:
                cross[(i, j)] = prod
        sq = torch.stack([c.to(torch.float64).square().sum(1) for c in cs], 1)  # (rows, R)
        ssr += sq.T @ sq
    return _Moments(n=n, cross=cross, ssr=ssr)


def _moment_values(
    m: _Moments, pairs: Sequence[tuple[int, int]], measure: str, debiased: bool,
    labels: Sequence[str],
) -> dict[tuple[int, int], float]:
    tr = {i: float(torch.trace(m.cross[(i, i)])) for i, j in m.cross if i == j}
    sq = {key: float(c.square().sum()) for key, c in m.cross.items()}
    for i, t in tr.items():
        if t <= 0:
            raise DataError(
                f"representation {labels[i]!r} is constant over all {m.n} stimuli (every feature "
                "takes one value, e.g. the embedding of a fixed token at a fixed position), so "
                "its similarity is undefined; leave that site out"
            )
    out = {}
    for i, j in pairs:
        if measure == "procrustes":
            cos = float(torch.linalg.svdvals(m.cross[(i, j)]).sum()) / math.sqrt(tr[i] * tr[j])
            out[(i, j)] = math.acos(min(1.0, max(-1.0, cos)))
        else:
            ssr = (float(m.ssr[i, j]), float(m.ssr[i, i]), float(m.ssr[j, j]))
            out[(i, j)] = linear_cka_from_moments(
                sq[(i, j)], sq[(i, i)], sq[(j, j)], debiased=debiased, ssr=ssr, tr=(tr[i], tr[j]), n=m.n
            )
    return out


def _memory_values(
    reps: Sequence[Rep], labels: Sequence[str], pairs: Sequence[tuple[int, int]], measure: str,
    kernel: str, debiased: bool, bandwidth: float, keep: Any, max_gram_n: int, chunk_size: int,
) -> tuple[dict[tuple[int, int], float], int]:
    used = sorted({k for p in pairs for k in p})
    X = _load_centred(reps, labels, used, chunk_size)
    out: dict[tuple[int, int], float] = {}
    n = next(iter(X.values())).shape[0]
    if measure == "cka":  # RBF kernel: one centred (or raw, for debiased) Gram per layer
        if n > max_gram_n:
            raise ConfigError(
                f"kernel='rbf' needs an n x n Gram per layer and n={n} > max_gram_n={max_gram_n}; "
                "use kernel='linear' (streams in feature space), subsample, or raise max_gram_n"
            )
        G = {k: rbf_gram(x, bandwidth) for k, x in X.items()}
        if debiased:
            h = {k: _hsic_u(g, g) for k, g in G.items()}
            return {(i, j): _ratio(_hsic_u(G[i], G[j]), h[i], h[j]) for i, j in pairs}, n
        Gc = {k: centre_gram(g) for k, g in G.items()}
        h = {k: float(g.square().sum()) for k, g in Gc.items()}
        return {(i, j): _ratio(float((Gc[i] * Gc[j]).sum()), h[i], h[j]) for i, j in pairs}, n
    k_default = 0.99 if measure == "svcca" else None
    Q = {k: _basis(x, k_default if keep is None else keep, f"representation {labels[k]!r}") for k, x in X.items()}
    for i, j in track(pairs, desc=f"layer similarity ({measure})", unit="pair"):
        if measure == "svcca":
            out[(i, j)] = float(torch.linalg.svdvals(Q[i].T @ Q[j]).clamp(0.0, 1.0).mean())
        else:
            U, rho, _ = torch.linalg.svd(Q[i].T @ Q[j], full_matrices=False)
            alpha = ((Q[i] @ U).T @ X[i]).abs().sum(1)
            out[(i, j)] = float((alpha / alpha.sum() * rho.clamp(0.0, 1.0)).sum())
    return out, n


def _u_terms(K: Tensor) -> tuple[Tensor, Tensor, float]:
    """``(K~, K~ 1, 1^T K~ 1)`` with the diagonal zeroed (Song et al. 2012), in place."""
    K.fill_diagonal_(0.0)
    return K, K.sum(1), float(K.sum())


def _hsic_u_terms(a: tuple[Tensor, Tensor, float], b: tuple[Tensor, Tensor, float], n: int) -> float:
    """Unbiased HSIC from :func:`_u_terms` of two Grams (the formula of :func:`~.cka.hsic`)."""
    (Ka, ra, sa), (Kb, rb, sb) = a, b
    val = float((Ka * Kb).sum()) + sa * sb / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * float(ra @ rb)
    return val / (n * (n - 3))


def _shape(rep: Rep, chunk_size: int) -> tuple[int, int]:
    """``(rows, width)`` of a representation (store shards: from their headers, no data read)."""
    if not isinstance(rep, StreamedRep):
        t = rep if isinstance(rep, Tensor) else np.asarray(rep)
        return int(t.shape[0]), int(t.shape[1]) if len(t.shape) == 2 else -1
    n, d = 0, -1
    for c in _iter_chunks(rep, chunk_size):
        n += int(c.shape[0])
        d = int(c.shape[1]) if c.ndim == 2 else -1
    return n, d


def _load_centred(reps: Sequence[Rep], labels: Sequence[str], used: Sequence[int], chunk_size: int) -> dict[int, Tensor]:
    X = {}
    for k in used:
        parts = [c.to(torch.float64) for c in _iter_chunks(reps[k], chunk_size)]
        X[k] = centre(as_rep(torch.cat(parts), name=f"representation {labels[k]!r}", min_n=4))
    ns = {labels[k]: x.shape[0] for k, x in X.items()}
    if len(set(ns.values())) > 1:
        raise DataError(f"the representations have different row counts {ns}; pass the same stimuli to all")
    return X


def _gram_values(
    reps: Sequence[Rep], labels: Sequence[str], pairs: Sequence[tuple[int, int]], measure: str,
    debiased: bool, chunk_size: int,
) -> tuple[dict[tuple[int, int], float], int]:
    """Linear CKA / Procrustes in Gram space (``n x n`` per layer), cheaper when ``n < d``.

    CKA: ``<K_i, K_j>`` of centred Grams (or the unbiased HSIC of zero-diagonal Grams);
    Procrustes: ``||Xc_i^T Xc_j||_* = ||P_i^T P_j||_*`` with ``P = U S`` from each layer's SVD.
    """
    used = sorted({k for p in pairs for k in p})
    X = _load_centred(reps, labels, used, chunk_size)
    n = next(iter(X.values())).shape[0]
    for k, x in X.items():
        if float(x.square().sum()) <= 0.0:
            raise DataError(f"representation {labels[k]!r} is constant over all {n} stimuli, so its "
                            "similarity is undefined; leave that site out")
    if measure == "procrustes":
        P, tr = {}, {}
        for k, x in X.items():
            U, S, _ = torch.linalg.svd(x, full_matrices=False)
            P[k], tr[k] = U * S, float(S.square().sum())
        return {(i, j): math.acos(min(1.0, max(-1.0, float(torch.linalg.svdvals(P[i].T @ P[j]).sum())
                                               / math.sqrt(tr[i] * tr[j])))) for i, j in pairs}, n
    G = {k: linear_gram(x) for k, x in X.items()}
    if debiased:
        T = {k: _u_terms(g) for k, g in G.items()}
        h = {k: _hsic_u_terms(t, t, n) for k, t in T.items()}
        return {(i, j): _ratio(_hsic_u_terms(T[i], T[j], n), h[i], h[j]) for i, j in pairs}, n
    h = {k: float(g.square().sum()) for k, g in G.items()}
    return {(i, j): _ratio(float((G[i] * G[j]).sum()), h[i], h[j]) for i, j in pairs}, n


def _batches(reps: Sequence[Rep], labels: Sequence[str], size: int, chunk: int) -> Iterator[list[Tensor]]:
    """Consecutive batches of exactly ``size`` aligned rows (a last one of >= 4 rows kept)."""
    held: list[list[Tensor]] = [[] for _ in reps]
    have = 0
    for block in _aligned(reps, labels, chunk):
        for k, b in enumerate(block):
            held[k].append(b)
        have += block[0].shape[0]
        while have >= size:
            cat = [torch.cat(h) for h in held]
            yield [c[:size] for c in cat]
            held = [[c[size:]] for c in cat]
            have -= size
    if have >= 4:
        yield [torch.cat(h) for h in held]


def _minibatch_values(
    reps: Sequence[Rep], labels: Sequence[str], pairs: Sequence[tuple[int, int]], kernel: str,
    bandwidth: float, batch_size: int, chunk_size: int,
) -> tuple[dict[tuple[int, int], float], int]:
    """Minibatch CKA (Nguyen et al. 2021) of every pair, batch by batch.

    Per batch one Gram per layer and the unbiased HSIC of each needed pair; averaged over
    batches, then the CKA ratio.
    """
    used = sorted({k for p in pairs for k in p})
    need = sorted(set(pairs) | {(k, k) for k in used})
    sums = dict.fromkeys(need, 0.0)
    n, n_batches = 0, 0
    for batch in track(_batches(reps, labels, batch_size, chunk_size), desc="minibatch CKA",
                       unit="example", weight=lambda b: b[0].shape[0]):
        b = batch[0].shape[0]
        terms = {}
        for k in used:
            x = batch[k].to(torch.float64)
            check_finite(x, name=f"representation {labels[k]!r}")
            terms[k] = _u_terms(linear_gram(centre(x)) if kernel == "linear" else rbf_gram(x, bandwidth))
        for i, j in need:
            sums[(i, j)] += _hsic_u_terms(terms[i], terms[j], b)
        n += b
        n_batches += 1
    if n_batches == 0:
        raise DataError(f"minibatch CKA got fewer than 4 rows in total (batch_size={batch_size})")
    mean = {key: v / n_batches for key, v in sums.items()}
    return {(i, j): _ratio(mean[(i, j)], mean[(i, i)], mean[(j, j)]) for i, j in pairs}, n


def _pair_values(
    reps: Sequence[Rep], labels: Sequence[str], pairs: Sequence[tuple[int, int]], *, measure: str,
    kernel: str, debiased: bool, bandwidth: float, keep: Any, chunk_size: int, dtype: torch.dtype,
    max_gram_n: int, batch_size: int | None = None, space: str = "auto",
) -> tuple[dict[tuple[int, int], float], int]:
    check_choice(measure, MEASURES, name="measure")
    check_choice(kernel, ("linear", "rbf"), name="kernel")
    if chunk_size < 1:
        raise ConfigError(f"chunk_size={chunk_size} must be >= 1 rows")
    if batch_size is not None:
        if measure != "cka" or batch_size < 4:
            raise ConfigError(
                f"batch_size={batch_size} (minibatch CKA) needs measure='cka' and batch_size >= 4, "
                f"got measure={measure!r}"
            )
        return _minibatch_values(reps, labels, pairs, kernel, bandwidth, batch_size, chunk_size)
    if measure in ("cka", "procrustes") and (kernel == "linear" or measure == "procrustes"):
        need = sorted(set(pairs) | {(k, k) for p in pairs for k in p})
        check_choice(space, ("auto", "feature", "gram"), name="space")
        if space == "auto":
            shapes = {k: _shape(reps[k], chunk_size) for k in {k for p in need for k in p}}
            n = max(s[0] for s in shapes.values())
            feature = sum(shapes[i][1] * shapes[j][1] for i, j in need)
            space = "gram" if n * n * len(shapes) < feature else "feature"
        if space == "gram":
            return _gram_values(reps, labels, pairs, measure, debiased, chunk_size)
        m = _moments(reps, labels, need, chunk_size, dtype)
        return _moment_values(m, pairs, measure, debiased, labels), m.n
    return _memory_values(reps, labels, pairs, measure, kernel, debiased, bandwidth, keep, max_gram_n, chunk_size)


def _measure_name(measure: str, kernel: str, debiased: bool, keep: Any, batch: int | None = None) -> str:
    if measure == "cka" and batch is not None:
        return f"minibatch {kernel} CKA (batch {batch})"
    if measure == "cka":
        return f"{'debiased ' if debiased else ''}{kernel} CKA"
    if measure == "procrustes":
        return "angular Procrustes distance (rad)"
    return f"{measure.upper()} (keep={keep})" if keep is not None else measure.upper()


def layer_similarity(
    reps_a: Sequence[Rep],
    reps_b: Sequence[Rep] | None = None,
    *,
    measure: str = "cka",
    kernel: str = "linear",
    debiased: bool = False,
    bandwidth: float = DEFAULT_BANDWIDTH,
    keep: int | float | None = None,
    labels_a: Sequence[str] | None = None,
    labels_b: Sequence[str] | None = None,
    chunk_size: int = 4096,
    dtype: torch.dtype = torch.float64,
    max_gram_n: int = 4096,
    batch_size: int | None = None,
    space: str = "auto",
) -> LayerSimilarity:
    """Layer x layer similarity within one model (``reps_b=None``) or between two models.

    Args:
        reps_a: one representation per layer, each ``(n, d_l)``: tensors, arrays or
            :class:`StreamedRep` (e.g. ``store_reps(ActivationStore(dir), sites)``).
        reps_b: the second model's layers (same stimuli, same order), or None for ``reps_a``
            against itself (symmetric; each pair computed once).
        measure: ``"cka"``, ``"procrustes"`` (angular distance), ``"svcca"`` or ``"pwcca"``.
        kernel: CKA kernel, ``"linear"`` (streams) or ``"rbf"`` (in memory, ``n <= max_gram_n``).
        debiased: CKA with the unbiased HSIC estimator (see :func:`~.cka.cka`).
        bandwidth: RBF bandwidth as a fraction of the median pairwise distance.
        keep: SVCCA/PWCCA truncation as in :func:`~.shape.cca_similarity`.
        labels_a: row labels (default: layer index, or the store site name).
        labels_b: column labels.
        chunk_size: rows per block when streaming in-memory inputs.
        dtype: dtype of the per-block products for linear CKA / Procrustes (accumulated in
            float64); ``torch.float32`` is ~2x faster at ~1e-6 relative error.
        max_gram_n: largest ``n`` for which the RBF kernel builds ``n x n`` Grams.
        batch_size: minibatch CKA (Nguyen et al. 2021; unbiased HSIC per batch of this many
            consecutive rows, averaged, then the ratio; ``debiased`` is implied): streams with
            ``batch x batch`` Grams for either kernel. Rows are taken in stream order, so
            shuffle stimuli that are sorted (e.g. by class) before capturing.
        space: linear CKA / Procrustes in ``"feature"`` space (``d_i x d_j`` cross-products,
            streamed), ``"gram"`` space (one ``n x n`` Gram or SVD factor per layer, in
            memory) or ``"auto"``: Gram when ``layers * n^2`` is below the summed ``d_i d_j``.

    Linear CKA and Procrustes stream (two passes) with memory ``O(sum_ij d_i d_j)``; the other
    measures hold every layer in memory.
    """
    A = list(reps_a)
    B = list(reps_b) if reps_b is not None else None
    if not A or (B is not None and not B):
        raise DataError("layer_similarity needs at least one layer in each model")
    la = tuple(labels_a) if labels_a is not None else tuple(_label(r, i) for i, r in enumerate(A))
    opts = dict(measure=measure, kernel=kernel, debiased=debiased, bandwidth=bandwidth, keep=keep,
                 chunk_size=chunk_size, dtype=dtype, max_gram_n=max_gram_n, batch_size=batch_size, space=space)
    if B is None:
        pairs = [(i, j) for i in range(len(A)) for j in range(i, len(A))]
        vals, n = _pair_values(A, la, pairs, **opts)
        M = np.empty((len(A), len(A)))
        for (i, j), v in vals.items():
            M[i, j] = v
            if measure != "pwcca":
                M[j, i] = v
        if measure == "pwcca":  # asymmetric: fill the lower triangle too
            low = [(j, i) for i, j in pairs if i != j]
            for (i, j), v in _pair_values(A, la, low, **opts)[0].items():
                M[i, j] = v
        return LayerSimilarity(values=M, labels_a=la, labels_b=la, measure=_measure_name(measure, kernel, debiased, keep, batch_size), n=n)
    lb = tuple(labels_b) if labels_b is not None else tuple(_label(r, i) for i, r in enumerate(B))
    off = len(A)
    pairs = [(i, off + j) for i in range(len(A)) for j in range(len(B))]
    vals, n = _pair_values(A + B, la + lb, pairs, **opts)
    M = np.array([[vals[(i, off + j)] for j in range(len(B))] for i in range(len(A))])
    return LayerSimilarity(values=M, labels_a=la, labels_b=lb, measure=_measure_name(measure, kernel, debiased, keep, batch_size), n=n)


def checkpoint_drift(
    reps: Sequence[Rep],
    *,
    labels: Sequence[str] | None = None,
    measure: str = "cka",
    kernel: str = "linear",
    debiased: bool = False,
    bandwidth: float = DEFAULT_BANDWIDTH,
    keep: int | float | None = None,
    chunk_size: int = 4096,
    dtype: torch.dtype = torch.float64,
    max_gram_n: int = 4096,
    batch_size: int | None = None,
    space: str = "auto",
) -> CheckpointDrift:
    """Similarity of each checkpoint's representation (one site) to the final and the previous.

    ``reps[t]`` is the ``(n, d)`` representation of the same stimuli at checkpoint ``t`` (in
    training order), e.g. ``store_reps(ActivationStore(f"acts/step{t}"), ["resid_post@0"])[0]``.
    A grokking run typically shows a plateau of high similarity to the previous checkpoint
    with low similarity to the final one, then a jump when the generalizing circuit forms.
    """
    R = list(reps)
    if len(R) < 2:
        raise DataError(f"checkpoint_drift needs at least 2 checkpoints, got {len(R)}")
    lab = tuple(labels) if labels is not None else tuple(_label(r, i) for i, r in enumerate(R))
    T = len(R) - 1
    pairs = sorted({(t, T) for t in range(T + 1)} | {(t - 1, t) for t in range(1, T + 1)})
    vals, n = _pair_values(R, lab, pairs, measure=measure, kernel=kernel, debiased=debiased,
                           bandwidth=bandwidth, keep=keep, chunk_size=chunk_size, dtype=dtype,
                           max_gram_n=max_gram_n, batch_size=batch_size, space=space)
    if (T, T) not in vals:  # self-similarity of the final checkpoint (1 for CKA, 0 for Procrustes)
        vals[(T, T)] = _pair_values(R, lab, [(T, T)], measure=measure, kernel=kernel, debiased=debiased,
                                    bandwidth=bandwidth, keep=keep, chunk_size=chunk_size, dtype=dtype,
                                    max_gram_n=max_gram_n, batch_size=batch_size, space=space)[0][(T, T)]
    return CheckpointDrift(
        labels=lab,
        to_final=np.array([vals[(t, T)] for t in range(T + 1)]),
        to_previous=np.array([math.nan] + [vals[(t - 1, t)] for t in range(1, T + 1)]),
        measure=_measure_name(measure, kernel, debiased, keep, batch_size),
        n=n,
    )


def seed_similarity(
    models: Sequence[Sequence[Rep]],
    *,
    measure: str = "cka",
    kernel: str = "linear",
    debiased: bool = False,
    bandwidth: float = DEFAULT_BANDWIDTH,
    keep: int | float | None = None,
    labels: Sequence[str] | None = None,
    chunk_size: int = 4096,
    dtype: torch.dtype = torch.float64,
    max_gram_n: int = 4096,
    batch_size: int | None = None,
    space: str = "auto",
) -> PopulationSimilarity:
    """Layer x layer similarity between every pair of models of a population, with its spread.

    ``models[s][l]`` is layer ``l`` of model (seed) ``s``; all models need the same number of
    layers and the same stimuli. Every cross-model layer pair of every model pair is computed
    in one streaming pass (per-layer statistics shared across pairs).
    """
    Ms = [list(m) for m in models]
    if len(Ms) < 2:
        raise DataError(f"seed_similarity needs at least 2 models, got {len(Ms)}")
    L = len(Ms[0])
    if any(len(m) != L for m in Ms):
        raise DataError(f"every model needs the same number of layers, got {[len(m) for m in Ms]}")
    lab = tuple(labels) if labels is not None else tuple(_label(r, i) for i, r in enumerate(Ms[0]))
    flat = [r for m in Ms for r in m]
    flat_labels = [f"model{s}/{lab[layer]}" for s in range(len(Ms)) for layer in range(L)]
    model_pairs = tuple(itertools.combinations(range(len(Ms)), 2))
    pairs = [(a * L + i, b * L + j) for a, b in model_pairs for i in range(L) for j in range(L)]
    vals, n = _pair_values(flat, flat_labels, pairs, measure=measure, kernel=kernel, debiased=debiased,
                           bandwidth=bandwidth, keep=keep, chunk_size=chunk_size, dtype=dtype,
                           max_gram_n=max_gram_n, batch_size=batch_size, space=space)
    V = np.array([[[vals[(a * L + i, b * L + j)] for j in range(L)] for i in range(L)] for a, b in model_pairs])
    std = V.std(0, ddof=1) if len(model_pairs) > 1 else np.full((L, L), math.nan)
    return PopulationSimilarity(values=V, mean=V.mean(0), std=std, pairs=model_pairs, labels=lab,
                                measure=_measure_name(measure, kernel, debiased, keep, batch_size), n=n)
