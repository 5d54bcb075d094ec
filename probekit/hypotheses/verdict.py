"""Verdicts: PASS / FAIL / INCONCLUSIVE from a measurement's CI and test, Holm over a file.

For a bound (``>=``, ``<=``, ``between``) the statistic is the percentile bootstrap (Efron &
Tibshirani 1993) over units: PASS when the ``confidence_level`` CI lies entirely on the claimed
side *and* the Holm-adjusted one-sided bootstrap p-value (the share of replicates on the wrong
side, ``(1 + #wrong) / (1 + B)``) is at most ``alpha``; FAIL when the CI lies entirely on the
other side; INCONCLUSIVE otherwise (the CI straddles the threshold, or Holm withholds the
pass). ``greater_than_control`` is a permutation test (Phipson & Smyth 2010 p-value): against
the kind's null distribution, or a sign-flip test of paired per-unit differences; PASS iff the
Holm-adjusted p is at most ``alpha``, else FAIL.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..report.blocks import Block, Column, Table, Text
from ..report.notebook import NotebookMixin
from ..stats.bootstrap import bootstrap_indices, check_n_resamples, percentile_interval
from ..stats.multiple import holm
from ..stats.permutation import permutation_pvalue
from .measurement import Measurement
from .spec import Claim

__all__ = ["ClaimResult", "ClaimTest", "claims_table", "judge", "judge_all", "measurement_test"]

PASS, FAIL, INCONCLUSIVE = "PASS", "FAIL", "INCONCLUSIVE"


@dataclass(frozen=True, kw_only=True, repr=False)
class ClaimResult(NotebookMixin):
    """One claim's verdict with the numbers behind it.

    Attributes:
        claim: the claim judged.
        verdict: ``"PASS"``, ``"FAIL"`` or ``"INCONCLUSIVE"``.
        estimate: the measured statistic.
        effect: what is compared with the threshold (the estimate, or estimate - control).
        ci_low, ci_high: the CI of ``effect`` at ``confidence_level``.
        p_value, p_holm: the one-sided p-value of H0 "the claim is false" and its Holm
            adjustment over the file's claims.
        n, unit: units behind the estimate.
        control: mean of the control (None without one).
        method: the statistic used, in words.
        measurement: the kind's raw measurement.
    """

    claim: Claim
    verdict: str
    estimate: float
    effect: float
    ci_low: float
    ci_high: float
    p_value: float
    p_holm: float
    n: int
    unit: str
    metric: str
    control: float | None
    method: str
    alpha: float
    confidence_level: float
    measurement: Measurement = field(repr=False, compare=False)

    def line(self) -> str:
        """The terminal summary: ``PASS  name: accuracy 0.98 [0.97, 0.99] >= 0.9 (p=..., n=...)``."""
        ctl = f", control {self.control:.3g}" if self.control is not None else ""
        return (
            f"{self.verdict:<12} {self.claim.name}: {self.metric} {self.effect:.3f} "
            f"[{self.ci_low:.3f}, {self.ci_high:.3f}] {self.claim.describe()}{ctl} "
            f"(p={self.p_value:.3g}, Holm p={self.p_holm:.3g}, n={self.n} {self.unit})"
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON form for ``report.json`` (no arrays)."""
        from ..report.blocks import strict_json

        return strict_json({
            "name": self.claim.name, "measure": self.claim.measure,
            "compare": self.claim.compare, "threshold": list(self.claim.threshold),
            "verdict": self.verdict, "metric": self.metric, "estimate": self.estimate,
            "effect": self.effect, "ci": [self.ci_low, self.ci_high],
            "confidence_level": self.confidence_level, "p_value": self.p_value,
            "p_holm": self.p_holm, "alpha": self.alpha, "n": self.n, "unit": self.unit,
            "control": self.control, "method": self.method,
            "measurement_method": self.measurement.method,
            "details": dict(self.measurement.details),
        })

    def to_records(self) -> list[dict[str, Any]]:
        """One row: the claim, its verdict, effect with CI, the claimed bound, p-values, n."""
        return [{
            "claim": self.claim.name, "measure": self.claim.measure, "verdict": self.verdict,
            "metric": self.metric, "estimate": float(self.estimate), "effect": float(self.effect),
            "ci_low": float(self.ci_low), "ci_high": float(self.ci_high),
            "claimed": self.claim.describe(), "p_value": float(self.p_value),
            "p_holm": float(self.p_holm), "n": int(self.n), "unit": self.unit,
            "control": None if self.control is None else float(self.control),
            "alpha": float(self.alpha),
        }]

    def _blocks(self) -> tuple[Block, ...]:
        return (claims_table([self]), *self.detail_blocks())

    def detail_blocks(self) -> list[Block]:
        """The verdict in words, then the measurement kind's own blocks (plots, tables)."""
        return [Text(text=f"{self.verdict}: {self.claim.name}. {self.measurement.method}; "
                          f"{self.method}."), *self.measurement.blocks]

    def _summary(self) -> str:
        return (f"{self.verdict} {self.claim.name!r}: {self.metric} {self.effect:.3f} "
                f"[{self.ci_low:.3f}, {self.ci_high:.3f}] {self.claim.describe()}")


