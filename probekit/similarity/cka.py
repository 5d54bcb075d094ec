"""Centred kernel alignment (CKA): linear, RBF, debiased, and minibatch.

Kornblith, Norouzi, Lee & Hinton, "Similarity of Neural Network Representations Revisited",
ICML 2019 (arXiv 1905.00414); debiased CKA: Nguyen, Raghu & Kornblith 2021 (arXiv 2010.15327)
with the unbiased HSIC estimator of Song et al., JMLR 2012. Guide: docs/similarity.md.

``CKA(K, L) = HSIC(K, L) / sqrt(HSIC(K, K) HSIC(L, L))`` for Gram matrices ``K`` of ``X`` and
``L`` of ``Y`` over the same ``n`` stimuli. Linear CKA has the feature-space form
``||Yc^T Xc||_F^2 / (||Xc^T Xc||_F ||Yc^T Yc||_F)`` (``O(n d^2)``); :func:`cka` picks it or the
Gram form (``O(n^2 d)``), whichever is cheaper.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from jaxtyping import Float
from torch import Tensor

from probekit.errors import ConfigError, DataError

from ..shapes import shape_checked
from ._validation import as_pair, check_choice, check_not_constant

__all__ = [
    "MinibatchCKA",
    "centre",
    "centre_gram",
    "cka",
    "hsic",
    "debias_dot",
    "linear_cka_from_moments",
    "linear_gram",
    "minibatch_cka",
    "rbf_gram",
]

DEFAULT_BANDWIDTH = 0.8  # Kornblith et al. try 0.2, 0.4, 0.8 x the median distance


def centre(X: Float[Tensor, "n d"]) -> Float[Tensor, "n d"]:
    """Subtract the column means: ``Xc = X - 1 mean(X)``."""
    return X - X.mean(0, keepdim=True)


@shape_checked
def linear_gram(X: Float[Tensor, "n d"]) -> Float[Tensor, "n n"]:
    """Linear kernel ``K = X X^T``."""
    if X.ndim != 2:
        raise DataError(f"X has shape {tuple(X.shape)}; expected a representation (n_stimuli, d): "
                        "add a feature axis with X[:, None]")
    return X @ X.T


def _sq_distances(X: Float[Tensor, "n d"]) -> Float[Tensor, "n n"]:
    Xc = centre(X)  # distances are shift-invariant; centring reduces cancellation
    sq = (Xc * Xc).sum(1)
    d2 = (sq[:, None] + sq[None, :] - 2.0 * (Xc @ Xc.T)).clamp_min(0.0)
    d2.fill_diagonal_(0.0)
    return d2


@shape_checked
def rbf_gram(X: Float[Tensor, "n d"], bandwidth: float = DEFAULT_BANDWIDTH) -> Float[Tensor, "n n"]:
    """RBF kernel ``K_ij = exp(-||x_i - x_j||^2 / (2 sigma^2))``, ``sigma = bandwidth * median dist``.

    The median is over the ``n(n-1)/2`` distinct pairs (Kornblith et al.'s code also counts the
    zero diagonal; with ``n`` in the hundreds the two differ negligibly).
    """
    if not bandwidth > 0:
        raise ConfigError(f"bandwidth={bandwidth} must be > 0 (a fraction of the median distance, e.g. 0.8)")
    d2 = _sq_distances(X)
    n = d2.shape[0]
    iu = torch.triu_indices(n, n, 1)
    med = float(np.median(d2[iu[0], iu[1]].cpu().numpy()))
    if med <= 0.0:
        raise DataError(
            f"the median pairwise distance of a ({n}, {X.shape[1]}) representation is 0 (most "
            "stimuli are identical), so the RBF bandwidth is undefined; deduplicate the stimuli "
            "or use kernel='linear'"
        )
    return torch.exp(-d2 / (2.0 * bandwidth**2 * med))


@shape_checked
def centre_gram(K: Float[Tensor, "n n"]) -> Float[Tensor, "n n"]:
    """Double-centred Gram matrix ``H K H`` with ``H = I - 11^T / n``."""
    return K - K.mean(0, keepdim=True) - K.mean(1, keepdim=True) + K.mean()


def _hsic_u(K: Tensor, L: Tensor) -> float:
    n = K.shape[0]
    Kt, Lt = K.clone(), L.clone()
    Kt.fill_diagonal_(0.0)
    Lt.fill_diagonal_(0.0)
    val = (
        (Kt * Lt).sum()
        + Kt.sum() * Lt.sum() / ((n - 1) * (n - 2))
        - 2.0 / (n - 2) * (Kt.sum(0) @ Lt.sum(1))
    )
    return float(val) / (n * (n - 3))


@shape_checked
def hsic(K: Float[Tensor, "n n"], L: Float[Tensor, "n n"], *, debiased: bool = False) -> float:
    """Hilbert-Schmidt independence criterion of two Gram matrices.

    Biased: ``tr(K H L H) / (n-1)^2`` (Gretton et al. 2005). Debiased (Song et al. 2012, zeroed
    diagonals ``K~``, ``L~``): ``[tr(K~L~) + (1^T K~ 1)(1^T L~ 1)/((n-1)(n-2))
    - 2/(n-2) 1^T K~ L~ 1] / (n(n-3))``; needs ``n > 3``.
    """
    n = K.shape[0]
    if debiased:
        if n < 4:
            raise DataError(f"debiased HSIC needs n >= 4 stimuli, got Gram matrices of shape {tuple(K.shape)}")
        return _hsic_u(K, L)
    return float((centre_gram(K) * centre_gram(L)).sum()) / (n - 1) ** 2


def debias_dot(dot: float, ssr_dot: float, tr_x: float, tr_y: float, n: int) -> float:
    """``n(n-3) HSIC_u`` of linear kernels from feature-space terms of centred inputs.

    With ``K = Xc Xc^T``, ``dot = ||Xc^T Yc||_F^2``, ``ssr`` the squared row norms,
    ``ssr_dot = ssr_x . ssr_y`` and ``tr_x = sum(ssr_x) = ||Xc||_F^2``: ``tr(K~L~) = dot - ssr_dot``,
    ``1^T K~ 1 = -tr_x`` and ``1^T K~ L~ 1 = ssr_dot``, so the unbiased HSIC numerator is
    ``dot - n/(n-2) ssr_dot + tr_x tr_y / ((n-1)(n-2))`` (as in Kornblith et al.'s notebook).
    """
    return dot - n / (n - 2) * ssr_dot + tr_x * tr_y / ((n - 1) * (n - 2))


def linear_cka_from_moments(
    cross_sq: float, self_sq_x: float, self_sq_y: float, *, debiased: bool = False,
    ssr: tuple[float, float, float] | None = None, tr: tuple[float, float] | None = None, n: int = 0,
) -> float:
    """Linear CKA from second moments of centred inputs (no access to the rows needed).

    ``cross_sq = ||Xc^T Yc||_F^2``, ``self_sq_x = ||Xc^T Xc||_F^2``, ``self_sq_y = ||Yc^T Yc||_F^2``;
    debiased also needs ``ssr = (ssr_x.ssr_y, ssr_x.ssr_x, ssr_y.ssr_y)``, ``tr = (||Xc||_F^2,
    ||Yc||_F^2)`` and ``n`` (see :func:`debias_dot`).
    """
    if not debiased:
        return _ratio(cross_sq, self_sq_x, self_sq_y)
    if ssr is None or tr is None or n < 4:
        raise ConfigError("debiased linear CKA from moments needs ssr, tr and n >= 4")
    return _ratio(
        debias_dot(cross_sq, ssr[0], tr[0], tr[1], n),
        debias_dot(self_sq_x, ssr[1], tr[0], tr[0], n),
        debias_dot(self_sq_y, ssr[2], tr[1], tr[1], n),
    )


def _ratio(xy: float, xx: float, yy: float) -> float:
    if not (xx > 0 and yy > 0):
        raise DataError(
            f"self-similarity HSIC(X, X)={xx:.3g}, HSIC(Y, Y)={yy:.3g} is not positive, so CKA is "
            "undefined; with debiased=True this happens when n is tiny: pass more stimuli"
        )
    return float(xy / math.sqrt(xx * yy))


def _linear_feature(Xc: Tensor, Yc: Tensor, debiased: bool) -> float:
    n = Xc.shape[0]
    xy = float((Xc.T @ Yc).square().sum())
    xx = float((Xc.T @ Xc).square().sum())
    yy = float((Yc.T @ Yc).square().sum())
    if not debiased:
        return _ratio(xy, xx, yy)
    sx, sy = Xc.square().sum(1), Yc.square().sum(1)
    ssr = (float(sx @ sy), float(sx @ sx), float(sy @ sy))
    return linear_cka_from_moments(xy, xx, yy, debiased=True, ssr=ssr, tr=(float(sx.sum()), float(sy.sum())), n=n)


def _gram_cka(K: Tensor, L: Tensor, debiased: bool) -> float:
    return _ratio(hsic(K, L, debiased=debiased), hsic(K, K, debiased=debiased), hsic(L, L, debiased=debiased))


def _gram(Xc: Tensor, kernel: str, bandwidth: float) -> Tensor:
    return linear_gram(Xc) if kernel == "linear" else rbf_gram(Xc, bandwidth)


@shape_checked
def cka(
    X: Float[Tensor, "n1 d1"] | Float[np.ndarray, "n1 d1"],
    Y: Float[Tensor, "n2 d2"] | Float[np.ndarray, "n2 d2"],
    kernel: str = "linear",
    debiased: bool = False,
    *,
    bandwidth: float = DEFAULT_BANDWIDTH,
    space: str = "auto",
) -> float:
    """CKA between two representations of the same ``n`` stimuli (rows aligned), in ``[0, 1]``.

    Args:
        X: ``(n, d1)`` representation (computed in float64).
        Y: ``(n, d2)`` representation of the same stimuli.
        kernel: ``"linear"`` or ``"rbf"`` (bandwidth ``sigma = bandwidth * median distance``).
        debiased: use the unbiased HSIC estimator (Nguyen et al. 2021); near 0 for independent
            data even when ``d >> n``, and can be slightly negative.
        bandwidth: RBF bandwidth as a fraction of the median pairwise distance.
        space: ``"feature"`` (``d x d``, linear only), ``"gram"`` (``n x n``) or ``"auto"``
            (the cheaper of the two for the linear kernel).

    Invariant to orthogonal transforms and isotropic scaling of either input, not to general
    invertible linear maps. For ``n`` too large for ``n x n`` Grams with the RBF kernel use
    :func:`minibatch_cka`.
    """
    check_choice(kernel, ("linear", "rbf"), name="kernel")
    check_choice(space, ("auto", "feature", "gram"), name="space")
    Xt, Yt = as_pair(X, Y, min_n=4 if debiased else 3)
    Xc, Yc = centre(Xt), centre(Yt)
    check_not_constant(Xt, Xc, name="X")
    check_not_constant(Yt, Yc, name="Y")
    n, dx, dy = Xc.shape[0], Xc.shape[1], Yc.shape[1]
    if kernel == "rbf":
        if space == "feature":
            raise ConfigError("space='feature' needs kernel='linear'; the RBF kernel only has a Gram form")
        return _gram_cka(rbf_gram(Xc, bandwidth), rbf_gram(Yc, bandwidth), debiased)
    if space == "auto":
        space = "feature" if n * (dx * dx + dy * dy + dx * dy) <= n * n * (dx + dy + 3) else "gram"
    if space == "feature":
        return _linear_feature(Xc, Yc, debiased)
    return _gram_cka(linear_gram(Xc), linear_gram(Yc), debiased)


class MinibatchCKA:
    """Minibatch CKA (Nguyen, Raghu & Kornblith 2021, sec. 3.1), accumulated batch by batch.

    Each :meth:`update` adds the unbiased HSIC of one minibatch for the three terms
    ``(X, Y)``, ``(X, X)``, ``(Y, Y)``; :meth:`value` returns
    ``mean HSIC_u(K_b, L_b) / sqrt(mean HSIC_u(K_b, K_b) mean HSIC_u(L_b, L_b))``. Memory is one
    ``batch x batch`` Gram per input, whatever the total ``n``.

    Example:
        >>> acc = MinibatchCKA()
        >>> for xb, yb in batches:        # e.g. zip of two stores' iter_shards(site)
        ...     acc.update(xb, yb)
        >>> acc.value()
    """

    def __init__(self, *, kernel: str = "linear", bandwidth: float = DEFAULT_BANDWIDTH) -> None:
        """Start an empty accumulator for ``kernel`` (``"linear"`` or ``"rbf"``)."""
        check_choice(kernel, ("linear", "rbf"), name="kernel")
        self.kernel = kernel
        self.bandwidth = bandwidth
        self.n_batches = 0
        self.n_seen = 0
        self._sums = [0.0, 0.0, 0.0]

    def update(
        self,
        X: Float[Tensor, "b1 d1"] | Float[np.ndarray, "b1 d1"],
        Y: Float[Tensor, "b2 d2"] | Float[np.ndarray, "b2 d2"],
    ) -> MinibatchCKA:
        """Add one minibatch (``b >= 4`` aligned rows of ``X`` and ``Y``); returns ``self``."""
        Xb, Yb = as_pair(X, Y, min_n=4)
        K = _gram(centre(Xb), self.kernel, self.bandwidth)
        L = _gram(centre(Yb), self.kernel, self.bandwidth)
        for i, (a, b) in enumerate(((K, L), (K, K), (L, L))):
            self._sums[i] += _hsic_u(a, b)
        self.n_batches += 1
        self.n_seen += Xb.shape[0]
        return self

    def value(self) -> float:
        """The minibatch CKA estimate over all batches seen so far."""
        if self.n_batches == 0:
            raise DataError("MinibatchCKA has seen no batches; call update(X_batch, Y_batch) first")
        xy, xx, yy = (s / self.n_batches for s in self._sums)
        return _ratio(xy, xx, yy)


@shape_checked
def minibatch_cka(
    X: Float[Tensor, "n1 d1"] | Float[np.ndarray, "n1 d1"],
    Y: Float[Tensor, "n2 d2"] | Float[np.ndarray, "n2 d2"],
    *,
    batch_size: int = 1024,
    kernel: str = "linear",
    bandwidth: float = DEFAULT_BANDWIDTH,
    random_state: int | None = 0,
) -> float:
    """Minibatch CKA over a random partition of the stimuli into near-equal batches.

    Splits a seeded permutation of the ``n`` rows into ``ceil(n / batch_size)`` batches and
    averages the unbiased HSIC terms (:class:`MinibatchCKA`). Estimates the same population
    quantity as ``cka(X, Y, debiased=True)``; with ``batch_size >= n`` it equals it exactly.
    """
    if batch_size < 4:
        raise ConfigError(f"batch_size={batch_size} must be >= 4 (the unbiased HSIC needs n > 3)")
    Xt, Yt = as_pair(X, Y, min_n=4)
    check_not_constant(Xt, centre(Xt), name="X")
    check_not_constant(Yt, centre(Yt), name="Y")
    n = Xt.shape[0]
    perm = np.random.default_rng(random_state).permutation(n)
    acc = MinibatchCKA(kernel=kernel, bandwidth=bandwidth)
    for idx in np.array_split(perm, math.ceil(n / batch_size)):
        acc.update(Xt[idx], Yt[idx])
    return acc.value()
