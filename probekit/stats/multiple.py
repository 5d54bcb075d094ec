"""Multiple-comparison adjustment: Holm (1979) step-down FWER, Benjamini-Hochberg (1995) FDR."""

from __future__ import annotations

import numpy as np
from jaxtyping import Float
from numpy.typing import ArrayLike
from scipy import stats

from probekit.errors import ConfigError, DataError

from .result import MultipleTestResult, _check_alpha

__all__ = ["adjust_pvalues", "benjamini_hochberg", "holm"]


def _check_p(p: object) -> np.ndarray:
    arr = np.asarray(p, dtype=np.float64).reshape(-1)
    if arr.size == 0:
        raise DataError("got no p-values; pass one p-value per hypothesis (e.g. per layer)")
    bad = ~((arr >= 0) & (arr <= 1))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        raise DataError(f"p-values must lie in [0, 1]; entry {i} is {arr[i]}")
    return arr


def holm(p_values: ArrayLike) -> Float[np.ndarray, " m"]:
    """Holm step-down adjusted p-values: ``p~_(i) = max_{j<=i} min(1, (m - j + 1) p_(j))``."""
    p = _check_p(p_values)
    m = p.size
    order = np.argsort(p, kind="stable")
    adj_sorted = np.minimum(1.0, np.maximum.accumulate((m - np.arange(m)) * p[order]))
    out = np.empty(m)
    out[order] = adj_sorted
    return out


def benjamini_hochberg(p_values: ArrayLike) -> Float[np.ndarray, " m"]:
    """BH adjusted p-values ``p~_(i) = min_{j>=i} min(1, m p_(j) / j)`` (scipy ``false_discovery_control``)."""
    return stats.false_discovery_control(_check_p(p_values), method="bh")


def adjust_pvalues(
    p_values: ArrayLike,
    *,
    method: str = "holm",  # "holm" | "bh"; any str is checked at run time
    alpha: float = 0.05,
) -> MultipleTestResult:
    """Adjust a family of p-values (e.g. one per layer); ``reject = p_adjusted <= alpha``.

    ``"holm"`` controls the family-wise error rate, ``"bh"`` the false discovery rate
    (independent or positively dependent tests).
    """
    _check_alpha(alpha)
    p = _check_p(p_values)
    if method == "holm":
        adj = holm(p)
    elif method == "bh":
        adj = benjamini_hochberg(p)
    else:
        raise ConfigError(f"method must be 'holm' or 'bh', got {method!r}")
    return MultipleTestResult(
        p_values=p, p_adjusted=adj, reject=adj <= alpha, method=method, alpha=alpha
    )