def claims_table(claims: Sequence[ClaimResult]) -> Table:
    """The report's claims table: one row per claim, passed claims highlighted."""
    rows = tuple(
        {"claim": c.claim.name, "verdict": c.verdict, "effect": c.effect,
         "ci": [c.ci_low, c.ci_high], "bound": c.claim.describe(), "p": c.p_value,
         "p_holm": c.p_holm, "n": c.n}
        for c in claims
    )
    return Table(
        columns=(Column(key="claim", header="claim", fmt="", align="left"),
                 Column(key="verdict", header="verdict", fmt="", align="left"),
                 Column(key="effect", header="effect"),
                 Column(key="ci", header=f"{claims[0].confidence_level:.0%} CI", fmt="ci")
                 if claims else Column(key="ci", header="CI", fmt="ci"),
                 Column(key="bound", header="claimed", fmt="", align="left"),
                 Column(key="p", header="p", fmt=".3g"),
                 Column(key="p_holm", header="Holm p", fmt=".3g"),
                 Column(key="n", header="n", fmt="d")),
        rows=rows,
        highlight=tuple(i for i, c in enumerate(claims) if c.verdict == PASS),
        caption="PASS: CI entirely on the claimed side and Holm-adjusted p <= alpha; FAIL: CI "
        "entirely on the other side (or the control test does not reject); INCONCLUSIVE: "
        "otherwise.",
    )


@dataclass(frozen=True, kw_only=True)
class ClaimTest:
    """A claim's effect, its CI, the one-sided p-value (unadjusted), control mean and method."""

    effect: float
    low: float
    high: float
    p: float
    control: float | None
    method: str


def _replicates(m: Measurement, n_bootstrap: int, seed: int) -> np.ndarray:
    if m.resamples is not None:
        return m.resamples
    idx = bootstrap_indices(m.values.size, n_bootstrap, seed)
    return m.values[idx].mean(axis=1)


