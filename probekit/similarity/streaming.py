"""Streaming representations: aligned row blocks, per-layer statistics prepared once.

The engine the similarity measures (:mod:`probekit.similarity.measures`) compute from: a
representation is an in-memory ``(n, d)`` tensor or array, or a :class:`StreamedRep` read
chunk by chunk (e.g. an activation store's shards, :func:`store_reps`). Representations are
read in aligned row blocks (:func:`aligned`), so that every layer sees the same stimuli in the
same order; :func:`moments` accumulates the centred cross-products ``C_ij = Xc_i^T Xc_j`` of
the pairs needed in two passes with memory bounded by the ``d_i x d_j`` accumulators;
:func:`load_centred` holds the centred layers in memory for the measures that need them
whole; :func:`batches` cuts the aligned rows into minibatches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch
from torch import Tensor

from probekit.errors import DataError
from probekit.progress import track

from ._validation import as_rep, check_finite
from .cka import centre

if TYPE_CHECKING:
    from probekit.store import ActivationStore

__all__ = [
    "Moments",
    "Rep",
    "StreamedRep",
    "aligned",
    "batches",
    "choose_space",
    "hsic_u_terms",
    "iter_chunks",
    "load_centred",
    "moments",
    "rep_label",
    "rep_shape",
    "store_reps",
    "u_terms",
]


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


def rep_label(rep: Rep, i: int) -> str:
    """The default label of representation ``i``: a streamed one's own, else its index."""
    return rep.label if isinstance(rep, StreamedRep) else str(i)


def iter_chunks(rep: Rep, chunk_size: int) -> Iterator[Tensor]:
    """The rows of ``rep`` in blocks (a streamed one's own chunks, else ``chunk_size`` rows)."""
    if isinstance(rep, StreamedRep):
        yield from rep.chunks()
        return
    t = rep if isinstance(rep, Tensor) else torch.as_tensor(np.asarray(rep))
    if t.ndim != 2:
        raise DataError(f"a layer representation has shape {tuple(t.shape)}; expected (n_stimuli, d)")
    yield from t.split(chunk_size)


def aligned(reps: Sequence[Rep], labels: Sequence[str], chunk_size: int) -> Iterator[list[Tensor]]:
    """Yield lists of equal-length row blocks, one per representation (re-chunking as needed)."""
    its = [iter_chunks(r, chunk_size) for r in reps]
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
class Moments:
    """The statistics of :func:`moments`: ``n`` rows, centred cross-products, row-norm products."""

    n: int
    cross: dict[tuple[int, int], Tensor]  # centred X_i^T X_j
    ssr: Tensor  # (R, R): inner products of the per-row squared norms of the centred rows


def moments(
    reps: Sequence[Rep], labels: Sequence[str], pairs: Sequence[tuple[int, int]], chunk_size: int,
    dtype: torch.dtype,
) -> Moments:
    """Two passes: the column means, then ``C_ij = Xc_i^T Xc_j`` of ``pairs`` (products in ``dtype``).

    Also accumulates ``ssr[i, j] = sum_r ||xc_ir||^2 ||xc_jr||^2`` (the row squared norms'
    inner products) that debiased linear CKA needs. Memory: the ``d_i x d_j`` accumulators.
    """
    R = len(reps)
    sums: list[Tensor | None] = [None] * R
    n = 0
    for block in aligned(reps, labels, chunk_size):
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
    for block in track(aligned(reps, labels, chunk_size), desc="layer similarity", unit="example",
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
    return Moments(n=n, cross=cross, ssr=ssr)


def u_terms(K: Tensor) -> tuple[Tensor, Tensor, float]:
    """``(K~, K~ 1, 1^T K~ 1)`` with the diagonal zeroed (Song et al. 2012), in place."""
    K.fill_diagonal_(0.0)
    return K, K.sum(1), float(K.sum())


def hsic_u_terms(a: tuple[Tensor, Tensor, float], b: tuple[Tensor, Tensor, float], n: int) -> float:
    """Unbiased HSIC from :func:`u_terms` of two Grams (the formula of :func:`~.cka.hsic`)."""
    (Ka, ra, sa), (Kb, rb, sb) = a, b
    val = float((Ka * Kb).sum()) + sa * sb / ((n - 1) * (n - 2)) - 2.0 / (n - 2) * float(ra @ rb)
    return val / (n * (n - 3))


def rep_shape(rep: Rep, chunk_size: int) -> tuple[int, int]:
    """``(rows, width)`` of a representation (store shards: from their headers, no data read)."""
    if not isinstance(rep, StreamedRep):
        t = rep if isinstance(rep, Tensor) else np.asarray(rep)
        return int(t.shape[0]), int(t.shape[1]) if len(t.shape) == 2 else -1
    n, d = 0, -1
    for c in iter_chunks(rep, chunk_size):
        n += int(c.shape[0])
        d = int(c.shape[1]) if c.ndim == 2 else -1
    return n, d


def load_centred(reps: Sequence[Rep], labels: Sequence[str], used: Sequence[int], chunk_size: int) -> dict[int, Tensor]:
    """The centred float64 ``(n, d)`` representations ``used`` (by index), all in memory."""
    X = {}
    for k in used:
        parts = [c.to(torch.float64) for c in iter_chunks(reps[k], chunk_size)]
        X[k] = centre(as_rep(torch.cat(parts), name=f"representation {labels[k]!r}", min_n=4))
    ns = {labels[k]: x.shape[0] for k, x in X.items()}
    if len(set(ns.values())) > 1:
        raise DataError(f"the representations have different row counts {ns}; pass the same stimuli to all")
    return X


def batches(reps: Sequence[Rep], labels: Sequence[str], size: int, chunk: int) -> Iterator[list[Tensor]]:
    """Consecutive batches of exactly ``size`` aligned rows (a last one of >= 4 rows kept)."""
    held: list[list[Tensor]] = [[] for _ in reps]
    have = 0
    for block in aligned(reps, labels, chunk):
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


def choose_space(reps: Sequence[Rep], need: Sequence[tuple[int, int]], chunk_size: int) -> str:
    """``"gram"`` when ``layers * n^2`` is below the summed ``d_i d_j`` of the pairs, else ``"feature"``.

    Shapes come from the tensors or the store shards' headers (no data is read).
    """
    shapes = {k: rep_shape(reps[k], chunk_size) for k in {k for p in need for k in p}}
    n = max(s[0] for s in shapes.values())
    feature = sum(shapes[i][1] * shapes[j][1] for i, j in need)
    return "gram" if n * n * len(shapes) < feature else "feature"
