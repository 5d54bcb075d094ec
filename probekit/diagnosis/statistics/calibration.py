"""What a population can detect: size, power and CI coverage of the marker analysis, simulated.

A verdict of "no association" over 20 models says little unless the reader knows what 20
models could have detected. :func:`calibrate` answers that on the population's own design: it
keeps the table's covariates, groups and number of models, replaces the outcome and a marker
by synthetic columns with a planted partial correlation, and runs
:func:`~probekit.diagnosis.marker_analysis` on each synthetic table. The rates it reports
(rejections of the partial test, verdicts, coverage of the partial r's interval) are the
operating characteristics of the analysis on *this* design, not on an idealised one.

The generative model (``X = [1, C]``: intercept and covariate design as
:func:`marker_analysis` builds it, text covariates one-hot; ``g(i)``: the group of model ``i``):

- **outcome**: ``y_i = mu_y,i + s_y z_y,i`` with ``mu_y = H y`` the least-squares fit of the
  real outcome on ``X`` (``H``: projection on ``X``'s columns), ``s_y^2 = sigma_b^2 +
  sigma_w^2`` and ``z_y,i = sqrt(tau) b_g(i) + sqrt(1 - tau) e_i`` (``b_g``, ``e_i``
  independent standard normal; ``tau = sigma_b^2 / s_y^2``). ``sigma_b^2`` (between groups)
  and ``sigma_w^2`` (within) are moment estimates from the real outcome's residuals
  ``r = (I - H) y``: the within- and between-group sums of squares ``r' (I - P_D) r`` and
  ``r' P_D r`` (``P_D``: projection on the group indicators) equated to their expectations
  under ``y = X beta + D b + e``, computed exactly for the design (Henderson's method 3
  style; Searle, Casella & McCulloch, "Variance Components", 1992, ch. 5); a negative
  ``sigma_b^2`` is set to 0 (and ``sigma_w^2 = r'r / (n - rank X)``), as is ``sigma_b^2``
  without groups or with one model per group.
- **marker**: ``m_i = mu_m,i + s_m z_m,i`` with ``z_m = rho z_y + sqrt(1 - rho^2) z_perp``,
  ``z_perp`` an independent copy of ``z_y``'s structure (its own ``b'_g``, ``e'_i``). With a
  real ``marker``: ``mu_m`` its least-squares fit on ``X`` and ``s_m^2`` its residual variance
  ``|(I - H) m|^2 / (n - rank X)`` (over the rows where it has a value). Without one, the marker
  is built to be confounded by the design as much as the outcome is: ``mu_m = (mu_y -
  mean(mu_y)) / s_y`` and ``s_m = 1`` (the outcome's design part in units of its residual sd).
- Hence, for every model, ``corr(m_i - mu_m,i, y_i - mu_y,i) = rho`` (both residuals have
  the same group / model split ``tau``, so the correlation is ``rho`` at both levels), and since
  ``mu_m`` and ``mu_y`` lie in ``X``'s column space, **the true partial correlation of ``m`` and
  ``y`` given the covariates is ``rho``**, the planted effect (0 for the null); it is ``rho``
  also given the covariates and group fixed effects (an analysis that conditions on the groups),
  the within-group residuals being correlated by ``rho`` too.

Every simulation draws fresh ``b``, ``e``, ``b'``, ``e'``; the same draws serve every effect
(common random numbers: the power curve is smooth in ``rho``), and simulation ``k`` uses the
same permutation / bootstrap seed for every effect. For each effect the rates over the
simulations are: the **rejection rate** of the partial test (Freedman-Lane p <= alpha, for one
marker tested alone, i.e. before any Holm adjustment over markers): the size at ``rho = 0``,
the power otherwise; the rate of each **verdict**; the **coverage** of the partial r's
confidence interval for ``rho`` (over the simulations where it is defined); each with its Monte
Carlo standard error ``sqrt(rate (1 - rate) / n_simulations)``. The smallest effect with 80%
power is read off the power curve ``(0, size), (rho_1, power_1), ...`` by linear interpolation
at its first crossing of 0.8 (NaN when no planted effect reaches it).

The marker analysis itself is the one the report runs (Freedman & Lane 1983 for the partial
test; Jiang et al., "Fantastic Generalization Measures and Where to Find Them", ICLR 2020, for
why the partial given the design is the question); the calibration measures it, nothing else.
"""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from jaxtyping import Float, Int