def measurement_test(
    m: Measurement, claim: Claim, *, n_bootstrap: int = 1000, n_permutations: int = 1000,
    confidence_level: float = 0.95, seed: int = 0,
) -> ClaimTest:
    """Effect, CI and one-sided p-value of ``claim`` on ``m`` (before multiplicity correction)."""
    from ..stats.permutation import check_n_permutations

    check_n_permutations(n_permutations)
    check_n_resamples(n_bootstrap, name="n_bootstrap")
    t = claim.threshold
    if claim.compare == "greater_than_control":
        if m.control is not None:
            diff = m.values - m.control
            reps = diff[bootstrap_indices(diff.size, n_bootstrap, seed)].mean(1)
            rng = np.random.default_rng(seed)
            signs = rng.choice(np.array([-1.0, 1.0]), size=(n_permutations, diff.size))
            centred = diff - t[0]
            null = (signs * centred).mean(1)
            low, high = percentile_interval(reps, confidence_level)
            return ClaimTest(effect=float(diff.mean()), low=float(low), high=float(high),
                         p=permutation_pvalue(float(centred.mean()), null, "greater"),
                         control=float(m.control.mean()),
                         method=f"sign-flip permutation test of paired differences ({n_permutations})")
        null = m.null
        reps = _replicates(m, n_bootstrap, seed) - null.mean()
        low, high = percentile_interval(reps, confidence_level)
        return ClaimTest(effect=float(m.estimate - null.mean()), low=float(low), high=float(high),
                     p=permutation_pvalue(m.estimate - t[0], null, "greater"),
                     control=float(null.mean()),
                     method=f"permutation test against the control ({null.size} replicates)")
    reps = _replicates(m, n_bootstrap, seed)
    low, high = (float(x) for x in percentile_interval(reps, confidence_level))
    b = reps.size
    if claim.compare == ">=":
        wrong = np.count_nonzero(reps < t[0])
    elif claim.compare == "<=":
        wrong = np.count_nonzero(reps > t[0])
    else:  # between: intersection-union test, the larger of the two one-sided p-values
        wrong = max(np.count_nonzero(reps < t[0]), np.count_nonzero(reps > t[1]))
    return ClaimTest(effect=float(m.estimate), low=low, high=high, p=float((1 + wrong) / (1 + b)),
                 control=None, method=f"percentile bootstrap over {m.unit} ({b} resamples)")


def _side(test: ClaimTest, claim: Claim) -> str:
    """``"claimed"``, ``"other"`` or ``"straddles"``: where the CI lies w.r.t. the threshold."""
    t = claim.threshold
    if claim.compare == ">=":
        return "claimed" if test.low >= t[0] else "other" if test.high < t[0] else "straddles"
    if claim.compare == "<=":
        return "claimed" if test.high <= t[0] else "other" if test.low > t[0] else "straddles"
    if claim.compare == "between":
        if t[0] <= test.low and test.high <= t[1]:
            return "claimed"
        return "other" if test.high < t[0] or test.low > t[1] else "straddles"
    raise ValueError(f"_side is for bounds, not {claim.compare!r}")


def judge(
    m: Measurement, claim: Claim, test: ClaimTest, p_holm: float, *, alpha: float,
    confidence_level: float,
) -> ClaimResult:
    """The verdict of one claim given its test and Holm-adjusted p-value (see module doc)."""
    if claim.compare == "greater_than_control":
        verdict = PASS if p_holm <= alpha else FAIL
    else:
        side = _side(test, claim)
        verdict = (
            FAIL if side == "other"
            else PASS if side == "claimed" and p_holm <= alpha
            else INCONCLUSIVE
        )
    return ClaimResult(
        claim=claim, verdict=verdict, estimate=float(m.estimate), effect=test.effect,
        ci_low=test.low, ci_high=test.high, p_value=test.p, p_holm=float(p_holm), n=int(m.n),
        unit=m.unit, metric=m.metric, control=test.control, method=test.method, alpha=alpha,
        confidence_level=confidence_level, measurement=m,
    )


def judge_all(
    measured: list[tuple[Claim, Measurement]], *, n_bootstrap: int = 1000,
    n_permutations: int = 1000, confidence_level: float = 0.95, alpha: float = 0.05, seed: int = 0,
) -> list[ClaimResult]:
    """Judge a file's claims together: one test each, Holm (1979) over their p-values."""
    tests = [
        measurement_test(m, c, n_bootstrap=n_bootstrap, n_permutations=n_permutations,
                         confidence_level=confidence_level, seed=seed + i)
        for i, (c, m) in enumerate(measured)
    ]
    adjusted = holm([t.p for t in tests]) if tests else np.array([])
    return [
        judge(m, c, t, float(p), alpha=alpha, confidence_level=confidence_level)
        for (c, m), t, p in zip(measured, tests, adjusted)
    ]
