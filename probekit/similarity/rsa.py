"""Representational similarity analysis (Kriegeskorte, Mur & Bandettini 2008).

A representational dissimilarity matrix (RDM) holds the dissimilarity of every pair of
stimuli; two representations are compared through the upper triangles of their RDMs, so
they may have different widths (or come from brains and models alike). Comparisons follow
rsatoolbox (``rsatoolbox.rdm.compare``): ``"spearman"`` (Pearson on average ranks),
``"kendall_tau_a"`` (ties count against, rsatoolbox's ``"tau-a"``), ``"cosine"`` (uncentred).
Inference: a percentile bootstrap over stimuli and a permutation test over the stimulus labels
of one RDM (:func:`rsa_test`).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import torch
from jaxtyping import Float
from scipy import stats as sps
from torch import Tensor

from probekit import stats
from probekit.errors import DataError
from probekit.stats import StatTestResult
from probekit.stats.bootstrap import check_n_resamples
from probekit.stats.permutation import check_n_permutations

from ..shapes import shape_checked
from ._validation import as_rep, check_choice, check_finite

__all__ = ["compare_vectors", "rdm", "rsa", "rsa_test", "upper_triangle"]

METRICS = ("correlation", "cosine", "euclidean", "sqeuclidean")
METHODS = ("spearman", "kendall_tau_a", "cosine")


@shape_checked
def rdm(
    X: Float[Tensor, "n d"] | Float[np.ndarray, "n d"], metric: str = "correlation"
) -> Float[Tensor, "n n"]:
    """Pairwise dissimilarity of the ``n`` stimuli (rows) of ``X``; zero diagonal.

    ``"correlation"``: ``1 - r`` between stimulus patterns (rsatoolbox ``calc_rdm`` correlation);
    ``"cosine"``: ``1 - cos``; ``"euclidean"``: ``||x_i - x_j||`` (not squared);
    ``"sqeuclidean"``: ``||x_i - x_j||^2`` (rsatoolbox's ``"euclidean"`` divides this by ``d``).
    """
    check_choice(metric, METRICS, name="metric")
    Xt = as_rep(X, name="X", min_n=3)
    if metric in ("correlation", "cosine"):
        Z = Xt - Xt.mean(1, keepdim=True) if metric == "correlation" else Xt
        norms = Z.norm(dim=1)
        bad = norms <= 1e-12 * max(float(Xt.abs().max()), 1e-300)
        if bad.any():
            what = "constant across features" if metric == "correlation" else "all zeros"
            raise DataError(
                f"stimulus row {int(bad.nonzero()[0, 0])} of X (shape {tuple(Xt.shape)}) is {what}, "
                f"so its {metric} distance is undefined; drop it or use metric='euclidean'"
            )
        Z = Z / norms[:, None]
        D = 1.0 - Z @ Z.T
    else:
        Xc = Xt - Xt.mean(0, keepdim=True)
        sq = (Xc * Xc).sum(1)
        D = (sq[:, None] + sq[None, :] - 2.0 * (Xc @ Xc.T)).clamp_min(0.0)
        if metric == "euclidean":
            D = D.sqrt()
    D = 0.5 * (D + D.T)
    D.fill_diagonal_(0.0)
    return D


def upper_triangle(D: Float[Tensor, "n n"] | Float[np.ndarray, "n n"]) -> Float[np.ndarray, " pair"]:
    """The ``n(n-1)/2`` entries above the diagonal, row by row (rsatoolbox's vector order)."""
    A = D.detach().cpu().numpy() if isinstance(D, Tensor) else np.asarray(D)
    i, j = np.triu_indices(A.shape[0], 1)
    return A[i, j].astype(np.float64)


def _tau_a(a: np.ndarray, b: np.ndarray) -> float:
    """Kendall tau-a = ``(concordant - discordant) / (N(N-1)/2)``, from scipy's tau-b.

    ``tau_a = tau_b sqrt((N0 - T_a)(N0 - T_b)) / N0`` with ``N0 = N(N-1)/2`` and ``T`` the tied
    pairs within each vector.
    """
    n0 = a.size * (a.size - 1) / 2

    def ties(v: np.ndarray) -> float:
        _, c = np.unique(v, return_counts=True)
        return float((c * (c - 1) / 2).sum())

    ta, tb = ties(a), ties(b)
    if ta == n0 or tb == n0:
        return 0.0
    tau_b = sps.kendalltau(a, b, variant="b").statistic
    return float(tau_b * np.sqrt((n0 - ta) * (n0 - tb)) / n0)


def _cos(a: np.ndarray, b: np.ndarray) -> float:
    na, nb = np.linalg.norm(a), np.linalg.norm(b)
    return float(a @ b / (na * nb)) if na > 0 and nb > 0 else 0.0


def compare_vectors(a: Float[np.ndarray, " pair"], b: Float[np.ndarray, " pair"], method: str = "spearman") -> float:
    """Compare two vectors of pairwise dissimilarities with ``method`` (see :func:`rsa`)."""
    if method == "spearman":
        ra, rb = sps.rankdata(a), sps.rankdata(b)
        return _cos(ra - ra.mean(), rb - rb.mean())
    if method == "kendall_tau_a":
        return _tau_a(a, b)
    return _cos(a, b)


def _check_rdm(D: object, name: str) -> np.ndarray:
    A = D.detach().cpu().to(torch.float64).numpy() if isinstance(D, Tensor) else np.asarray(D, dtype=np.float64)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise DataError(f"{name} has shape {A.shape}; expected a square RDM (n, n): build it with rdm(X)")
    if A.shape[0] < 3:
        raise DataError(f"{name} has shape {A.shape}; RSA needs n >= 3 stimuli (3 pairs)")
    check_finite(torch.from_numpy(A), name=name)
    if not np.allclose(A, A.T, rtol=1e-6, atol=1e-9 * max(1.0, float(np.abs(A).max()))):
        raise DataError(f"{name} (shape {A.shape}) is not symmetric; expected an RDM D[i, j] == D[j, i]")
    return A


def _pair(rdm_a: object, rdm_b: object) -> tuple[np.ndarray, np.ndarray]:
    A, B = _check_rdm(rdm_a, "rdm_a"), _check_rdm(rdm_b, "rdm_b")
    if A.shape != B.shape:
        raise DataError(
            f"rdm_a has shape {A.shape} but rdm_b has shape {B.shape}; both RDMs must cover the "
            "same stimuli in the same order"
        )
    return A, B


@shape_checked
def rsa(
    rdm_a: Float[Tensor, "n1 n1"] | Float[np.ndarray, "n1 n1"],
    rdm_b: Float[Tensor, "n2 n2"] | Float[np.ndarray, "n2 n2"],
    method: str = "spearman",
) -> float:
    """Similarity of two RDMs over their upper triangles.

    ``"spearman"``: Pearson correlation of average ranks; ``"kendall_tau_a"``: Kendall's tau-a
    (ties count against, recommended when a model RDM predicts ties; Nili et al. 2014);
    ``"cosine"``: cosine of the raw dissimilarity vectors. Agrees with
    ``rsatoolbox.rdm.compare(..., method="spearman"|"tau-a"|"cosine")``.
    """
    check_choice(method, METHODS, name="method")
    A, B = _pair(rdm_a, rdm_b)
    return compare_vectors(upper_triangle(A), upper_triangle(B), method)


@shape_checked
def rsa_test(
    rdm_a: Float[Tensor, "n1 n1"] | Float[np.ndarray, "n1 n1"],
    rdm_b: Float[Tensor, "n2 n2"] | Float[np.ndarray, "n2 n2"],
    method: str = "spearman",
    *,
    n_bootstrap: int = 1000,
    n_permutations: int = 1000,
    confidence_level: float = 0.95,
    random_state: int | None = 0,
) -> StatTestResult:
    """RSA similarity with a stimulus-bootstrap CI and a label-permutation p-value.

    Bootstrap (Nili et al. 2014): resample the ``n`` stimuli with replacement, take both RDMs'
    rows and columns at the sample, and compare only pairs of distinct original stimuli
    (pairs of a stimulus with its own copy are dropped); percentile interval
    (``probekit.stats.percentile_interval``). Permutation: shuffle the stimulus labels of
    ``rdm_b`` (rows and columns together); ``p = (1 + #{null >= observed}) / (1 + n_perm)``
    (``probekit.stats.permutation_pvalue``, one-sided ``"greater"``). ``n_bootstrap=0`` skips
    the interval (NaN); otherwise it must be >= 1000.

    Returns:
        A :class:`~probekit.stats.StatTestResult` with the observed similarity as
        ``statistic``, the bootstrap CI in ``ci_low``/``ci_high``, the null in
        ``null_distribution`` and ``effect_size`` = ``(observed - mean null) / sd null``.
    """
    check_choice(method, METHODS, name="method")
    check_n_permutations(n_permutations)
    if n_bootstrap:
        check_n_resamples(n_bootstrap, name="n_bootstrap")
    A, B = _pair(rdm_a, rdm_b)
    n = A.shape[0]
    rng = np.random.default_rng(random_state)
    iu, ju = np.triu_indices(n, 1)
    observed = compare_vectors(A[iu, ju], B[iu, ju], method)
    null = np.empty(n_permutations)
    for k in range(n_permutations):
        p = rng.permutation(n)
        null[k] = compare_vectors(A[iu, ju], B[p[iu], p[ju]], method)
    low = high = np.full(1, np.nan)
    if n_bootstrap:
        boots = np.empty(n_bootstrap)
        for k, idx in enumerate(stats.bootstrap_indices(n, n_bootstrap, rng)):
            keep = idx[iu] != idx[ju]
            a, b = A[idx[iu], idx[ju]][keep], B[idx[iu], idx[ju]][keep]
            boots[k] = compare_vectors(a, b, method) if a.size >= 2 else np.nan
        low, high = stats.percentile_interval(boots[None, :], confidence_level)  # (1,) arrays
    res = stats.permutation_result(
        observed, null, n, f"RSA ({method}); stimulus-label permutation test, stimulus bootstrap CI"
    )
    return dataclasses.replace(
        res, ci_low=float(low[0]), ci_high=float(high[0]), confidence_level=confidence_level
    )