from probekit.errors import ConfigError, DataError, ProbekitError
from probekit.report.blocks import Block, Column, Table, Text
from probekit.report.notebook import NotebookMixin

from .table import MarkerTable, as_marker_table

__all__ = [
    "REPORT_PERMUTATIONS",
    "REPORT_SIMULATIONS",
    "Calibration",
    "SimulationDesign",
    "calibrate",
    "calibration_section",
    "coverage_note",
    "fit_design",
    "simulate",
    "variance_components",
]

#: simulations and permutations of the report's calibration section (``[diagnosis]
#: calibration_simulations`` overrides the former where the file format has the key)
REPORT_SIMULATIONS = 200
REPORT_PERMUTATIONS = 199
#: verdict labels in display order (both the current and the rebuilt analysis' labels); any
#: other label the analysis returns is shown after these
VERDICT_ORDER = ("adds_beyond_covariates", "partial_association", "explained_by_covariates",
                 "no_association", "inconclusive", "not_applicable")
_RESERVED = ("markers", "covariates", "groups", "n_permutations", "seed")


# --------------------------------------------------------------------------- the generative model


def _projection_basis(X: Float[np.ndarray, "n q"]) -> Float[np.ndarray, "n k"]:
    """Orthonormal basis of the column space of ``X`` (rank-revealing SVD)."""
    u, s, _ = np.linalg.svd(X, full_matrices=False)
    return u[:, s > s[0] * 1e-10] if s.size else u[:, :0]


def variance_components(
    r: Float[np.ndarray, " n"], Q: Float[np.ndarray, "n k"], groups: Int[np.ndarray, " n"] | None
) -> tuple[float, float]:
    """Moment estimates ``(sigma_b^2, sigma_w^2)`` of ``y = X beta + D b + e`` from ``r = (I - H) y``.

    ``Q``: orthonormal basis of ``X``'s columns (``H = Q Q'``, ``R = I - H``); ``D``: group
    indicators, ``P_D`` its projection. ``S_w = r' (I - P_D) r`` and ``S_b = r' P_D r`` have
    expectations ``sigma_w^2 tr(R A R) + sigma_b^2 tr(D' R A R D)`` for ``A = I - P_D`` and
    ``A = P_D``; the two equations are solved for the variances. ``sigma_b^2 < 0``, no groups,
    one model per group or an unidentifiable split give ``(0, r'r / tr(R))``.
    """
    n = r.size
    dof = n - Q.shape[1]
    pooled = (0.0, float(r @ r) / dof) if dof > 0 else (0.0, 0.0)
    if groups is None:
        return pooled
    _, g = np.unique(groups, return_inverse=True)
    D = np.zeros((n, int(g.max()) + 1))
    D[np.arange(n), g] = 1.0
    if D.shape[1] == n:
        return pooled
    counts = D.sum(0)

    def between(v: np.ndarray) -> np.ndarray:  # P_D v: each row's group mean
        return D @ ((D.T @ v) / (counts[:, None] if v.ndim == 2 else counts))

    # tr(R A R) = tr(A R) = tr(A) - tr(Q' A Q) (R idempotent); R D = D - Q (Q' D)
    PQ, RD = between(Q), D - Q @ (Q.T @ D)
    PRD = between(RD)
    tr_pq = float((Q * PQ).sum())
    A = np.array([[n - D.shape[1] - (float((Q * Q).sum()) - tr_pq), float((RD * (RD - PRD)).sum())],
                  [D.shape[1] - tr_pq, float((RD * PRD).sum())]])
    pr = between(r)
    s = np.array([float(r @ (r - pr)), float(r @ pr)])
    if abs(np.linalg.det(A)) <= 1e-10 * np.abs(A).max() ** 2:
        return pooled
    sw2, sb2 = np.linalg.solve(A, s)
    if sb2 <= 0 or sw2 <= 0:
        return pooled
    return float(sb2), float(sw2)


