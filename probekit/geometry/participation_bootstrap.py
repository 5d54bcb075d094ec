"""Bootstrap of the participation ratio over rows, without refitting a covariance per resample.

``PR = (sum_i l_i)^2 / sum_i l_i^2`` over the eigenvalues ``l_i`` of the activation covariance
(Gao et al. 2017; :func:`probekit.geometry.participation_ratio`). A bootstrap resample counts
row ``j`` ``w_j`` times; :func:`pr_of_weighted_rows` gives every resample's PR from one Gram
matrix, exactly the PR of the repeated rows.
"""

from __future__ import annotations

import numpy as np
from jaxtyping import Float

from ..errors import DataError

__all__ = ["pr_of_weighted_rows", "pr_resamples"]


def pr_of_weighted_rows(
    X: Float[np.ndarray, "n d"], weights: Float[np.ndarray, "resample n"]
) -> Float[np.ndarray, " resample"]:
    """PR of the covariance of ``X`` with rows counted ``weights[b]`` times, per resample ``b``.

    ``PR = tr(C)^2 / ||C||_F^2`` (the eigenvalue formula, as ``sum l^2 = tr(C^2)``; the scale of
    ``C`` cancels). With ``m = w / sum w``, ``G = X X^T`` (``X`` centred once, which leaves every
    ``C`` unchanged) and ``H = G * G``: ``C = X^T diag(m) X - mu mu^T``, ``mu = X^T m``, so
    ``tr C = m.diag(G) - m^T G m`` and ``||C||_F^2 = m^T H m - 2 m.(G m)^2 + (m^T G m)^2``:
    ``O(n^2)`` per resample (``O(n d^2)`` through the ``d x d`` covariance when ``n > 3000``).
    A resample without spread gives ``0 / 0`` (NaN; :func:`pr_resamples` refuses it).
    """
    X = np.asarray(X, dtype=np.float64)
    X = X - X.mean(0)
    m = np.asarray(weights, dtype=np.float64)
    m = m / m.sum(1, keepdims=True)  # (B, n)
    if X.shape[0] > 3000:
        out = np.empty(m.shape[0])
        for b, mb in enumerate(m):
            xc = (X - mb @ X) * np.sqrt(mb)[:, None]
            cov = xc.T @ xc
            out[b] = np.trace(cov) ** 2 / np.sum(cov * cov)
        return out
    G = X @ X.T
    Gm = m @ G  # (B, n)
    mGm = np.einsum("bn,bn->b", m, Gm)
    trace = m @ np.diag(G) - mGm
    frob = np.einsum("bn,bn->b", m @ (G * G), m) - 2 * np.einsum("bn,bn->b", m, Gm**2) + mGm**2
    return trace**2 / frob


def pr_resamples(
    X: Float[np.ndarray, "n d"], *, n_bootstrap: int, seed: int, what: str = "rows"
) -> Float[np.ndarray, " resample"]:
    """The PR of ``n_bootstrap`` bootstrap resamples of the rows of ``X`` (seeded).

    Raises :class:`~probekit.errors.DataError` when a resample has no spread (too few rows);
    ``what`` names the rows in that message.
    """
    from ..stats.bootstrap import bootstrap_indices

    n = X.shape[0]
    boot = bootstrap_indices(n, n_bootstrap, seed)
    counts = np.stack([np.bincount(b, minlength=n) for b in boot]).astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        reps = pr_of_weighted_rows(X, counts)
    if not np.isfinite(reps).all():
        raise DataError(f"{int((~np.isfinite(reps)).sum())} bootstrap resamples of the {n} "
                        f"{what} have no spread (PR 0/0); use more examples (a larger split)")
    return reps
