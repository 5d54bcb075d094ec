"""Typed result objects shared by the statistical tests (CONTRIBUTING.md, "Code style": typed results)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from probekit.errors import ConfigError
from probekit.report.blocks import Block, Column, Scatter, Table, Text
from probekit.report.notebook import NotebookMixin

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


@dataclass(frozen=True, kw_only=True, repr=False)
class StatTestResult(NotebookMixin):
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
        degenerate: why the test's model does not hold for these data (e.g. every paired
            difference is zero), ``""`` when it does; the result's numbers are then a stated
            convention, shown beside the verdict, never a silent NaN.
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
    degenerate: str = ""

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
        flag = f" [degenerate: {self.degenerate}]" if self.degenerate else ""
        return (
            f"{self.method}: statistic={self.statistic:.4g}, p={self.p_value:.3g}{eff} "
            f"(n={self.n}, {self.alternative}) -> {word} at {alpha:g}{flag}"
        )

    def to_records(self) -> list[dict[str, Any]]:
        """One row: statistic, p-value, n, effect size, CI, method and alternative."""
        return [{
            "method": self.method, "statistic": float(self.statistic),
            "p_value": float(self.p_value), "n": int(self.n), "alternative": self.alternative,
            "effect_size": float(self.effect_size), "effect_size_name": self.effect_size_name,
            "ci_low": float(self.ci_low), "ci_high": float(self.ci_high),
            "confidence_level": float(self.confidence_level), "degenerate": self.degenerate,
        }]

    def _blocks(self) -> tuple[Block, ...]:
        rec = self.to_records()[0]
        pct = f"{100 * self.confidence_level:g}%"
        cols = (
            Column(key="method", header="test", fmt="", align="left"),
            Column(key="statistic", header="statistic", fmt=".4g"),
            Column(key="p_value", header="p", fmt=".3g"),
            Column(key="n", header="n", fmt="d"),
            Column(key="alternative", header="alternative", fmt="", align="left"),
            Column(key="effect_size", header=f"effect size ({self.effect_size_name or '-'})",
                   fmt=".3g"),
            Column(key="ci", header=f"{pct} CI", fmt="ci"),
        )
        row = dict(rec, ci=[rec["ci_low"], rec["ci_high"]])
        return (Table(columns=cols, rows=(row,)), Text(text=self.verdict()))

    def _summary(self) -> str:
        return f"{self.method}: statistic={self.statistic:.4g}, p={self.p_value:.3g}, n={self.n}"


@dataclass(frozen=True, kw_only=True, repr=False)
class CorrelationResult(StatTestResult):
    """Correlation test; ``statistic`` and ``effect_size`` are r (or rho)."""

    r_squared: float = math.nan


@dataclass(frozen=True, kw_only=True, repr=False)
class ConfidenceInterval(NotebookMixin):
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

    def to_records(self) -> list[dict[str, Any]]:
        """One row: estimate, interval, level, resamples, n and method."""
        return [{
            "estimate": float(self.estimate), "low": float(self.low), "high": float(self.high),
            "confidence_level": float(self.confidence_level),
            "n_resamples": int(self.n_resamples), "n": int(self.n), "method": self.method,
        }]

    def _blocks(self) -> tuple[Block, ...]:
        rec = self.to_records()[0]
        cols = (
            Column(key="estimate", header="estimate", fmt=".4g"),
            Column(key="ci", header=f"{100 * self.confidence_level:g}% CI", fmt="ci"),
            Column(key="n", header="n", fmt="d"),
            Column(key="n_resamples", header="resamples", fmt="d"),
            Column(key="method", header="method", fmt="", align="left"),
        )
        return (Table(columns=cols, rows=(dict(rec, ci=[rec["low"], rec["high"]]),)),)

    def _summary(self) -> str:
        return (f"{self.estimate:.4g} [{self.low:.4g}, {self.high:.4g}], "
                f"{100 * self.confidence_level:g}% {self.method}, n={self.n}")


@dataclass(frozen=True, kw_only=True, repr=False)
class MultipleTestResult(NotebookMixin):
    """Multiplicity-adjusted p-values (same order as the input)."""

    p_values: np.ndarray
    p_adjusted: np.ndarray
    reject: np.ndarray
    method: str
    alpha: float

    def to_records(self) -> list[dict[str, Any]]:
        """One row per test, in input order: raw and adjusted p-value, rejected or not."""
        return [
            {"test": i, "p_value": float(p), "p_adjusted": float(q), "reject": bool(r)}
            for i, (p, q, r) in enumerate(zip(self.p_values, self.p_adjusted, self.reject))
        ]

    def _blocks(self) -> tuple[Block, ...]:
        cols = (
            Column(key="test", header="test", fmt="d"),
            Column(key="p_value", header="p", fmt=".3g"),
            Column(key="p_adjusted", header=f"p ({self.method})", fmt=".3g"),
            Column(key="reject", header=f"reject at alpha={self.alpha:g}", fmt=""),
        )
        rows = self.to_records()
        return (Table(columns=cols, rows=tuple(rows),
                      highlight=tuple(i for i, r in enumerate(rows) if r["reject"])),)

    def _summary(self) -> str:
        return (f"{self.method}, {len(self.p_values)} tests, {int(np.sum(self.reject))} rejected "
                f"at alpha={self.alpha:g}")


@dataclass(frozen=True, kw_only=True, repr=False)
class LeaveOneOutResult(NotebookMixin):
    """Leave-one-out prediction of ``y`` from ``x`` by a simple linear fit."""

    predictions: np.ndarray
    residuals: np.ndarray
    rmse: float
    mae: float
    n: int

    def to_records(self) -> list[dict[str, Any]]:
        """One row per point: observed ``y`` (prediction + residual), LOO prediction, residual."""
        return [{"point": i, "observed": float(p + r), "prediction": float(p), "residual": float(r)}
                for i, (p, r) in enumerate(zip(self.predictions, self.residuals, strict=True))]

    def _scatter(self) -> Scatter:
        rows = self.to_records()
        return Scatter(title=f"leave-one-out linear prediction (RMSE {self.rmse:.3g})",
                       x=tuple(r["observed"] for r in rows), y=tuple(r["prediction"] for r in rows),
                       xlabel="observed y", ylabel="leave-one-out prediction")

    def _blocks(self) -> tuple[Block, ...]:
        table = Table(
            columns=(Column(key="point", header="point", fmt="d"),
                     Column(key="observed", header="observed y", fmt=".4g"),
                     Column(key="prediction", header="LOO prediction", fmt=".4g"),
                     Column(key="residual", header="LOO residual", fmt="+.4g")),
            rows=tuple(self.to_records()))
        text = Text(text=f"leave-one-out error of y ~ a + b x over n={self.n} points: RMSE "
                         f"{self.rmse:.4g}, MAE {self.mae:.4g}")
        return (text, table, self._scatter())

    def _main_plot(self) -> Scatter:
        return self._scatter()

    def _summary(self) -> str:
        return f"n={self.n}, RMSE {self.rmse:.4g}, MAE {self.mae:.4g}"