@dataclass(frozen=True, kw_only=True)
class SimulationDesign:
    """The fitted generative model of :func:`calibrate` (module docstring for the math).

    Attributes:
        X: ``[1, C]``, the intercept and covariate design (n models x q terms).
        groups: group code per model (None: no groups).
        mu_y, mu_m: design parts of the outcome and the marker.
        s_y, s_m: residual standard deviations of the outcome and the marker.
        tau: share of the residual variance between groups, ``sigma_b^2 / s_y^2``.
        design_r2: share of the real outcome's variance its design part explains.
        marker_source: where ``mu_m`` comes from (a sentence fragment).
    """

    X: Float[np.ndarray, "n q"]
    groups: Int[np.ndarray, " n"] | None
    mu_y: Float[np.ndarray, " n"]
    mu_m: Float[np.ndarray, " n"]
    s_y: float
    s_m: float
    tau: float
    design_r2: float
    marker_source: str

    @property
    def n(self) -> int:
        """Number of models."""
        return int(self.mu_y.size)


def fit_design(
    y: Float[np.ndarray, " n"],
    X: Float[np.ndarray, "n q"],
    groups: Int[np.ndarray, " n"] | None = None,
    marker: Float[np.ndarray, " n"] | None = None,
    marker_name: str = "",
) -> SimulationDesign:
    """The generative model of :func:`calibrate` fitted to a real outcome (and marker).

    Args:
        y: the real outcome.
        X: the design with its intercept column.
        groups: group codes (None: none).
        marker: a real marker (NaN where missing) whose design part and scale the synthetic
            marker keeps; None: the confounded default (module docstring).
        marker_name: its name, for :attr:`SimulationDesign.marker_source`.

    Raises:
        DataError: the outcome (or marker) is a linear function of the covariates: there is
            no residual to plant a partial correlation in.
    """
    Q = _projection_basis(X)
    mu_y = Q @ (Q.T @ y)
    r = y - mu_y
    sb2, sw2 = variance_components(r, Q, groups)
    s_y = math.sqrt(sb2 + sw2)
    scale = float(np.linalg.norm(y - y.mean()))
    if s_y <= 1e-10 * max(scale, 1e-300):
        raise DataError("the outcome is a linear function of the covariates (no residual "
                        "variance): no partial correlation can be planted or detected; drop a "
                        "covariate")
    design_r2 = 1.0 - float(r @ r) / scale**2
    if marker is None:
        mu_m, s_m = (mu_y - mu_y.mean()) / s_y, 1.0
        source = "the outcome's design part in units of its residual sd"
    else:
        keep = ~np.isnan(marker)
        Qm = _projection_basis(X[keep])
        beta = np.linalg.lstsq(X[keep], marker[keep], rcond=None)[0]
        rm = marker[keep] - Qm @ (Qm.T @ marker[keep])
        dof = int(keep.sum()) - Qm.shape[1]
        s_m = math.sqrt(float(rm @ rm) / dof) if dof > 0 else 0.0
        if s_m <= 1e-10 * max(float(np.abs(marker[keep]).max()), 1e-300):
            raise DataError(f"marker {marker_name!r} is a linear function of the covariates (no "
                            "residual variance): calibrate without it (marker=None)")
        mu_m = X @ beta
        source = f"the design part of {marker_name}"
    return SimulationDesign(X=X, groups=groups, mu_y=mu_y, mu_m=mu_m, s_y=s_y, s_m=s_m,
                            tau=sb2 / (sb2 + sw2), design_r2=design_r2, marker_source=source)


def _unit_residuals(
    design: SimulationDesign, n_simulations: int, rng: np.random.Generator
) -> Float[np.ndarray, "sim n"]:
    """``sqrt(tau) b_g(i) + sqrt(1 - tau) e_i``, one row per simulation (unit variance)."""
    e = rng.standard_normal((n_simulations, design.n))
    if design.groups is None or design.tau == 0.0:
        return e
    _, g = np.unique(design.groups, return_inverse=True)
    b = rng.standard_normal((n_simulations, int(g.max()) + 1))
    return math.sqrt(design.tau) * b[:, g] + math.sqrt(1.0 - design.tau) * e


