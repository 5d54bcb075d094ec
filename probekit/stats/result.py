"""Typed result objects shared by the statistical tests (STYLE.md #9)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from probekit.errors import ConfigError

__all__ = [
    "ConfidenceInterval",
    "CorrelationResult",
    "LeaveOneOutResult",
    "MultipleTestResult",
    "StatTestResult",
]


def _check_alpha(alpha: float) -> None:
    if not 0.0 < alpha < 1.0:
        raise ConfigError(f"alpha must be in (0, 1), got {alpha}; the usual choice is 0.05")


@dataclass(frozen=True, kw_only=True)
class StatTestResult:
    """Outcome of one hypothesis test.

    Attributes:
        statistic: the test statistic (t, W, r, observed score, ...).
        p_value: p-value under H0 for ``alternative``.
        n: sample size (pairs, points, examples).
        method: human-readable test name.
        alternative: ``"two-sided"``, ``"greater"`` or ``"less"``.
        effect_size: standardised effect (Cohen's d_z, rank-biserial r, Pearson r, ...).
        effect_size_name: what ``effect_size`` is.
        ci_low, ci_high: confidence interval for the effect / statistic (NaN if none).
        confidence_level: level of that interval.
        null_distribution: permutation null (permutation tests only).
    """

    statistic: float
    p_value: float
    n: int
    method: str
    alternative: str = "two-sided"
    effect_size: float = math.nan
    effect_size_name: str = ""
    ci_low: float = math.nan
    ci_high: float = math.nan
    confidence_level: float = 0.95
    null_distribution: np.ndarray | None = field(default=None, repr=False, compare=False)

    def reject(self, alpha: float = 0.05) -> bool:
        """True when ``p_value <= alpha`` (reject H0 at level alpha)."""
        _check_alpha(alpha)
        return bool(self.p_value <= alpha)

    def verdict(self, alpha: float = 0.05) -> str:
        """One-line summary, e.g. ``'paired t-test: t=3.1, p=0.004 (n=20) -> reject H0 at 0.05'``."""
        word = "reject H0" if self.reject(alpha) else "do not reject H0"
        eff = (
            f", {self.effect_size_name}={self.effect_size:.3g}"
            if self.effect_size_name and not math.isnan(self.effect_size)
            else ""
        )
        return (
            f"{self.method}: statistic={self.statistic:.4g}, p={self.p_value:.3g}{eff} "
            f"(n={self.n}, {self.alternative}) -> {word} at {alpha:g}"
        )


@dataclass(frozen=True, kw_only=True)
class CorrelationResult(StatTestResult):
    """Correlation test; ``statistic`` and ``effect_size`` are r (or rho)."""

    r_squared: float = math.nan


@dataclass(frozen=True, kw_only=True)
class ConfidenceInterval:
    """Bootstrap (or analytic) interval for a scalar metric."""

    estimate: float
    low: float
    high: float
    confidence_level: float
    n_resamples: int
    n: int
    method: str = "percentile bootstrap"

    def contains(self, value: float) -> bool:
        """Whether ``low <= value <= high``."""
        return bool(self.low <= value <= self.high)


@dataclass(frozen=True, kw_only=True)
class MultipleTestResult:
    """Multiplicity-adjusted p-values (same order as the input)."""

    p_values: np.ndarray
    p_adjusted: np.ndarray
    reject: np.ndarray
    method: str
    alpha: float


@dataclass(frozen=True, kw_only=True)
class LeaveOneOutResult:
    """Leave-one-out prediction of ``y`` from ``x`` by a simple linear fit."""

    predictions: np.ndarray
    residuals: np.ndarray
    rmse: float
    mae: float
    n: int
