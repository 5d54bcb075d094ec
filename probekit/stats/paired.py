"""Paired comparisons: paired t-test and Wilcoxon signed-rank, with effect sizes."""

from __future__ import annotations

import math
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
    d = a - b
    if np.all(d == d[0]):
        return _constant_differences(d, alternative, confidence_level)
    res = stats.ttest_rel(a, b, alternative=alternative)
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


def _constant_differences(d: np.ndarray, alternative: Alternative,
                          confidence_level: float) -> StatTestResult:
    """The paired t-test's result when every difference equals ``c = d[0]`` (zero variance).

    ``t = mean / (0 / sqrt(n))`` is 0/0 for ``c = 0`` and infinite otherwise, where scipy returns
    NaN or an infinite t. The result is flagged ``degenerate`` and states its convention: for
    ``c = 0`` (identical samples) no difference is evidenced, t = 0 and p = 1; for ``c != 0`` the
    difference is exact, t = +-inf and p is 0 on ``c``'s side (1 on the other). The interval is
    the point ``[c, c]`` and ``d_z`` is 0 or +-inf.
    """
    c, n = float(d[0]), int(d.size)
    if c == 0.0:
        t, p, dz = 0.0, 1.0, 0.0
        why = (f"all {n} paired differences are zero (identical samples): the t statistic is "
               "0/0; reported as t = 0, p = 1 (no difference to test)")
    else:
        t = dz = math.copysign(math.inf, c)
        side = {"two-sided": True, "greater": c > 0, "less": c < 0}[alternative]
        p = 0.0 if side else 1.0
        why = (f"all {n} paired differences equal {c:g} (zero variance): the t statistic is "
               f"infinite; reported as t = {t}, p = {p:g}")
    return StatTestResult(statistic=t, p_value=p, n=n, method="paired t-test",
                          alternative=alternative, effect_size=dz, effect_size_name="cohen_dz",
                          ci_low=c, ci_high=c, confidence_level=confidence_level, degenerate=why)


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