def simulate(
    design: SimulationDesign, effects: Sequence[float], n_simulations: int,
    rng: np.random.Generator,
) -> tuple[Float[np.ndarray, "sim n"], Float[np.ndarray, "effect sim n"]]:
    """Synthetic outcomes and markers: ``Y[k]`` and ``M[j, k]`` (effect ``j``, simulation ``k``).

    ``Y = mu_y + s_y Z_y``; ``M[j] = mu_m + s_m (rho_j Z_y + sqrt(1 - rho_j^2) Z_perp)`` with
    ``Z_y``, ``Z_perp`` independent draws of :func:`_unit_residuals`; the same draws for every
    effect. The true partial correlation of ``(M[j], Y)`` given ``X`` is ``rho_j``.
    """
    zy = _unit_residuals(design, n_simulations, rng)
    zp = _unit_residuals(design, n_simulations, rng)
    Y = design.mu_y + design.s_y * zy
    rho = np.asarray(effects, dtype=np.float64)[:, None, None]
    M = design.mu_m + design.s_m * (rho * zy + np.sqrt(1.0 - rho**2) * zp)
    return Y, M


# --------------------------------------------------------------------------- the result


def _rate(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return math.nan, math.nan
    p = k / n
    return p, math.sqrt(p * (1.0 - p) / n)


def _pct(x: float) -> str:
    return "undefined" if not math.isfinite(x) else f"{x:.0%}" if x >= 0.095 else f"{x:.1%}"


@dataclass(frozen=True, kw_only=True, repr=False)
class Calibration(NotebookMixin):
    """Result of :func:`calibrate`: one record per effect (0 first).

    Each record: ``effect`` (the true partial r), ``n_simulations``, ``rejected`` (rate of
    partial p <= alpha: size at 0, power otherwise) and ``rejected_se`` (its Monte Carlo SE),
    ``covered`` / ``covered_se`` (the partial r's CI holds ``effect``; over ``n_ci_defined``
    simulations), and ``verdict_<label>`` / ``verdict_<label>_se`` per verdict label.

    Attributes:
        outcome, covariates, groups, marker: the question simulated (``marker``: the real
            marker whose design part was kept, or None).
        n_models, n_groups: the population's size.
        effects: 0 and the planted partial correlations.
        records: the rates, one dict per effect.
        effect_80: smallest partial r with 80% power (interpolated; NaN: not reached).
        design_r2: share of the outcome's variance explained by the covariates.
        between_share: share of the outcome's residual variance between groups (``tau``).
        marker_source: where the synthetic marker's design part comes from.
        settings: n_simulations, n_permutations, n_bootstrap, alpha, confidence_level, seed and
            the other options passed to the analysis.
        seconds: wall time of the simulations.
        warnings: sentences the reader must see.
    """

    outcome: str
    covariates: tuple[str, ...]
    groups: str | None
    marker: str | None
    n_models: int
    n_groups: int
    effects: tuple[float, ...]
    records: tuple[dict[str, Any], ...]
    effect_80: float
    design_r2: float
    between_share: float
    marker_source: str
    settings: dict[str, Any]
    seconds: float = field(default=0.0, compare=False)
    warnings: tuple[str, ...] = ()

    def __getitem__(self, effect: float) -> dict[str, Any]:
        """The record of ``effect`` (``KeyError`` listing the effects if unknown)."""
        for r in self.records:
            if math.isclose(r["effect"], effect, abs_tol=1e-12):
                return dict(r)
        raise KeyError(f"no effect {effect!r}; effects: {list(self.effects)}")

    @property
    def verdicts(self) -> tuple[str, ...]:
        """The verdict labels of the records, in display order."""
        return tuple(k[len("verdict_"):] for k in self.records[0]
                     if k.startswith("verdict_") and not k.endswith("_se"))

    def to_records(self) -> list[dict[str, Any]]:
        """One dict per effect (see the class docstring)."""
        return [dict(r) for r in self.records]

    def to_dict(self) -> dict[str, Any]:
        """Strict-JSON form (NaN -> null): the question, design, settings, records, sentence."""
        from probekit.report.blocks import strict_json

        return strict_json({
            "outcome": self.outcome, "covariates": list(self.covariates), "groups": self.groups,
            "marker": self.marker, "n_models": self.n_models, "n_groups": self.n_groups,
            "effects": list(self.effects), "effect_80": self.effect_80,
            "design_r2": self.design_r2, "between_share": self.between_share,
            "marker_source": self.marker_source, "settings": dict(self.settings),
            "seconds": self.seconds, "warnings": list(self.warnings),
            "records": self.to_records(), "sentence": self.sentence(),
        })

    def _title(self) -> str:
        return f"What this population can detect ({self.outcome})"

    def _summary(self) -> str:
        null = self.records[0]
        power = ", ".join(f"{r['effect']:g}: {r['rejected']:.0%}" for r in self.records[1:])
        return (f"{self.n_models} models, size {null['rejected']:.1%} at alpha "
                f"{self.settings['alpha']:g}, power {power}")

    def _population(self) -> str:
        where = (f"in {self.n_groups} {self.groups} groups" if self.groups
                 else "(each its own group)")
        names = list(self.covariates)
        joined = ", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else "".join(names)
        given = f"given {joined}" if names else "with no covariates"
        return f"{self.n_models} models {where}, {given}"

    def sentence(self) -> str:
        """One sentence: size, power at each effect, the 80%-power effect and CI coverage.

        E.g. ``"With 20 models in 5 seed groups, given noise, a null marker's partial test
        rejects in 4.5% of 200 simulations (nominal 5%); a partial r of 0.4 is detected in
        61%, 0.6 in 93% (80% power from about 0.52); the 95% CI of the partial r covers the
        true value in 93-95%."``
        """
        alpha = self.settings["alpha"]
        null, planted = self.records[0], self.records[1:]
        power = ", ".join(
            (f"a partial r of {r['effect']:g} is detected in " if i == 0 else f"{r['effect']:g} in ")
            + _pct(r["rejected"]) for i, r in enumerate(planted))
        reach = (f" (80% power from a partial r of about {self.effect_80:.2f})"
                 if math.isfinite(self.effect_80)
                 else f" (80% power is not reached up to {self.effects[-1]:g})")
        cover = [r["covered"] for r in self.records if math.isfinite(r["covered"])]
        level = f"{self.settings['confidence_level']:.0%}"
        if cover:
            lo, hi = _pct(min(cover)), _pct(max(cover))
            cov = (f"the {level} CI of the partial r covers the true value in "
                   f"{lo if lo == hi else f'{lo}-{hi}'}")
        else:
            cov = f"the {level} CI of the partial r is undefined"
        return (f"With {self._population()}, a null marker's partial test rejects in "
                f"{_pct(null['rejected'])} of {null['n_simulations']} simulations (nominal "
                f"{alpha:.0%}); {power}{reach}; {cov}.")

    def _blocks(self) -> tuple[Block, ...]:
        alpha = self.settings["alpha"]
        level = f"{self.settings['confidence_level']:.0%}"
        cols = [Column(key="effect", header="true partial r", fmt=".2f"),
                Column(key="rejected", header=f"partial p <= {alpha:g}", fmt=".1%"),
                Column(key="rejected_se", header="MC SE", fmt=".1%"),
                Column(key="covered", header=f"{level} CI covers", fmt=".1%"),
                Column(key="covered_se", header="MC SE ", fmt=".1%")]
        cols += [Column(key=f"verdict_{v}", header=v.replace("_", " "), fmt=".1%")
                 for v in self.verdicts]
        caption = (
            f"{self.settings['n_simulations']} simulations per row on this population's design "
            f"({self._population()}): synthetic outcome = the real outcome's least-squares fit on "
            f"the covariates (R^2 {self.design_r2:.2f}) + a {self.groups or 'group'} effect "
            f"({self.between_share:.0%} of the residual variance) + model noise; synthetic "
            f"marker = {self.marker_source} + residuals correlated so that the true partial r "
            "given the covariates is the row's value. Rates of the partial (Freedman-Lane) test "
            f"with {self.settings['n_permutations']} permutations for one marker alone (no Holm), "
            "of each verdict, and of the CI covering the true partial r; MC SE = Monte Carlo "
            "standard error.")
        blocks: list[Block] = [Text(text=w, level="warning") for w in self.warnings]
        blocks.append(Table(title=f"What this population can detect ({self.outcome})",
                            columns=tuple(cols), rows=tuple(self.records), caption=caption))
        blocks.append(Text(text=self.sentence()))
        return tuple(blocks)


# --------------------------------------------------------------------------- the simulation


def _power_crossing(effects: Sequence[float], power: Sequence[float], target: float = 0.8) -> float:
    """First ``effect`` at which the piecewise-linear power curve reaches ``target``."""
    for i in range(1, len(effects)):
        p0, p1 = power[i - 1], power[i]
        if p1 >= target and p0 < target:
            return float(effects[i - 1] + (target - p0) * (effects[i] - effects[i - 1]) / (p1 - p0))
    return math.nan


def _resolve_groups(t: MarkerTable, groups: str | None, outcome: str,
                    covariates: Sequence[str]) -> str | None:
    from .grouping import resolve_groups

    return resolve_groups(t, groups, taken=(outcome, *covariates), covariates=covariates)[0]


def _check(effects: Sequence[float], n_simulations: int, n_permutations: int,
           options: Mapping[str, Any]) -> tuple[float, ...]:
    clash = [k for k in _RESERVED if k in options]
    if clash:
        raise ConfigError(f"calibrate sets {clash[0]!r} itself; pass it as calibrate's own "
                          "argument (covariates, groups, n_permutations, seed) or not at all "
                          "(markers: the synthetic one)")
    eff = tuple(float(e) for e in effects)
    if not eff:
        raise ConfigError("effects is empty; give the partial correlations to plant, e.g. "
                          "(0.2, 0.4, 0.6)")
    bad = [e for e in eff if not 0.0 < e < 1.0]
    if bad:
        raise ConfigError(f"effect {bad[0]!r} is not a partial correlation in (0, 1); the null "
                          "(0) is always simulated, the test is two-sided")
    if len(set(eff)) != len(eff):
        raise ConfigError(f"effects {list(eff)} repeat a value; give each once")
    from probekit.stats.limits import MAX_SIMULATIONS
    from probekit.stats.permutation import check_n_permutations

    check_n_permutations(n_simulations, name="n_simulations", bound=MAX_SIMULATIONS)
    check_n_permutations(n_permutations)
    for name in ("alpha", "confidence_level"):
        v = options.get(name, 0.5)
        if not 0.0 < v < 1.0:
            raise ConfigError(f"{name} must be in (0, 1), got {v}")
    return (0.0, *sorted(eff))


def _synthetic_name(t: MarkerTable, base: str) -> str:
    name = base
    while name in t.columns:
        name = "_" + name
    return name


def calibrate(
    table: Mapping[str, Sequence[Any]] | Any,
    outcome: str,
    *,
    covariates: Sequence[str] = (),
    groups: str | None = "auto",
    marker: str | None = None,
    effects: Sequence[float] = (0.2, 0.4, 0.6),
    n_simulations: int = 200,
    n_permutations: int = 199,
    seed: int = 0,
    **analysis_options: Any,
) -> Calibration:
    """Size, power and CI coverage of :func:`marker_analysis` on the population's own design.

    The generative model and the rates are defined in the module docstring: the covariates,
    groups and number of models are the table's; the outcome keeps its real design part and
    residual variance split (between / within groups); a synthetic marker has a planted true
    partial correlation ``rho`` with the outcome given the covariates (0, then each of
    ``effects``); every synthetic table is analysed by :func:`marker_analysis` exactly as the
    report analyses the real one.

    Args:
        table: mapping column -> sequence, or a pandas DataFrame; one row per model.
        outcome: the outcome column (numeric, complete, not a linear function of the covariates).
        covariates: the covariate columns (text columns one-hot), as in :func:`marker_analysis`.
        groups: the groups column; ``"auto"``: resolved as :func:`marker_analysis` does
            (:mod:`.grouping`: ``seed``, else a seed-named column), else None (each model its
            own group, no group effect).
        marker: a real marker column whose design part and residual scale the synthetic marker
            keeps; None: a marker confounded by the design as much as the outcome is.
        effects: planted partial correlations, each in (0, 1) (the null 0 is always added).
        n_simulations: synthetic populations per effect (Monte Carlo SE of a rate near 5%: 1.5
            points at 200).
        n_permutations: permutations of each analysis' partial test (199: p can reach 0.005).
        seed: seeds the simulations and each analysis' permutations and resamples.
        **analysis_options: passed to :func:`marker_analysis` (``n_bootstrap`` defaults to
            1000, the analysis' minimum; ``alpha``, ``confidence_level``, ``strata``, ...).

    Returns:
        A :class:`Calibration`.

    Raises:
        ConfigError: unknown columns, effects outside (0, 1), bad counts, an option calibrate
            sets itself.
        DataError: fewer than 3 groups, missing cells in the outcome / covariates / groups, an
            outcome (or marker) that is a linear function of the covariates.
    """
    from .analysis import marker_analysis

    all_effects = _check(effects, n_simulations, n_permutations, analysis_options)
    options = {"n_bootstrap": 1000, **analysis_options}
    alpha = float(options.get("alpha", 0.05))
    level = float(options.get("confidence_level", 0.95))
    t = as_marker_table(table)
    covariates = (covariates,) if isinstance(covariates, str) else tuple(covariates)
    t.check_names([outcome], "outcome")
    t.check_names(covariates, "covariate")
    gcol = _resolve_groups(t, groups, outcome, covariates)
    if outcome in covariates or outcome == gcol:
        raise ConfigError(f"the outcome {outcome!r} is also a covariate or the groups column")
    if marker is not None and marker in (outcome, gcol, *covariates):
        raise ConfigError(f"marker {marker!r} is also the outcome, a covariate or the groups")
    y = t.numeric(outcome, "outcome")
    C, _ = t.design(covariates)
    X = np.column_stack([np.ones(t.n_rows), C])
    g = t.codes(gcol, "groups")[0] if gcol is not None else None
    n_groups = int(np.unique(g).size) if g is not None else t.n_rows
    if n_groups < 3:
        raise DataError(f"leave-one-group-out needs >= 3 groups; groups column {gcol!r} has "
                        f"{n_groups}: pass groups=None (each model its own group) or more seeds"
                        if gcol else f"the analysis needs >= 3 models, the table has {t.n_rows}")
    if t.n_rows <= np.linalg.matrix_rank(X) + 1:
        raise DataError(f"{t.n_rows} models are too few for {np.linalg.matrix_rank(X)} "
                        "regression terms; drop covariates")
    m_real = t.numeric(marker, "marker", allow_missing=True) if marker is not None else None
    design = fit_design(y, X, g, m_real, marker or "")

    keep = list(dict.fromkeys([*covariates, *([gcol] if gcol else []),
                               *([options["strata"]] if options.get("strata") else [])]))
    t.check_names(keep, "strata")
    mname = _synthetic_name(t, "synthetic_marker")
    template = as_marker_table({**{c: list(t.columns[c]) for c in keep},
                                outcome: y.tolist(), mname: y.tolist()})
    start = time.perf_counter()
    rng = np.random.default_rng([seed, 0x5EED])
    Y, M = simulate(design, all_effects, int(n_simulations), rng)
    seeds = np.random.SeedSequence([seed, 1]).generate_state(int(n_simulations)).astype(np.int64)
    rows: list[list[dict[str, Any]]] = [[] for _ in all_effects]
    for k in range(int(n_simulations)):
        y_obj = Y[k].astype(object)
        for j in range(len(all_effects)):
            cols = {**template.columns, outcome: y_obj, mname: M[j, k].astype(object)}
            synthetic = dataclasses.replace(template, columns=cols)
            result = marker_analysis(synthetic, outcome, markers=[mname], covariates=covariates,
                                     groups=gcol, n_permutations=int(n_permutations),
                                     seed=int(seeds[k]), **options)
            rows[j].append(result.to_records()[0])
    seconds = time.perf_counter() - start
    records = _rates(all_effects, rows, alpha)
    power = [r["rejected"] for r in records]
    warnings = []
    if n_simulations < 100:
        warnings.append(f"only {n_simulations} simulations per effect: each rate's Monte Carlo SE "
                        f"is up to {0.5 / math.sqrt(n_simulations):.0%}")
    return Calibration(
        outcome=outcome, covariates=covariates, groups=gcol, marker=marker, n_models=t.n_rows,
        n_groups=n_groups, effects=all_effects, records=tuple(records),
        effect_80=_power_crossing(all_effects, power), design_r2=design.design_r2,
        between_share=design.tau, marker_source=design.marker_source,
        settings={"n_simulations": int(n_simulations), "n_permutations": int(n_permutations),
                  "alpha": alpha, "confidence_level": level, "seed": seed,
                  **{k: v for k, v in options.items() if k not in ("alpha", "confidence_level")}},
        seconds=round(seconds, 3), warnings=tuple(warnings))


def _rates(effects: Sequence[float], rows: list[list[dict[str, Any]]],
           alpha: float) -> list[dict[str, Any]]:
    """One record of rates per effect from the analyses' records (fields read by name)."""
    seen = {r["verdict"] for per in rows for r in per}
    labels = [v for v in VERDICT_ORDER if v in seen] + sorted(seen - set(VERDICT_ORDER))
    out = []
    for rho, per in zip(effects, rows, strict=True):
        n = len(per)
        rejected = sum(1 for r in per if r.get("partial_p", math.nan) <= alpha)
        lo = np.array([r.get("partial_low", math.nan) for r in per], dtype=float)
        hi = np.array([r.get("partial_high", math.nan) for r in per], dtype=float)
        defined = np.isfinite(lo) & np.isfinite(hi)
        covered = int(((lo <= rho) & (rho <= hi) & defined).sum())
        rec: dict[str, Any] = {"effect": float(rho), "n_simulations": n}
        rec["rejected"], rec["rejected_se"] = _rate(rejected, n)
        rec["covered"], rec["covered_se"] = _rate(covered, int(defined.sum()))
        rec["n_ci_defined"] = int(defined.sum())
        for v in labels:
            rec[f"verdict_{v}"], rec[f"verdict_{v}_se"] = _rate(
                sum(1 for r in per if r["verdict"] == v), n)
        out.append(rec)
    return out


def coverage_note(calibration: Mapping[str, Any] | None) -> str | None:
    """``"CI coverage measured on this design: 91-95%"`` from a calibration's ``to_dict()``."""
    if not calibration:
        return None
    cover = [r["covered"] for r in calibration.get("records", ())
             if r.get("covered") is not None and math.isfinite(r["covered"])]
    if not cover:
        return None
    lo, hi = _pct(min(cover)), _pct(max(cover))
    level = f"{calibration['settings']['confidence_level']:.0%}"
    return f"{level} CI coverage measured on this design: {lo if lo == hi else f'{lo}-{hi}'}"


def calibration_section(
    table: Mapping[str, Sequence[Any]], outcome: str, covariates: Sequence[str],
    groups: str | None, settings: Any, extras: dict[str, Any],
    analysis_options: Mapping[str, Any] | None = None,
) -> tuple[Block, ...]:
    """The report's calibration blocks (the diagnosis runner's one call); records in ``extras``.

    ``settings``: the ``[diagnosis]`` section (``alpha``, ``seed``; ``calibration_simulations``
    when the file format has it, else :data:`REPORT_SIMULATIONS`; 0 leaves the section out).
    ``analysis_options``: the analysis the report ran (coding, inference, margin: the caller's
    resolved ``marker_analysis`` keywords), simulated as run. A population the calibration
    cannot simulate gives a warning block instead.
    """
    given = getattr(settings, "calibration_simulations", None)
    n = int(REPORT_SIMULATIONS if given is None else given)
    if n <= 0:
        return ()
    # the analysis the report ran (coding, inference, margin); the permutation cap stays default
    same_analysis = {k: v for k, v in (analysis_options or {}).items()
                     if k != "max_permutations"}
    try:
        cal = calibrate(table, outcome, covariates=covariates, groups=groups, n_simulations=n,
                        n_permutations=REPORT_PERMUTATIONS, seed=int(getattr(settings, "seed", 0)),
                        alpha=float(getattr(settings, "alpha", 0.05)), **same_analysis)
    except ProbekitError as err:
        return (Text(text=f"What this population can detect: not simulated ({err})",
                     level="warning"),)
    extras["calibration"] = cal.to_dict()
    return cal._blocks()
