"""Instrumental-variable estimate of a marker's causal effect on the outcome (2SLS).

The structural model is ``y = X gamma + beta m + u`` with the marker ``m`` endogenous
(confounders such as the seed's initialisation can drive both ``m`` and ``y``, so OLS of ``y``
on ``m`` is biased), and the **instrument** ``z`` is the strength of an intervention on the
marker (a design knob set by the experimenter, e.g. the HE regulariser's weight). With one
instrument the two-stage least squares estimate (Angrist & Pischke 2009, ch. 4) is, by
Frisch-Waugh-Lovell with ``~`` the residual on ``X`` (``(I - H_X) .``)::

    pi_m = z~ . m~ / |z~|^2       (first stage: the knob's effect on the marker)
    pi_y = z~ . y~ / |z~|^2       (reduced form: the knob's effect on the outcome)
    beta = pi_y / pi_m = z~ . y~ / z~ . m~

- **Standard error**: cluster-robust by group (CR1, the Stata / linearmodels ``debiased``
  factor ``G/(G-1) (n-1)/(n-k)``, ``k = rank(X) + 1``), with the structural residuals
  ``u = y~ - beta m~``: ``var = CR1 sum_g (sum_{i in g} z~_i u_i)^2 / (z~ . m~)^2``; the Wald
  CI uses Student t with ``G - 1`` degrees of freedom (each model its own group without groups).
- **First-stage F**: the square of the first stage's CR1 t (with one instrument it is the
  cluster-robust Wald F and Montiel Olea & Pflueger's effective F, ``F_eff``).
- **Weak instrument** (the flag ``weak`` and the report's warning): the 2SLS estimate is then
  biased towards OLS and its Wald CI undercovers. The flag is Montiel Olea & Pflueger's (2013)
  test of ``H0: mu^2 <= 10`` (``mu^2`` the first stage's concentration; with one instrument
  the Nagar bias relative to OLS can reach ``tau = 10%``): the instrument counts as strong
  only when ``F_eff`` exceeds the test's 95% critical value. Their critical value, the 95th
  percentile of the noncentral chi^2(1, 10), is 23.1; with ``G`` clusters the CR1 variance has
  about ``G - 1`` degrees of freedom (Cameron & Miller 2015), so ``F_eff`` is referred to the
  noncentral ``F(1, G - 1, 10)`` instead (68.3 at 5 seeds, 37.4 at 10, 23.1 as ``G`` grows).
  An Anderson-Rubin set that is unbounded (the data cannot bound the effect) is flagged weak
  too, whatever ``F_eff``. The conventional ``F < 10`` rule (Staiger & Stock 1997) missed 14.5%
  of simulated weak instruments (``mu^2 = 3``, 5 seeds), whose CR1 F, on 4 degrees of freedom,
  is often far above its expectation.
- **Design-respecting p and CI** (Anderson & Rubin 1949): ``H0: beta = b0`` holds iff the knob
  has no effect on ``y - b0 m`` given ``X``, which is the test of ``z``'s coefficient in
  ``y - b0 m ~ X + z`` run with the diagnosis' own resamples (Freedman-Lane within seeds + HC3,
  or the wild cluster restricted bootstrap; :mod:`.design`). Its p at ``b0 = 0`` is the reduced
  form's p; its CI, ``{b0 : p(b0) > 1 - level}`` (test inversion), stays valid however weak the
  instrument: when the first stage is not significant the set is unbounded, as it should be.

Identification needs (i) **relevance**: the knob moves the marker (the first stage);
(ii) **exclusion**: the knob affects the outcome only through the marker (an HE regulariser
that also changes the optimisation in other ways violates it; the arm's mediation reports the
knob's direct effect); (iii) **independence**: the knob is assigned by the design (true for a
grid). With a knob that is not randomised within the groups, (iii) rests on the covariates.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from ..inference import FixedNull, ci_by_inversion, resample_pvalue
from .design import CausalDesign, CoefficientTest, coefficient_test

__all__ = ["WEAK_BIAS", "WEAK_F", "IVEstimate", "iv_estimate", "two_stage_least_squares",
           "weak_critical_f"]

#: the conventional first-stage F threshold (Staiger & Stock 1997); no longer the flag's rule
WEAK_F = 10.0
#: worst-case 2SLS bias relative to OLS that the weak-instrument test guards against
WEAK_BIAS = 0.1
_FAR = 1e7  # standard errors: a b0 this far out probes whether the AR set is unbounded


@dataclass(frozen=True, kw_only=True)
class IVEstimate:
    """The 2SLS estimate of a marker's effect on the outcome with the knob as the instrument.

    Attributes:
        beta, se: the 2SLS coefficient and its CR1 standard error (clustered by group).
        wald_low, wald_high: ``beta -+ t_{G-1} se``.
        first_stage, reduced_form: the tests of the knob's coefficient on the marker and on
            the outcome (design-respecting p and CI).
        first_stage_f: the first stage's cluster-robust F (``t_CR1^2``, the effective F).
        first_stage_f_critical: the weak-instrument test's critical value
            (:func:`weak_critical_f` at the design's groups).
        weak: ``first_stage_f <= first_stage_f_critical`` or the AR set is unbounded.
        ar_p, ar_low, ar_high: the Anderson-Rubin p of ``beta = 0`` and its test-inversion CI
            with the design's resamples.
        ar_unbounded: the AR confidence set also holds arbitrarily large effects (a weak
            first stage); ``ar_low`` / ``ar_high`` are then the bounds of the part around
            ``beta`` (``-inf`` / ``inf`` when it is unbounded itself).
        ols_beta: the (confounded) OLS coefficient of the marker in ``y ~ X + m``, beside it.
        n, n_groups: models and groups.
    """

    beta: float
    se: float
    wald_low: float
    wald_high: float
    first_stage: CoefficientTest
    reduced_form: CoefficientTest
    first_stage_f: float
    first_stage_f_critical: float
    weak: bool
    ar_p: float
    ar_low: float
    ar_high: float
    ar_unbounded: bool
    ols_beta: float
    n: int
    n_groups: int

    def covers(self, value: float) -> bool:
        """True when the AR confidence set holds ``value``."""
        inside = self.ar_low <= value <= self.ar_high
        return bool(inside or self.ar_unbounded)

    def to_record(self) -> dict[str, Any]:
        """Flat dict: iv_*, first_*, reduced_* fields."""
        return {"iv_beta": self.beta, "iv_se": self.se, "iv_wald_low": self.wald_low,
                "iv_wald_high": self.wald_high, "iv_ar_p": self.ar_p, "iv_ar_low": self.ar_low,
                "iv_ar_high": self.ar_high, "iv_ar_unbounded": self.ar_unbounded,
                "first_stage_f": self.first_stage_f,
                "first_stage_f_critical": self.first_stage_f_critical,
                "weak_instrument": self.weak,
                "ols_beta": self.ols_beta, "n": self.n, "n_groups": self.n_groups,
                **self.first_stage.to_record("first"), **self.reduced_form.to_record("reduced")}


def two_stage_least_squares(
    y: np.ndarray, m: np.ndarray, z: np.ndarray, X: np.ndarray, g: np.ndarray,
) -> tuple[float, float]:
    """``(beta, se)``: the 2SLS coefficient of ``m`` (instrument ``z``, exogenous ``X``), CR1 SE.

    Formulas in the module docstring; equal to ``linearmodels.IV2SLS(y, X, m, z).fit(
    cov_type="clustered", clusters=g, debiased=True)`` (tests/diagnosis/test_causal.py).
    """
    f = FixedNull.build(z, X, "cr1", g)
    zt = f.em
    yt, mt = f.project(np.stack([y, m]))
    zm = float(zt @ mt)
    if abs(zm) <= 1e-12 * math.sqrt(f.em2 * float(mt @ mt) or 1.0):
        return math.nan, math.nan
    beta = float(zt @ yt) / zm
    u = yt - beta * mt
    S = (zt * u) @ f.onehot
    return beta, math.sqrt(f.ssc * float(S @ S)) / abs(zm)


def weak_critical_f(n_groups: int, *, bias: float = WEAK_BIAS, level: float = 0.95) -> float:
    """The effective F a strong instrument must exceed (weak-instrument test at ``level``).

    The ``level`` quantile of the noncentral ``F(1, G - 1, 1 / bias)``: Montiel Olea &
    Pflueger (2013) with one instrument, the CR1 variance on ``G - 1`` degrees of freedom
    (23.1 as ``G`` grows).
    """
    if n_groups < 2:
        return math.inf
    return float(sps.ncf.ppf(level, 1, n_groups - 1, 1.0 / bias))


def iv_estimate(design: CausalDesign, *, confidence_level: float = 0.95) -> IVEstimate:
    """2SLS, first stage, reduced form and Anderson-Rubin inference on one :class:`CausalDesign`."""
    y, m, z, X = design.y, design.m, design.z, design.X
    first = coefficient_test(z, m, X, design, confidence_level=confidence_level)
    reduced = coefficient_test(z, y, X, design, confidence_level=confidence_level)
    beta, se = two_stage_least_squares(y, m, z, X, design.g)
    crit = float(sps.t.ppf(0.5 + confidence_level / 2.0, max(design.n_groups - 1, 1)))
    F = first.t_cr1 ** 2 if math.isfinite(first.t_cr1) else math.nan
    ar_p, lo, hi, unbounded = _anderson_rubin(design, beta, se, 1.0 - confidence_level)
    f_crit = weak_critical_f(design.n_groups)
    f_ols = FixedNull.build(m, X, design.kind, design.g)
    ols = float(f_ols.project(y[None, :])[0] @ f_ols.em) / f_ols.em2 if f_ols.em2 > 0 else math.nan
    return IVEstimate(beta=beta, se=se, wald_low=beta - crit * se, wald_high=beta + crit * se,
                      first_stage=first, reduced_form=reduced, first_stage_f=F,
                      first_stage_f_critical=f_crit, weak=bool(not f_crit < F or unbounded),
                      ar_p=ar_p, ar_low=lo, ar_high=hi,
                      ar_unbounded=unbounded, ols_beta=ols, n=design.n,
                      n_groups=design.n_groups)


def _anderson_rubin(design: CausalDesign, beta: float, se: float,
                    alpha: float) -> tuple[float, float, float, bool]:
    """AR p of ``beta = 0``, its test-inversion CI and whether the set is unbounded."""
    f = FixedNull.build(design.z, design.X, design.kind, design.g)
    ey, em = f.project(np.stack([design.y, design.m]))
    null_at = f.shifted_null(f.project(design.resample(ey)), f.project(design.resample(em)))
    obs_at = f.shifted_null(ey[None, :], em[None, :])

    def p_at(b0: float) -> float:
        return resample_pvalue(float(obs_at(b0)[0]), null_at(b0), design.enumerated)

    p0 = p_at(0.0)
    if not (math.isfinite(beta) and math.isfinite(se) and se > 0):
        return p0, -math.inf, math.inf, True
    lo, hi = ci_by_inversion(p_at, beta, se, alpha)
    far = max(p_at(beta - _FAR * se), p_at(beta + _FAR * se))
    return p0, lo, hi, bool(far > alpha or math.isinf(lo) or math.isinf(hi))
