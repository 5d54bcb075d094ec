"""The five verdicts of a marker and the flags that qualify them (docs/diagnosis.md).

With Holm-adjusted p-values over the K analysed markers at level ``alpha``, the partial-r CI
``[lo_p, hi_p]`` and the marginal-r CI ``[lo_m, hi_m]`` (each the inversion of its own test) and
the equivalence margin ``delta`` (Schuirmann 1987; Lakens 2017):

- ``adds_beyond_covariates``: partial Holm p <= alpha and the out-of-sample gain's permutation
  p (``oos_p``) <= alpha;
- ``partial_association``: partial Holm p <= alpha, no out-of-sample gain shown;
- ``explained_by_covariates``: marginal Holm p <= alpha and ``-delta < lo_p, hi_p < delta``
  (the partial effect is shown to be small, not merely not significant);
- ``no_association``: both CIs inside ``(-delta, delta)``;
- ``inconclusive``: anything else (the record's ``mde_partial_r`` says what the design could
  have detected);
- ``not_applicable``: the marker could not be analysed (see its reason).

A marker with ``|Spearman(m, y)| >= 0.98`` (``near_identical``: the marker is nearly the outcome
itself) is never ``adds`` / ``partial`` (it becomes ``inconclusive``); a degenerate outcome
makes every marker ``inconclusive``.
"""

from __future__ import annotations

import math

__all__ = [
    "ADDS",
    "EXPLAINED",
    "INCONCLUSIVE",
    "NEAR_IDENTICAL",
    "NONE",
    "NOT_APPLICABLE",
    "PARTIAL",
    "VERDICTS",
    "VERDICT_COLORS",
    "decide",
]

ADDS = "adds_beyond_covariates"
PARTIAL = "partial_association"
EXPLAINED = "explained_by_covariates"
NONE = "no_association"
INCONCLUSIVE = "inconclusive"
NOT_APPLICABLE = "not_applicable"
VERDICTS = (ADDS, PARTIAL, EXPLAINED, NONE, INCONCLUSIVE, NOT_APPLICABLE)
NEAR_IDENTICAL = 0.98

#: a colour per verdict (and for "no verdict"), the same in every plot and line of a report
VERDICT_COLORS = ((ADDS, "#1b7837"), (PARTIAL, "#5aae61"), (EXPLAINED, "#e08214"),
                  (NONE, "#2166ac"), (INCONCLUSIVE, "#8c8c8c"), (NOT_APPLICABLE, "#c8c8c8"),
                  ("no verdict", "#8c8c8c"))


def _inside(lo: float, hi: float, delta: float) -> bool:
    return math.isfinite(lo) and math.isfinite(hi) and -delta < lo and hi < delta


def decide(
    *, p_holm: float, partial_p_holm: float, oos_p: float, partial_ci: tuple[float, float],
    marginal_ci: tuple[float, float], alpha: float, delta: float, near_identical: bool,
    partial_undefined: bool = False,
) -> str:
    """The verdict of one analysed marker (rules in the module docstring).

    ``partial_undefined``: the marker is a linear function of the covariates (and groups), so it
    has no partial effect at all: ``explained_by_covariates`` when the marginal test rejects.
    """
    if partial_undefined:
        if p_holm <= alpha:
            return EXPLAINED
        return NONE if _inside(*marginal_ci, delta) else INCONCLUSIVE
    if partial_p_holm <= alpha:
        if near_identical:
            return INCONCLUSIVE
        return ADDS if oos_p <= alpha else PARTIAL
    if p_holm <= alpha and _inside(*partial_ci, delta):
        return EXPLAINED
    if _inside(*marginal_ci, delta) and _inside(*partial_ci, delta):
        return NONE
    return INCONCLUSIVE
