"""Paired comparisons: paired t-test and Wilcoxon signed-rank, with effect sizes."""

from __future__ import annotations

from typing import Literal

import numpy as np
from numpy.typing import ArrayLike
from scipy import stats

from probekit.errors import DataError, NonFiniteError

from .result import StatTestResult

__all__ = ["paired_ttest", "wilcoxon_signed_rank"]

Alternative = Literal["two-sided", "greater", "less"]


def _paired(a: object, b: object) -> tuple[np.ndarray, np.ndarray]:
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    b = np.asarray(b, dtype=np.float64).reshape(-1)
    if a.shape != b.shape:
        raise DataError(
            f"paired test needs equal-length samples: got {a.size} values in a but {b.size} in b; "
            "pair each condition's score with the same unit (seed, checkpoint, layer)"
        )
    if a.size < 2:
        raise NonFiniteError(f"paired test needs at least 2 pairs, got {a.size}")
    if not (np.isfinite(a).all() and np.isfinite(b).all()):
        raise NonFiniteError("paired test inputs contain NaN/inf; drop incomplete pairs first")
    return a, b


def paired_ttest(
    a: ArrayLike,
    b: ArrayLike,
    *,
    alternative: Alternative = "two-sided",
    confidence_level: float = 0.95,
) -> StatTestResult:
    """Student's paired t-test on ``d = a - b`` (``scipy.stats.ttest_rel``).

    ``t = mean(d) / (sd(d) / sqrt(n))`` with ``n - 1`` degrees of freedom. Effect size is
    Cohen's ``d_z = mean(d) / sd(d)`` (Cohen 1988; Lakens 2013). The CI is the t-interval for
    ``mean(d)`` matching ``alternative``.
    """
    a, b = _paired(a, b)
    res = stats.ttest_rel(a, b, alternative=alternative)
    d = a - b
    sd = d.std(ddof=1)
    dz = float(d.mean() / sd) if sd > 0 else float(np.sign(d.mean()) * np.inf)
    ci = res.confidence_interval(confidence_level)
    return StatTestResult(
        statistic=float(res.statistic),
        p_value=float(res.pvalue),
        n=int(a.size),
        method="paired t-test",
        alternative=alternative,
        effect_size=dz,
        effect_size_name="cohen_dz",
        ci_low=float(ci.low),
        ci_high=float(ci.high),
        confidence_level=confidence_level,
    )


def wilcoxon_signed_rank(
    a: ArrayLike,
    b: ArrayLike,
    *,
    alternative: Alternative = "two-sided",
    method: Literal["auto", "exact", "asymptotic"] = "auto",
) -> StatTestResult:
    """Wilcoxon signed-rank test on ``d = a - b`` (``scipy.stats.wilcoxon``, zeros dropped).

    ``statistic`` is scipy's (``min(W+, W-)`` two-sided, ``W+`` one-sided). Effect size is the
    matched-pairs rank-biserial correlation ``r = (W+ - W-) / (W+ + W-)`` over the non-zero
    differences (Kerby 2014), in ``[-1, 1]``, positive when ``a > b``.
    """
    a, b = _paired(a, b)
    d = a - b
    nz = d[d != 0]
    if nz.size == 0:
        raise DataError(
            f"all {d.size} paired differences are zero; the signed-rank test is undefined"
        )
    res = stats.wilcoxon(a, b, alternative=alternative, method=method, zero_method="wilcox")
    ranks = stats.rankdata(np.abs(nz))
    w_plus, w_minus = ranks[nz > 0].sum(), ranks[nz < 0].sum()
    return StatTestResult(
        statistic=float(res.statistic),
        p_value=float(res.pvalue),
        n=int(a.size),
        method="Wilcoxon signed-rank test",
        alternative=alternative,
        effect_size=float((w_plus - w_minus) / (w_plus + w_minus)),
        effect_size_name="rank_biserial",
    )
