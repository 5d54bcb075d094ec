"""The design every causal estimate of a diagnosis shares: regressors, groups and resamples.

A causal question on a marker table names a **knob** ``z`` (a design column: the intervention
strength, or the treatment of a mediation), a **marker** ``m`` and the **outcome** ``y``. The
exogenous design ``X`` is the one the predictive analysis uses (``docs/diagnosis.md``,
"Verdicts and inference"): the covariates coded as :meth:`~probekit.diagnosis.statistics.table.MarkerTable.design`
codes them (the knob itself left out: it is the instrument or the treatment), and

- ``inference="within_groups"`` (default): ``X = [1, C, group fixed effects]``; a coefficient is
  tested with the HC3 t and Freedman & Lane (1983) permutations **within groups** (seeds);
- ``inference="cluster"``: the same ``X`` (group fixed effects in); the CR1 t clustered by
  group and the wild cluster restricted bootstrap (Webb weights below 12 groups);
- no groups: ``X = [1, C]``, HC3, Freedman-Lane over all models.

:func:`coefficient_test` is the test of one coefficient of :mod:`probekit.diagnosis.statistics.inference`
with its CI by test inversion, on the coefficient's own scale (not the r scale of the marker
analysis): ``{b0 : p(H0: beta = b0) > 1 - level}``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from jaxtyping import Float, Int

from probekit.errors import ConfigError, DataError

from ..inference import (
    FixedNull,
    ci_by_inversion,
    cluster_weights,
    coefficient_t,
    resample_pvalue,
    stratified_permutations,
)
from ..table import as_marker_table

__all__ = ["CausalDesign", "CoefficientTest", "build_design", "coefficient_test"]

INFERENCES = ("within_groups", "cluster")


@dataclass(frozen=True, kw_only=True)
class CoefficientTest:
    """One coefficient: estimate, robust SE, t, design-respecting p and test-inversion CI.

    Attributes:
        beta: the OLS coefficient.
        se: its HC3 (``within_groups`` / no groups) or CR1 (``cluster``) standard error.
        t: ``beta / se``.
        p: two-sided resampling p (:class:`CausalDesign` ``unit``).
        low, high: the CI by inversion of the same test.
        t_cr1: the CR1 t clustered by group (each model its own cluster without groups).
    """

    beta: float
    se: float
    t: float
    p: float
    low: float
    high: float
    t_cr1: float

    def to_record(self, prefix: str) -> dict[str, float]:
        """The fields as ``{prefix}_beta, {prefix}_se, ...``."""
        return {f"{prefix}_{k}": getattr(self, k)
                for k in ("beta", "se", "t", "p", "low", "high")}


@dataclass(frozen=True, kw_only=True)
class CausalDesign:
    """Rows, exogenous design and resamples of one causal question (see the module docstring).

    Attributes:
        y: the outcome; z: the knob; m: the marker (rows with a marker value only).
        X: the exogenous design (intercept, coded covariates, group fixed effects).
        terms: names of ``X``'s columns.
        n_fixed_effects: the last columns of ``X`` that are group fixed effects.
        g: group codes 0..G-1 (each model its own group without groups).
        mode: ``within_groups``, ``cluster`` or ``models``.
        perms: ``(B, n)`` Freedman-Lane permutations (None under ``cluster``).
        weights: ``(B, n)`` wild cluster weights per row (None otherwise).
        enumerated: the weights are all ``2^G`` sign vectors.
        unit: the unit of every p and CI, in words.
        rows: the table rows used.
    """

    y: Float[np.ndarray, " n"]
    z: Float[np.ndarray, " n"]
    m: Float[np.ndarray, " n"]
    X: Float[np.ndarray, "n q"]
    terms: tuple[str, ...]
    n_fixed_effects: int
    g: Int[np.ndarray, " n"]
    mode: str
    perms: Int[np.ndarray, "B n"] | None
    weights: Float[np.ndarray, "B n"] | None
    enumerated: bool
    unit: str
    rows: tuple[int, ...]

    @property
    def n(self) -> int:
        """Number of models."""
        return int(self.y.size)

    @property
    def n_groups(self) -> int:
        """Number of groups."""
        return int(self.g.max()) + 1

    @property
    def kind(self) -> str:
        """The studentisation of the resampling tests: ``"cr1"`` under ``cluster``, else ``"hc3"``."""
        return "cr1" if self.mode == "cluster" else "hc3"

    def resample(self, e: Float[np.ndarray, " n"]) -> Float[np.ndarray, "B n"]:
        """``(B, n)`` resampled copies of a residual vector (permuted, or times the weights)."""
        if self.perms is not None:
            return e[self.perms]
        if self.weights is None:
            raise RuntimeError("a CausalDesign holds permutations or weights (build_design)")
        return self.weights * e


def _onehot(g: np.ndarray) -> np.ndarray:
    out = np.zeros((g.size, int(g.max()) + 1))
    out[np.arange(g.size), g] = 1.0
    return out


def build_design(
    table: Any, outcome: str, knob: str, marker: str, *, covariates: tuple[str, ...] = (),
    groups: str | None = None, inference: str = "within_groups", n_permutations: int = 1000,
    n_bootstrap: int = 1000, seed: int = 0, covariate_coding: dict[str, str] | None = None,
    spline_df: int = 4,
) -> CausalDesign:
    """The :class:`CausalDesign` of ``knob -> marker -> outcome`` on ``table``.

    Rows where the marker is missing are dropped. The knob is removed from ``covariates`` (it is
    the instrument / treatment); its ``covariate_coding`` entry, if any, is ignored with it.

    Raises:
        ConfigError: unknown columns, a column in two roles, an unknown ``inference``.
        DataError: a text knob, fewer than 3 groups, a knob that does not vary, too few models.
    """
    if inference not in INFERENCES:
        raise ConfigError(f"inference must be one of {list(INFERENCES)}, got {inference!r}")
    from probekit.stats.bootstrap import check_n_resamples
    from probekit.stats.permutation import check_n_permutations

    check_n_permutations(n_permutations)
    check_n_resamples(n_bootstrap, name="n_bootstrap", minimum=1)
    t = as_marker_table(table)
    t.check_names([outcome, knob, marker], "causal")
    if len({outcome, knob, marker}) < 3:
        raise ConfigError(f"knob {knob!r}, marker {marker!r} and outcome {outcome!r} must be "
                          "three different columns")
    if groups is not None and groups in (outcome, knob, marker):
        raise ConfigError(f"the groups column {groups!r} cannot also be the knob, the marker or "
                          "the outcome")
    covs = tuple(c for c in covariates if c not in (knob, marker, outcome))
    coding = {k: v for k, v in (covariate_coding or {}).items() if k in covs}
    y_all = t.numeric(outcome, "outcome")
    z_all = t.numeric(knob, "knob")
    m_all = t.numeric(marker, "marker", allow_missing=True)
    keep = ~np.isnan(m_all)
    rows = np.flatnonzero(keep)
    C_all, terms = t.design(covs, coding=coding, spline_df=spline_df, groups=groups)
    g_all = t.codes(groups, "groups")[0] if groups is not None else np.arange(t.n_rows)
    _, g = np.unique(g_all[keep], return_inverse=True)
    y, z, m, C = y_all[keep], z_all[keep], m_all[keep], C_all[keep]
    n, G = y.size, int(g.max()) + 1 if y.size else 0
    if groups is not None and G < 3:
        raise DataError(f"the causal estimates resample the {groups!r} groups; {G} group(s) "
                        f"have a value of {marker!r}: >= 3 are needed")
    if np.ptp(z) == 0:
        raise DataError(f"knob {knob!r} is constant ({z[0]:g}) over the {n} models with "
                        f"{marker!r}: no effect of it can be estimated")
    mode = "models" if groups is None else inference
    one = np.ones((n, 1))
    if mode in ("within_groups", "cluster"):
        X = np.column_stack([one, C, _onehot(g)[:, 1:]])
        names = ("intercept", *terms, *(f"{groups}[{k}]" for k in range(1, G)))
    else:
        X, names = np.column_stack([one, C]), ("intercept", *terms)
    if n <= np.linalg.matrix_rank(X) + 2:
        raise DataError(f"{n} models are too few for the {np.linalg.matrix_rank(X)} exogenous "
                        "terms plus the knob and the marker; drop covariates")
    rng = np.random.default_rng([seed, 0xCA05A1])
    perms = weights = None
    enumerated = False
    if mode == "cluster":
        V, enumerated = cluster_weights(G, n_bootstrap, rng)
        weights = V[:, g]
        unit = (f"{groups} groups (cluster-robust, wild cluster restricted bootstrap; {groups} "
                "fixed effects)")
    else:
        perms = stratified_permutations(n, n_permutations, rng,
                                        g if mode == "within_groups" else None)
        unit = (f"models permuted within {groups} strata ({groups} fixed effects)"
                if mode == "within_groups" else "models")
    return CausalDesign(y=y, z=z, m=m, X=X, terms=names,
                        n_fixed_effects=G - 1 if mode != "models" else 0, g=g, mode=mode,
                        perms=perms,
                        weights=weights, enumerated=enumerated, unit=unit,
                        rows=tuple(int(r) for r in rows))


def coefficient_test(
    v: Float[np.ndarray, " n"], y: Float[np.ndarray, " n"], X: Float[np.ndarray, "n q"],
    design: CausalDesign, *, confidence_level: float = 0.95,
) -> CoefficientTest:
    """Test of the coefficient of ``v`` in ``y ~ X + v`` with the design's resamples.

    The estimate and studentisation of :class:`~probekit.diagnosis.statistics.inference.FixedNull`, the p of
    :func:`~probekit.diagnosis.statistics.inference.resample_pvalue` on Freedman-Lane permutations of the
    reduced residuals (or wild cluster weights), the CI by
    :func:`~probekit.diagnosis.statistics.inference.ci_by_inversion` of that test (``y - b0 v`` tested with
    the same resamples). A ``v`` that is a linear function of ``X`` gives NaNs.
    """
    nan = CoefficientTest(beta=math.nan, se=math.nan, t=math.nan, p=math.nan, low=math.nan,
                          high=math.nan, t_cr1=math.nan)
    f = FixedNull.build(v, X, design.kind, design.g)
    scale = float(np.linalg.norm(v - v.mean())) or 1.0
    if f.em2 <= (1e-10 * scale) ** 2:
        return nan
    ey = f.project(y[None, :])[0]
    beta, t = (float(a[0]) for a in f.t_stats(ey[None, :]))
    Ey = f.project(design.resample(ey))
    p = resample_pvalue(t, f.t_stats(Ey)[1], design.enumerated)
    se = abs(beta / t) if t != 0 and math.isfinite(t) else math.nan
    low = high = math.nan
    if math.isfinite(se) and se > 0:
        null_at = f.shifted_null(Ey, f.project(design.resample(f.em)))

        def p_at(b0: float) -> float:
            return resample_pvalue((beta - b0) / se, null_at(b0), design.enumerated)

        low, high = ci_by_inversion(p_at, beta, se, 1.0 - confidence_level)
    t_cr1 = coefficient_t(v, y, X, "cr1", design.g)[1]
    return CoefficientTest(beta=beta, se=se, t=t, p=p, low=low, high=high, t_cr1=t_cr1)
