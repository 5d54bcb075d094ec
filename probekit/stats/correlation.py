"""Correlation across a population (e.g. a marker vs OOD accuracy over checkpoints)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from probekit.errors import ConfigError, DataError, NonFiniteError

from .result import CorrelationResult, LeaveOneOutResult

__all__ = ["loo_linear_error", "pearson", "spearman", "spearman_ci"]

Alternative = Literal["two-sided", "greater", "less"]


def _xy(x: object, y: object, min_n: int = 3) -> tuple[np.ndarray, np.ndarray]:
    x = np.asarray(x, dtype=np.float64).reshape(-1)
    y = np.asarray(y, dtype=np.float64).reshape(-1)
    if x.size != y.size:
        raise DataError(
            f"got {x.size} x values but {y.size} y values; pass one (x, y) pair per unit"
        )
    if x.size < min_n:
        raise NonFiniteError(f"need at least {min_n} points, got {x.size}")
    if not (np.isfinite(x).all() and np.isfinite(y).all()):
        raise NonFiniteError("x or y contains NaN/inf; drop incomplete units first")
    if np.ptp(x) == 0 or np.ptp(y) == 0:
        raise DataError("x or y is constant; the correlation is undefined")
    return x, y


def pearson(
    x: ArrayLike,
    y: ArrayLike,
    *,
    alternative: Alternative = "two-sided",
    confidence_level: float = 0.95,
) -> CorrelationResult:
    """Pearson r with its t-test p-value, ``R^2 = r^2`` and the Fisher-z CI (``scipy.stats.pearsonr``)."""
    x, y = _xy(x, y)
    res = stats.pearsonr(x, y, alternative=alternative)
    ci = res.confidence_interval(confidence_level)
    r = float(res.statistic)
    return CorrelationResult(
        statistic=r,
        p_value=float(res.pvalue),
        n=int(x.size),
        method="Pearson correlation",
        alternative=alternative,
        effect_size=r,
        effect_size_name="r",
        ci_low=float(ci.low),
        ci_high=float(ci.high),
        confidence_level=confidence_level,
        r_squared=r * r,
    )


def spearman(
    x: ArrayLike,
    y: ArrayLike,
    *,
    alternative: Alternative = "two-sided",
    confidence_level: float = 0.95,
) -> CorrelationResult:
    """Spearman rank correlation rho and p-value (``scipy.stats.spearmanr``); ``r_squared = rho^2``.

    The CI is Fisher's z interval with the Bonett & Wright (2000) variance for rank
    correlations, ``tanh(atanh(rho) -+ z_q sqrt((1 + rho^2 / 2) / (n - 3)))`` (two-sided,
    needs n >= 4; NaN bounds otherwise).
    """
    x, y = _xy(x, y)
    res = stats.spearmanr(x, y, alternative=alternative)
    rho = float(res.statistic)
    low, high = spearman_ci(rho, int(x.size), confidence_level)
    return CorrelationResult(
        statistic=rho,
        p_value=float(res.pvalue),
        n=int(x.size),
        method="Spearman rank correlation",
        alternative=alternative,
        effect_size=rho,
        effect_size_name="rho",
        ci_low=low,
        ci_high=high,
        confidence_level=confidence_level,
        r_squared=rho * rho,
    )


def spearman_ci(rho: float, n: int, confidence_level: float = 0.95) -> tuple[float, float]:
    """Two-sided CI of a Spearman rho over ``n`` units (Fisher z, Bonett & Wright 2000 variance).

    ``se = sqrt((1 + rho^2 / 2) / (n - 3))``; bounds ``tanh(atanh(rho) -+ z_{(1+c)/2} se)``,
    ``(rho, rho)`` for ``|rho| = 1`` and NaN for ``n < 4``.
    """
    if not 0 < confidence_level < 1:
        raise ConfigError(f"confidence_level must be in (0, 1), got {confidence_level!r}")
    if not -1 <= rho <= 1:
        raise DataError(f"rho={rho!r} is not a correlation; expected a value in [-1, 1]")
    if n < 4:
        return float("nan"), float("nan")
    if abs(rho) >= 1 - 1e-12:  # a perfect rank agreement (scipy may give 0.9999999999999999)
        return float(rho), float(rho)
    se = float(np.sqrt((1 + rho * rho / 2) / (n - 3)))
    zq = float(stats.norm.ppf((1 + confidence_level) / 2))
    z = float(np.arctanh(rho))
    return float(np.tanh(z - zq * se)), float(np.tanh(z + zq * se))


def loo_linear_error(x: ArrayLike, y: ArrayLike) -> LeaveOneOutResult:
    """Leave-one-out predictions of ``y`` from ``y ~ a + b x`` fit without each point.

    Closed form via the hat matrix: ``e_(i) = e_i / (1 - h_ii)`` with
    ``h_ii = 1/n + (x_i - xbar)^2 / sum_j (x_j - xbar)^2`` (e.g. Hastie et al. 2009, eq. 7.52).
    """
    x, y = _xy(x, y)
    n = x.size
    xc = x - x.mean()
    sxx = (xc * xc).sum()
    slope = (xc * (y - y.mean())).sum() / sxx
    resid = y - (y.mean() + slope * xc)
    h = 1.0 / n + xc * xc / sxx
    loo_resid = resid / (1.0 - h)
    return LeaveOneOutResult(
        predictions=y - loo_resid,
        residuals=loo_resid,
        rmse=float(np.sqrt((loo_resid**2).mean())),
        mae=float(np.abs(loo_resid).mean()),
        n=n,
    )
