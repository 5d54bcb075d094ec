"""Which markers predict the outcome over a population of models, and beyond the covariates?

Anchors: Jiang et al., "Fantastic Generalization Measures and Where to Find Them", ICLR 2020
(a plain correlation misleads when a design knob drives both marker and outcome); An & Du's HE
study for the level-mean unit. For each marker ``m``, outcome ``y``, covariate terms ``C``
(:meth:`MarkerTable.design`) and groups ``g`` (by default the ``seed`` column):

- **partial test**: the OLS coefficient ``beta`` of ``m`` in ``y ~ X + m``, studentised
  (``t = beta / se``); ``partial_r`` = Pearson r of the residuals of ``m`` and ``y`` on ``X``.
  Default design (``inference="within_groups"``): ``X = [1, C, group fixed effects]``, HC3
  standard error (Long & Ervin 2000), p by Freedman & Lane (1983) with the reduced model's
  residuals permuted *within groups* (and within ``strata``): the partial effect is a
  within-group effect, and models that share a seed's random effects are never exchanged
  across seeds. ``inference="cluster"``: the same ``X`` (group fixed effects in), CR1 standard
  error clustered by group, p by the wild cluster restricted bootstrap (Webb weights for fewer
  than 12 groups; MacKinnon & Webb 2017, 2018). No groups: ``X = [1, C]``, HC3, Freedman-Lane over all models.
  ``partial_spearman``: the same test on the ranks of ``m`` and ``y``.
- **marginal test**: the same machinery with ``X0 = [1, group fixed effects]`` (``[1]``
  without fixed effects): ``marginal_r`` and ``p``; ``spearman``, ``pearson`` are the plain
  effect sizes over all models.
- **CIs** are the inversion of the same test: ``{b0 : p(H0: beta = b0) > 1 - confidence}``
  (the test run on ``y - b0 m`` with the same permutations / weights), so ``p <= alpha`` iff the
  CI excludes 0; mapped to the r scale by ``r(b) = b |e_m| / sqrt(b^2 |e_m|^2 + RSS_full)``
  (:func:`.inference.r_of_beta`: ``r(beta_hat)`` is the observed r).
- **out-of-sample gain**: ``delta_r2`` of leave-one-group-out predictions (:mod:`.association`),
  ``oos_p`` its one-sided p under the partial test's own resamples; ``delta_r2_null95`` the
  null's 95th percentile (the group-bootstrap interval of earlier versions is gone).
- **verdicts** and **flags**: :mod:`.verdicts` and ``docs/diagnosis.md``.
- **groups** ``"auto"``: :mod:`.grouping` (``seed``, else a seed-named column; a structural
  look-alike is refused; a record without groups is flagged ``ungrouped``).

Holm over the analysed markers (marginal and partial families separately). A marker read at
several layers (columns ``NAME@L<k>``) is a *family*: the partial p-values then go through the
family-aware Holm of :mod:`.families` (the layers Holm-corrected among themselves, the family
counted once across markers; without families it is Holm exactly); the marginal family stays
plain Holm. Permutation
p-values carry their Monte Carlo standard error ``sqrt(p (1 - p) / B)``; a partial p within 3
MC SE of a Holm threshold ``alpha / j`` that decides it doubles that row set's permutations
(fresh stream) up to ``max_permutations``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np
from scipy import stats as sps

from probekit.errors import ConfigError, DataError
from probekit.report.notebook import NotebookMixin
from probekit.report.numbers import format_p, p_floor
from probekit.stats.multiple import holm
from probekit.stats.permutation import check_n_permutations, check_seed, n_permutations_for

from .association import FIXED_EFFECTS, RowSet, marker_stats, partial_p, row_set
from .blocks import logo_cell
from .families import weighted_holm
from .grouping import resolve_groups, ungrouped_flag
from .inference import logo_operator, stratified_permutations
from .options import DEFAULTS
from .table import MarkerTable, as_marker_table
from .verdicts import (
    ADDS,
    EXPLAINED,
    INCONCLUSIVE,
    NEAR_IDENTICAL,
    NONE,
    NOT_APPLICABLE,
    PARTIAL,
    decide,
)

if TYPE_CHECKING:
    import pandas as pd

__all__ = [
    "ADDS",
    "EXPLAINED",
    "INCONCLUSIVE",
    "NONE",
    "NOT_APPLICABLE",
    "PARTIAL",
    "MarkerAnalysis",
    "MarkerStats",
    "logo_predictions",
    "marker_analysis",
    "permutations",
]

permutations = stratified_permutations  # the former name


def logo_predictions(y: np.ndarray, X: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Leave-one-group-out OLS predictions of ``y`` from ``X`` (``X`` holds the intercept)."""
    return logo_operator(X, groups) @ y


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, kw_only=True)
class MarkerStats:
    """The statistics of one marker (definitions in the module docstring).

    Attributes:
        marker: column name.
        verdict: one of :data:`.verdicts.VERDICTS`.
        flags: short strings qualifying the verdict (``near_identical``, ``few_groups(G=5)``,
            ``ungrouped(...)``, ``degenerate_outcome``, ``few_outcome_examples(...)``,
            ``self_reference_excluded(k rows)`` and the runner's own).
        reason: why the marker is not applicable, or a note; "".
        n, n_groups, n_missing: models and groups used, rows dropped (missing or excluded).
        spearman, pearson: plain rank / linear correlation over the models used.
        spearman_low, spearman_high: NaN (kept for the record layout; the marginal CI is on
            ``marginal_r``).
        pearson_low, pearson_high: the marginal CI when the marginal design is ``[1]`` (no
            group fixed effects), where ``marginal_r`` is Pearson's r; NaN otherwise.
        marginal_r, marginal_low, marginal_high: r of ``m`` and ``y`` given the group fixed
            effects (Pearson's r without them) and its test-inversion CI.
        p, p_mcse, p_holm: the marginal test's p, its Monte Carlo SE and Holm p.
        partial_r, partial_low, partial_high, partial_t: partial r given the design, its CI, the
            studentised coefficient.
        partial_p, partial_p_mcse, partial_p_holm: its p (raw), MC SE and Holm p.
        partial_spearman, partial_spearman_p, partial_spearman_p_mcse: the rank version.
        r2_covariates, r2_full, delta_r2: leave-one-group-out R^2 of ``y ~ C`` and
            ``y ~ C + m`` and their difference; oos_p, oos_p_mcse: its one-sided p;
            delta_r2_null95: the null's 95th percentile.
        mde_partial_r: the smallest |partial r| this design detects with 80% power at level
            alpha / K (noncentral t, ``df = n - rank([X, m])``).
        n_permutations_used: permutations (or bootstrap draws) behind the p-values.
        family: the marker's family (:mod:`.families`: a layer of ``NAME@L<k>``); "" outside one.
        partial_p_family: Holm within the family alone (``partial_p`` outside a family);
            ``partial_p_holm`` is the family-aware correction across all markers.
        rows: the table rows used; marker_residuals, outcome_residuals: ``m`` and ``y``
            residualised on the partial test's design (the partial-residual plot).
    """

    marker: str
    verdict: str
    flags: tuple[str, ...] = ()
    reason: str = ""
    n: int = 0
    n_groups: int = 0
    n_missing: int = 0
    spearman: float = math.nan
    spearman_low: float = math.nan
    spearman_high: float = math.nan
    pearson: float = math.nan
    pearson_low: float = math.nan
    pearson_high: float = math.nan
    marginal_r: float = math.nan
    marginal_low: float = math.nan
    marginal_high: float = math.nan
    p: float = math.nan
    p_mcse: float = math.nan
    p_holm: float = math.nan
    partial_r: float = math.nan
    partial_low: float = math.nan
    partial_high: float = math.nan
    partial_t: float = math.nan
    partial_p: float = math.nan
    partial_p_mcse: float = math.nan
    partial_p_holm: float = math.nan
    partial_spearman: float = math.nan
    partial_spearman_p: float = math.nan
    partial_spearman_p_mcse: float = math.nan
    r2_covariates: float = math.nan
    r2_full: float = math.nan
    delta_r2: float = math.nan
    delta_r2_null95: float = math.nan
    oos_p: float = math.nan
    oos_p_mcse: float = math.nan
    mde_partial_r: float = math.nan
    n_permutations_used: int = 0
    family: str = ""
    partial_p_family: float = math.nan
    rows: tuple[int, ...] = field(default=(), repr=False, compare=False)
    marker_residuals: tuple[float, ...] = field(default=(), repr=False, compare=False)
    outcome_residuals: tuple[float, ...] = field(default=(), repr=False, compare=False)

    _RECORD = ("marker", "verdict", "flags", "reason", "n", "n_groups", "n_missing", "spearman",
               "spearman_low", "spearman_high", "pearson", "pearson_low", "pearson_high",
               "marginal_r", "marginal_low", "marginal_high", "p", "p_mcse", "p_holm",
               "partial_r", "partial_low", "partial_high", "partial_t", "partial_p",
               "partial_p_mcse", "partial_p_holm", "partial_spearman", "partial_spearman_p",
               "partial_spearman_p_mcse", "r2_covariates", "r2_full", "delta_r2",
               "delta_r2_null95", "oos_p", "oos_p_mcse", "mde_partial_r", "n_permutations_used",
               "partial_p_family")

    @property
    def applicable(self) -> bool:
        """False for a ``not_applicable`` record."""
        return self.verdict != NOT_APPLICABLE

    def to_record(self) -> dict[str, Any]:
        """One dict with every statistic (NaN where not computed; ``reason`` says why).

        ``family`` is a key only of a family's member (:mod:`.families`).
        """
        out = {k: getattr(self, k) for k in self._RECORD}
        if self.family:
            out["family"] = self.family
        return out


def _f(x: float, fmt: str = ".2f") -> str:
    if not math.isfinite(x):
        return "undefined" if math.isnan(x) else ("-inf" if x < 0 else "inf")
    text = format(x, fmt)
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def _logo(delta_r2: float, n_groups: int) -> str:
    """A LOGO delta R^2 in a sentence: the number, or "unstable (G groups)" (:func:`.blocks.logo_cell`)."""
    cell = logo_cell(delta_r2, n_groups)
    return _f(delta_r2) if not isinstance(cell, dict) else f"{cell['text']}: {delta_r2:+.2f}"


def _names(names: Sequence[str]) -> str:
    names = list(names)
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


_WORDS = {
    ADDS: "adds beyond the covariates (significant partial effect and out-of-sample gain)",
    PARTIAL: "partial association (significant partial effect, no out-of-sample gain shown)",
    EXPLAINED: "explained by the covariates (marginal effect significant, partial effect "
               "shown to lie within +-{delta:g})",
    NONE: "no association (marginal and partial effects both shown to lie within +-{delta:g})",
    INCONCLUSIVE: "inconclusive (neither an effect nor its absence is shown; this design "
                  "detects |partial r| >= {mde} with 80% power)",
}


@dataclass(frozen=True, kw_only=True, repr=False)
class MarkerAnalysis(NotebookMixin):
    """Result of :func:`marker_analysis`: one :class:`MarkerStats` per marker, in input order.

    In a notebook the result shows the report's own blocks (:func:`.blocks.analysis_blocks`:
    warnings, ranking table, one sentence per marker, and, given covariates, the
    partial-residual scatters); ``plot()`` draws the partial-residual scatter of the top-ranked
    marker; ``to_frame()`` is :meth:`to_records` as a DataFrame (the ``notebook`` extra).

    Attributes:
        outcome: the outcome column.
        covariates: covariate columns as given; covariate_terms: the regression terms.
        groups: the resolved groups column (None: each model is the unit).
        n_models, n_groups: rows of the table and distinct groups.
        settings: n_permutations, n_bootstrap, max_permutations, alpha, confidence_level,
            equivalence_margin, seed, strata, inference (resolved: ``within_groups``,
            ``cluster`` or ``models``), groups_source, unit (the unit of every p and CI, in
            words).
        markers: the per-marker statistics.
        warnings: sentences the reader must see.
        families: family -> its member columns (:mod:`.families`); empty without families.
    """

    outcome: str
    covariates: tuple[str, ...]
    covariate_terms: tuple[str, ...]
    groups: str | None
    n_models: int
    n_groups: int
    settings: dict[str, Any]
    markers: tuple[MarkerStats, ...]
    warnings: tuple[str, ...] = ()
    families: dict[str, tuple[str, ...]] = field(default_factory=dict)

    def __getitem__(self, marker: str) -> MarkerStats:
        """The statistics of ``marker`` (``KeyError`` listing the markers if unknown)."""
        for s in self.markers:
            if s.marker == marker:
                return s
        raise KeyError(f"no marker {marker!r}; markers: {[s.marker for s in self.markers]}")

    def to_records(self) -> list[dict[str, Any]]:
        """One dict per marker (keys of :meth:`MarkerStats.to_record`)."""
        return [s.to_record() for s in self.markers]

    def to_dict(self) -> dict[str, Any]:
        """Strict-JSON form (NaN -> null): settings, warnings, records and sentences."""
        from probekit.report.blocks import strict_json

        from .families import family_sentence, family_summaries

        fam = ({"families": [f.to_dict() for f in family_summaries(self)],
                "family_sentences": {f: family_sentence(self, f) for f in self.families}}
               if self.families else {})
        return strict_json({**fam,
            "outcome": self.outcome, "covariates": list(self.covariates),
            "covariate_terms": list(self.covariate_terms), "groups": self.groups,
            "n_models": self.n_models, "n_groups": self.n_groups, "settings": dict(self.settings),
            "warnings": list(self.warnings), "markers": self.to_records(),
            "sentences": {s.marker: self.sentence(s.marker) for s in self.markers},
        })

    def _title(self) -> str:
        return f"Markers vs {self.outcome}"

    def _summary(self) -> str:
        counts: dict[str, int] = {}
        for s in self.markers:
            counts[s.verdict] = counts.get(s.verdict, 0) + 1
        verdicts = ", ".join(f"{n} {v}" for v, n in counts.items())
        given = ", ".join(self.covariates) or "none"
        return f"{self.n_models} models, outcome {self.outcome}, covariates {given}: {verdicts}"

    def _blocks(self) -> tuple[Any, ...]:
        from .blocks import analysis_blocks, partial_scatters

        return (*analysis_blocks(self), *partial_scatters(self))

    def _main_plot(self) -> Any:
        """The partial-residual scatter of the top-ranked marker (None without covariates)."""
        from .blocks import partial_scatters

        return next(iter(partial_scatters(self, top=1)), None)

    def unit(self) -> str:
        """The unit of every p-value and CI, in words."""
        return str(self.settings.get("unit", "models"))

    def sentence(self, marker: str) -> str:
        """One sentence for ``marker``: effects, CIs, p-values (with their unit) and verdict.

        E.g. ``"he: Spearman -0.84 with ood over 30 models; within seed the marginal r is -0.80
        [-0.90, -0.62] (p 0.001, Holm p 0.004); given noise the partial r is 0.07 [-0.10,
        0.18] (p 0.55, Holm p 1; partial Spearman 0.05) and the leave-one-group-out delta R^2
        is -0.01 (p 0.62); p and CIs from models within seed strata: explained by the
        covariates (...)."``
        """
        s = self[marker]
        if not s.applicable:
            return f"{marker}: not applicable ({s.reason})."
        flags = f" [flags: {', '.join(s.flags)}]" if s.flags else ""
        if s.verdict == INCONCLUSIVE and not math.isfinite(s.p):
            return f"{marker}: inconclusive ({s.reason or 'see the flags'}){flags}."
        level = f"{self.settings['confidence_level']:.0%}"
        within = (f"within {self.groups} " if self.settings.get("inference") in FIXED_EFFECTS
                  else "")
        floor = p_floor(s.n_permutations_used or self.settings.get("n_permutations"))

        def _p(x: float) -> str:  # the report's one p format (its floor: the permutations)
            return "undefined" if not math.isfinite(x) else format_p(x, floor)

        head = (f"{marker}: Spearman {_f(s.spearman)} with {self.outcome} over {s.n} models; "
                f"{within}the marginal r is {_f(s.marginal_r)} [{_f(s.marginal_low)}, "
                f"{_f(s.marginal_high)}] (p {_p(s.p)}, Holm p {_p(s.p_holm)})")
        given = (f"given {_names(self.covariates)}" if self.covariates
                 else "with no covariates")
        if math.isfinite(s.partial_r):
            part = (f"; {given} the partial r is {_f(s.partial_r)} [{_f(s.partial_low)}, "
                    f"{_f(s.partial_high)}] (p {_p(s.partial_p)}, Holm p {_p(s.partial_p_holm)};"
                    f" partial Spearman {_f(s.partial_spearman)}) and the leave-one-group-out "
                    f"delta R^2 is {_logo(s.delta_r2, s.n_groups)} (p {_p(s.oos_p)})")
        else:
            part = f"; {given} the partial r is undefined"
        word = _WORDS.get(s.verdict, s.verdict).format(
            delta=self.settings.get("equivalence_margin", 0.2), mde=_f(s.mde_partial_r))
        note = f" ({s.reason})" if s.reason else ""
        return (f"{head}{part}; {level} CIs and p from {self.unit()}: {word}{note}{flags}.")


# --------------------------------------------------------------------------- the analysis


def _check_args(n_permutations: int, n_bootstrap: int, alpha: float, confidence_level: float,
                equivalence_margin: float, max_permutations: int, inference: str) -> None:
    from probekit.stats.bootstrap import check_n_resamples
    from probekit.stats.limits import MIN_RESAMPLES

    check_n_permutations(n_permutations)
    check_n_permutations(max_permutations, name="max_permutations")
    if n_bootstrap < MIN_RESAMPLES:  # also [diagnosis] n_bootstrap's rule when the file loads
        raise ConfigError(f"n_bootstrap={n_bootstrap} is below the {MIN_RESAMPLES} the wild cluster "
                          f"bootstrap needs; pass n_bootstrap >= {MIN_RESAMPLES}")
    check_n_resamples(n_bootstrap, name="n_bootstrap")
    for name, v in (("alpha", alpha), ("confidence_level", confidence_level)):
        if not 0.0 < v < 1.0:
            raise ConfigError(f"{name} must be in (0, 1), got {v}")
    if not 0.0 < equivalence_margin < 1.0:
        raise ConfigError(f"equivalence_margin must be in (0, 1) (a partial r), got "
                          f"{equivalence_margin}")
    if max_permutations < n_permutations:
        raise ConfigError(f"max_permutations={max_permutations} is below n_permutations="
                          f"{n_permutations}; pass max_permutations >= n_permutations")
    if inference not in ("within_groups", "cluster"):
        raise ConfigError(f"inference must be 'within_groups' or 'cluster', got {inference!r}")


def _select_markers(
    t: MarkerTable, outcome: str, markers: Sequence[str] | None, covariates: Sequence[str],
    groups: str | None,
) -> tuple[str, ...]:
    taken = {outcome, *covariates, *([groups] if groups else [])}
    if markers is None:
        chosen = tuple(c for c in t.names if c not in taken and t.kinds[c] == "numeric")
        if not chosen:
            raise ConfigError(
                f"no marker columns: every numeric column is the outcome, a covariate or the "
                f"groups; columns: {', '.join(repr(c) for c in t.names)}"
            )
        return chosen
    if isinstance(markers, str):
        markers = [markers]
    chosen = tuple(markers)
    if not chosen:
        raise ConfigError("markers is empty; name at least one marker column (or None for all)")
    t.check_names(chosen, "marker")
    dup = {c for c in chosen if chosen.count(c) > 1}
    if dup:
        raise ConfigError(f"markers named more than once: {sorted(dup)}")
    clash = [c for c in chosen if c in taken]
    if clash:
        raise ConfigError(f"marker {clash[0]!r} is also the outcome, a covariate or the groups "
                          "column; a column can have one role only")
    for c in chosen:
        if t.kinds[c] != "numeric":
            raise DataError(f"marker column {c!r} holds text; a marker must be numeric")
    return chosen


def _resolve_groups(t: MarkerTable, groups: str | None, outcome: str,
                    covariates: Sequence[str],
                    markers: Sequence[str] | str | None = None) -> tuple[str | None, str]:
    """The groups column and how it was resolved (:func:`.grouping.resolve_groups`)."""
    named = [markers] if isinstance(markers, str) else list(markers or ())
    return resolve_groups(t, groups, taken=(outcome, *covariates, *named), covariates=covariates)


def _degenerate(y: np.ndarray) -> str | None:
    if np.ptp(y) == 0:
        return f"degenerate_outcome(constant {y[0]:g})"
    _, counts = np.unique(y, return_counts=True)
    share = counts.max() / y.size
    if share >= 0.8:
        return f"degenerate_outcome({share:.0%} of models tied at one value)"
    return None


def _outcome_flag(y: np.ndarray, k: int | None) -> tuple[str | None, str | None]:
    """``few_outcome_examples`` flag (binomial SE at the mean vs half the SD across models)."""
    if k is None:
        return None, None
    if k < 1:
        raise ConfigError(f"outcome_examples={k}: pass the number (>= 1) of evaluation examples "
                          "behind each model's outcome, or None")
    if y.min() < 0 or y.max() > 1:
        return None, (f"outcome_examples ignored: the outcome is not a proportion in [0, 1] "
                      f"(range {y.min():g}..{y.max():g})")
    pbar = float(y.mean())
    se = math.sqrt(pbar * (1 - pbar) / k)
    sd = float(y.std(ddof=1)) if y.size > 1 else 0.0
    if se > 0.5 * sd:
        return (f"few_outcome_examples(binomial SE {se:.3g} at {k} examples > half the "
                f"outcome SD {sd:.3g} across models)"), None
    return None, None


def _check_exclusions(exclude_rows: Mapping[str, Sequence[int]], chosen: Sequence[str],
                      n_rows: int) -> dict[str, np.ndarray]:
    out = {}
    for name, rows in exclude_rows.items():
        if name not in chosen:
            raise ConfigError(f"exclude_rows names {name!r}, which is not an analysed marker; "
                              f"markers: {list(chosen)}")
        idx = np.asarray(list(rows), dtype=np.int64)
        bad = idx[(idx < 0) | (idx >= n_rows)]
        if bad.size:
            raise ConfigError(f"exclude_rows[{name!r}] holds row {int(bad[0])}, outside the "
                              f"table's {n_rows} rows (0-based)")
        out[name] = idx
    return out


@dataclass
class _Plan:
    """One row set: its key, rows, markers, resamples drawn so far and the adaptive round."""

    keep: np.ndarray
    names: list[str]
    n_resamples: int
    round: int = 0
    rs: RowSet | None = None  # set by the first round


def _applicability(m: np.ndarray, g: np.ndarray, q: int) -> tuple[str | None, dict[str, int]]:
    keep = ~np.isnan(m)
    n, n_missing = int(keep.sum()), int((~keep).sum())
    base = {"n": n, "n_groups": int(np.unique(g[keep]).size) if n else 0,
            "n_missing": n_missing}
    if n == 0:
        return f"no model has a value ({n_missing} missing cells)", base
    if base["n_groups"] < 3:
        return (f"only {base['n_groups']} group(s) have a value; leave-one-group-out needs >= 3",
                base)
    mk = m[keep]
    if np.ptp(mk) == 0:
        return f"constant ({mk[0]:g}) over the {n} models that have it", base
    if n <= q + 1:
        return f"{n} models are too few for {q} regression terms", base
    return None, base


#: markers whose largest magnitude lies outside this range are rescaled (:func:`standardised`)
_SAFE_MAGNITUDE = (1e-60, 1e60)


def standardised(m: np.ndarray) -> tuple[np.ndarray, float]:
    """``m / 2^e`` with ``max |m| / 2^e`` in ``[0.5, 1)``, and the factor ``2^e`` back to ``m``'s unit.

    Every statistic of a marker (r, partial r, t, p, R^2) is invariant to its scale, but the
    floating-point arithmetic is not: squares of a marker in units of 1e300 overflow, of 1e-170
    underflow (to a "constant" marker). A marker whose largest magnitude is outside
    ``[1e-60, 1e60]`` is divided by a power of two (exact: no rounding of its cells), so it
    gives the numbers of the same marker written in units near 1; a marker of ordinary size
    is left as it is (its results stay bit-identical to the unscaled computation).
    """
    present = m[~np.isnan(m)]
    top = float(np.max(np.abs(present))) if present.size else 0.0
    if not (top > 0 and math.isfinite(top)) or _SAFE_MAGNITUDE[0] <= top <= _SAFE_MAGNITUDE[1]:
        return m, 1.0
    exponent = int(np.frexp(top)[1])
    return np.ldexp(m, -exponent), float(np.ldexp(1.0, exponent))


def smallest_p(keep: np.ndarray, g: np.ndarray, strata: np.ndarray | None, mode: str) -> float:
    """The smallest p-value the resampling test can give on the rows ``keep``.

    Freedman-Lane permutes within strata (the groups in ``within_groups``, the ``strata``
    column if any): ``N = prod(n_s!)`` distinct permutations, so ``p >= 1 / N``. The wild
    cluster bootstrap flips ``G`` group signs: ``N = 2^G``. 0.0 when ``N`` exceeds 10^12.
    """
    if mode == "cluster":
        n_groups = int(np.unique(g[keep]).size)
        return 0.0 if n_groups > 40 else 1.0 / 2.0 ** n_groups
    cols = [g[keep]] if mode == "within_groups" else []
    if strata is not None:
        cols.append(strata[keep])
    if cols:
        _, counts = np.unique(np.column_stack(cols), axis=0, return_counts=True)
    else:
        counts = np.array([int(keep.sum())])
    log_n = sum(math.lgamma(int(c) + 1) for c in counts)
    return 0.0 if log_n > math.log(1e12) else 1.0 / math.exp(log_n)


def _resolve_families(families: Mapping[str, Sequence[str]] | str | None,
                      chosen: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """``"auto"``: the ``NAME@...`` columns among the markers; None: none; else checked."""
    from .families import group_families

    if families is None:
        return {}
    if isinstance(families, str):
        if families != "auto":
            raise ConfigError(f"families={families!r}: pass 'auto', None or a mapping "
                              "family -> marker columns")
        try:
            return group_families(chosen)
        except ValueError as err:
            raise ConfigError(str(err)) from None
    out: dict[str, tuple[str, ...]] = {}
    seen: set[str] = set()
    for f, members in families.items():
        members = (members,) if isinstance(members, str) else tuple(members)
        for m in members:
            if m not in chosen:
                raise ConfigError(f"family {f!r} names {m!r}, which is not an analysed marker; "
                                  f"the markers are {list(chosen)}")
            if m in seen:
                raise ConfigError(f"marker {m!r} is in two families; give each marker one")
            seen.add(m)
        out[str(f)] = members
    return out


def marker_analysis(
    table: pd.DataFrame | Mapping[str, Any] | MarkerTable,
    outcome: str,
    *,
    markers: Sequence[str] | None = None,
    covariates: Sequence[str] = (),
    groups: str | None = "auto",
    inference: str = DEFAULTS.inference,  # "within_groups" | "cluster", checked at run time
    n_permutations: int = DEFAULTS.n_permutations,
    n_bootstrap: int = DEFAULTS.n_bootstrap,
    max_permutations: int = DEFAULTS.max_permutations,
    alpha: float = DEFAULTS.alpha,
    seed: int = DEFAULTS.seed,
    confidence_level: float = 0.95,
    equivalence_margin: float = DEFAULTS.equivalence_margin,
    strata: str | None = None,
    outcome_examples: int | None = None,
    exclude_rows: Mapping[str, Sequence[int]] | None = None,
    marker_flags: Mapping[str, Sequence[str]] | None = None,
    coverage_note: str | None = None,
    covariate_coding: Mapping[str, str] | None = None,
    spline_df: int = DEFAULTS.spline_df,
    families: Mapping[str, Sequence[str]] | str | None = "auto",
) -> MarkerAnalysis:
    """Marginal, partial and out-of-sample association of each marker with ``outcome``.

    Definitions in the module docstring and ``docs/diagnosis.md`` ("Verdicts and inference").
    The tunable options' defaults and rules are declared once, in
    :class:`~.options.AnalysisOptions` (a diagnosis file's ``[diagnosis]`` keys use the same).

    Args:
        table: a pandas DataFrame (e.g. :func:`~probekit.diagnosis.read_marker_table`), or a
            mapping column -> sequence; one row per model. Converted once, here, into the
            numpy columns of :class:`MarkerTable` (NA / NaN / None: a missing cell).
        outcome: the outcome column (e.g. OOD accuracy); numeric and complete. A degenerate
            outcome (constant, or >= 80% of models tied at one value) makes every marker
            ``inconclusive`` with the flag ``degenerate_outcome``.
        markers: marker columns (default: every numeric column not used otherwise). A missing
            cell (None/NaN) drops that row for that marker only (``n_missing``).
        covariates: columns the marker must add beyond (design knobs, ID accuracy), coded by
            :meth:`MarkerTable.design`.
        groups: the design's groups (random-effect unit: the seed). ``"auto"``: the ``seed``
            column, else the one seed-named column (``init``, ``run``, ``rep``, ...;
            :mod:`.grouping`), else None; a column that only looks like a seed (repeated
            integer levels crossed with the covariates) is refused with the fix. None: each
            model is the unit. ``settings["groups_source"]`` records how it was resolved; a
            record without groups is flagged ``ungrouped(...)``.
        inference: ``"within_groups"`` (group fixed effects, HC3, Freedman-Lane within groups)
            or ``"cluster"`` (group fixed effects, CR1 by group, wild cluster restricted
            bootstrap). Without groups both are HC3 + Freedman-Lane over models.
        n_permutations: initial Freedman-Lane permutations per row set.
        n_bootstrap: wild cluster bootstrap draws (``inference="cluster"``; >= 1000).
        max_permutations: cap of the adaptive permutation doubling.
        alpha: level of the Holm-adjusted tests in the verdicts (and of the MDE, at alpha / K).
        seed: seeds permutations and weights (stream ``[seed, k, round]`` for the k-th distinct
            row set): markers with the same rows share them.
        confidence_level: level of the test-inversion CIs.
        equivalence_margin: ``delta``: an effect "shown absent" has its CI inside
            ``(-delta, delta)`` on the r scale.
        strata: a column whose levels the permutations also stay within.
        outcome_examples: evaluation examples behind each model's outcome (a proportion):
            flag ``few_outcome_examples`` when the binomial SE at the mean outcome exceeds
            half the outcome's SD across models.
        exclude_rows: marker -> rows (0-based) left out of that marker's analysis (e.g. a
            model compared with itself): flag ``self_reference_excluded(k rows)``.
        marker_flags: marker -> extra flags (from the runner), appended to its flags.
        coverage_note: text appended to the ``few_groups`` flag (e.g. measured CI coverage).
        covariate_coding: covariate -> ``"factor" | "linear" | "spline"``; unset covariates are
            coded by what they are (:meth:`~probekit.diagnosis.statistics.table.MarkerTable.design`: text,
            the seed and <= 10 repeated values as factors, other numbers as natural splines).
        spline_df: columns of each spline term.
        families: family -> member columns (one marker read at several layers), tested as one
            family that counts once across markers (:mod:`.families`); ``"auto"``: the
            ``NAME@L<k>`` / ``NAME@<site>`` columns grouped by ``NAME``; None: no families
            (plain Holm over every column).

    Returns:
        A :class:`MarkerAnalysis`.

    Raises:
        ConfigError: unknown columns (the valid ones listed), a column in two roles, bad counts,
            a bad ``exclude_rows``.
        DataError: ragged columns, missing cells in the outcome / covariates / groups, fewer
            than 3 groups for leave-one-group-out.
    """
    _check_args(n_permutations, n_bootstrap, alpha, confidence_level, equivalence_margin,
                max_permutations, inference)
    check_seed(seed)
    opts = _Options(n_permutations=n_permutations, n_bootstrap=n_bootstrap,
                    max_permutations=max_permutations, alpha=alpha, seed=seed,
                    confidence_level=confidence_level, equivalence_margin=equivalence_margin)
    design = _build_design(table, outcome, markers, covariates, groups, inference, strata,
                           covariate_coding, spline_df, families)
    exclusions = _check_marker_options(design, exclude_rows, marker_flags)
    context = _outcome_context(design, outcome, outcome_examples, coverage_note)
    values = _marker_values(design, exclusions)
    tests = _plan_tests(design, values, context.degenerate, opts)
    raw = _run_tests(design, values, tests, opts)
    adjusted = _adjust(design, tests, raw, opts.alpha)
    results = tuple(
        _marker_result(name, design, context, values, tests, raw, adjusted, exclusions,
                       (marker_flags or {}).get(name, ()), opts)
        for name in design.chosen
    )
    warnings = _closing_warnings(context, results, adjusted, tests.n_tested, opts, design.mode)
    return MarkerAnalysis(
        outcome=outcome, covariates=design.covariates, covariate_terms=design.terms,
        groups=design.groups, n_models=design.t.n_rows, n_groups=design.n_groups,
        settings={"n_permutations": n_permutations, "n_bootstrap": n_bootstrap,
                  "max_permutations": max_permutations, "alpha": alpha,
                  "confidence_level": confidence_level,
                  "equivalence_margin": equivalence_margin, "seed": seed, "strata": strata,
                  "inference": design.mode, "groups_source": design.groups_source,
                  "unit": design.unit, "n_markers_tested": tests.n_tested},
        markers=results, warnings=warnings, families=design.families,
    )


class _Options(NamedTuple):
    """The resampling and decision options of one analysis (checked by :func:`_check_args`)."""

    n_permutations: int
    n_bootstrap: int
    max_permutations: int
    alpha: float
    seed: int
    confidence_level: float
    equivalence_margin: float


@dataclass(frozen=True)
class _Design:
    """Phase 1: the table, the roles of its columns and the coded design.

    ``y`` the outcome; ``C`` the coded covariates (``terms`` their names); ``g`` the group code
    of each row (each row its own group without groups); ``mode`` ``"models"`` without groups,
    else the inference; ``unit`` what p-values and CIs are over, in words.
    """

    t: MarkerTable
    outcome: str
    covariates: tuple[str, ...]
    groups: str | None
    groups_source: str
    chosen: tuple[str, ...]
    families: dict[str, tuple[str, ...]]
    y: np.ndarray
    C: np.ndarray
    terms: Any
    strata: str | None
    strata_codes: np.ndarray | None
    g: np.ndarray
    n_groups: int
    mode: str
    unit: str


class _Context(NamedTuple):
    """Phase 3: flags every marker carries, the warnings so far, the degenerate-outcome flag."""

    common: list[str]
    warnings: list[str]
    degenerate: str | None


class _MarkerValues(NamedTuple):
    """Phase 4: each marker standardised (NaN: missing or excluded), raw, and its scale."""

    values: dict[str, np.ndarray]
    raw: dict[str, np.ndarray]
    scales: dict[str, float]


class _Tests(NamedTuple):
    """Phase 5: the row sets to resample, why a marker is not applicable, its row counts."""

    plans: dict[bytes, _Plan]
    not_applicable: dict[str, str]
    base: dict[str, dict[str, int]]
    n_tested: int  # K, the number of markers Holm adjusts over (>= 1)


class _Adjusted(NamedTuple):
    """Phase 7: Holm-adjusted p-values, families and the markers no p-value can decide."""

    p_holm: dict[str, float]
    partial_p_holm: dict[str, float]
    partial_p_family: dict[str, float]
    family_of: dict[str, str]
    unreachable: dict[str, float]  # marker -> smallest attainable p (K p > alpha)


def _build_design(
    table: pd.DataFrame | Mapping[str, Any] | MarkerTable, outcome: str, markers: Sequence[str] | None,
    covariates: Sequence[str] | str, groups: str | None, inference: str, strata: str | None,
    covariate_coding: Mapping[str, str] | None, spline_df: int,
    families: Mapping[str, Sequence[str]] | str | None,
) -> _Design:
    """Phase 1: check the column roles and code the outcome, covariates, groups and strata."""
    t = as_marker_table(table)
    t.check_distinct_rows()
    covariates = (covariates,) if isinstance(covariates, str) else tuple(covariates)
    t.check_names([outcome], "outcome")
    t.check_names(covariates, "covariate")
    groups, groups_source = _resolve_groups(t, groups, outcome, covariates, markers)
    if outcome in covariates or outcome == groups:
        raise ConfigError(f"the outcome {outcome!r} is also a covariate or the groups column")
    if groups in covariates:
        raise ConfigError(f"the groups column {groups!r} is also a covariate; group fixed "
                          "effects are in the design already (pass groups=None to treat it as "
                          "a covariate)")
    chosen = _select_markers(t, outcome, markers, covariates, groups)
    fams = _resolve_families(families, chosen)
    y = t.numeric(outcome, "outcome")
    C, terms = t.design(covariates, coding=covariate_coding, spline_df=spline_df, groups=groups)
    strata_codes = None if strata is None else t.codes(strata, "strata")[0]
    g = np.arange(t.n_rows) if groups is None else t.codes(groups, "groups")[0]
    n_groups = int(np.unique(g).size)
    if n_groups < 3:
        raise DataError(
            f"leave-one-group-out needs >= 3 groups; groups column {groups!r} has {n_groups} "
            f"distinct value(s) over {t.n_rows} rows: pass a groups column with more levels "
            "(e.g. the seed) or groups=None (each model its own group)"
            if groups else f"leave-one-out needs >= 3 models, the table has {t.n_rows}"
        )
    mode = "models" if groups is None else inference
    if mode == "cluster" and strata is not None:
        raise ConfigError("strata restrict permutations; inference='cluster' uses a wild "
                          "bootstrap: drop strata or use inference='within_groups'")
    unit = {"within_groups": f"models permuted within {groups} strata (group fixed effects)",
            "cluster": f"{groups} groups (cluster-robust, wild cluster bootstrap; group fixed "
                       "effects)",
            "models": "models"}[mode]
    if mode == "models" and strata is not None:
        unit = f"models permuted within {strata} strata"
    return _Design(t=t, outcome=outcome, covariates=covariates, groups=groups,
                   groups_source=groups_source, chosen=chosen, families=fams, y=y, C=C,
                   terms=terms, strata=strata, strata_codes=strata_codes, g=g,
                   n_groups=n_groups, mode=mode, unit=unit)


def _check_marker_options(
    design: _Design, exclude_rows: Mapping[str, Sequence[int]] | None,
    marker_flags: Mapping[str, Sequence[str]] | None,
) -> dict[str, np.ndarray]:
    """Phase 2: the rows left out of each marker (checked); ``marker_flags`` name markers."""
    exclusions = _check_exclusions(exclude_rows or {}, design.chosen, design.t.n_rows)
    for name in marker_flags or {}:
        if name not in design.chosen:
            raise ConfigError(f"marker_flags names {name!r}, which is not an analysed marker")
    return exclusions


def _outcome_context(
    design: _Design, outcome: str, outcome_examples: int | None, coverage_note: str | None
) -> _Context:
    """Phase 3: the flags and warnings of the groups and the outcome (few, degenerate)."""
    groups, n_groups, y = design.groups, design.n_groups, design.y
    common: list[str] = []
    warnings = [f"groups: {groups or 'none'} ({design.groups_source}); p-values and CIs from "
                f"{design.unit}"]
    if groups is None:
        common.append(ungrouped_flag())
    if groups is not None and n_groups < 10:
        common.append(f"few_groups(G={n_groups}" + (f"; {coverage_note}" if coverage_note else "")
                      + ")")
        warnings.append(f"only {n_groups} {groups} groups: inference over few groups is rough"
                        + (f" ({coverage_note})" if coverage_note else ""))
    flag, note = _outcome_flag(y, outcome_examples)
    if flag:
        common.append(flag)
    if note:
        warnings.append(note)
    degenerate = _degenerate(y)
    if degenerate:
        common.append(degenerate)
        warnings.append(f"the outcome {outcome!r} is degenerate: every marker is inconclusive")
    return _Context(common, warnings, degenerate)


def _marker_values(design: _Design, exclusions: Mapping[str, np.ndarray]) -> _MarkerValues:
    """Phase 4: each marker with its excluded rows NaN, standardised (the statistics are scale-free)."""
    values: dict[str, np.ndarray] = {}
    raw_values: dict[str, np.ndarray] = {}
    scales: dict[str, float] = {}
    for name in design.chosen:
        m = design.t.numeric(name, "marker", allow_missing=True)
        if name in exclusions:
            m = m.copy()
            m[exclusions[name]] = np.nan
        raw_values[name] = m
        values[name], scales[name] = standardised(m)
    return _MarkerValues(values, raw_values, scales)


def _plan_tests(
    design: _Design, values: _MarkerValues, degenerate: str | None, opts: _Options
) -> _Tests:
    """Phase 5: applicability of each marker; testable markers grouped by their row set."""
    t, g, mode = design.t, design.g, design.mode
    q_full = int(np.linalg.matrix_rank(np.column_stack([np.ones(t.n_rows), design.C]))) + (
        design.n_groups - 1 if mode in FIXED_EFFECTS else 0)
    na: dict[str, str] = {}
    base: dict[str, dict[str, int]] = {}
    plans: dict[bytes, _Plan] = {}
    for name in design.chosen:
        why, base[name] = _applicability(values.raw[name], g, q_full)
        if why:
            na[name] = why
        elif not degenerate:
            keep = ~np.isnan(values.values[name])
            plans.setdefault(keep.tobytes(), _Plan(keep, [], opts.n_permutations
                                                   if mode != "cluster"
                                                   else opts.n_bootstrap)).names.append(name)
    K = max(sum(len(p.names) for p in plans.values()), 1)
    return _Tests(plans, na, base, K)


def _run_tests(
    design: _Design, values: _MarkerValues, tests: _Tests, opts: _Options
) -> dict[str, dict[str, Any]]:
    """Phase 6: partial p-values with adaptive permutations, then every statistic once.

    A p-value near a deciding Holm threshold (within 3 Monte-Carlo SE) doubles its row set's
    resamples (up to ``max_permutations``); the final statistics use the last resamples.
    """
    y, C, g, mode = design.y, design.C, design.g, design.mode
    K, fams, alpha = tests.n_tested, design.families, opts.alpha
    raw: dict[str, dict[str, Any]] = {}

    def run(index: int, plan: _Plan, final: bool = False) -> None:
        """A round of the partial p-values on fresh resamples, or (final) every statistic."""
        if not final:
            rng = np.random.default_rng([opts.seed, index, plan.round])
            plan.rs = row_set(plan.keep, y, C, g, design.strata_codes, mode=mode,
                              n_resamples=plan.n_resamples, rng=rng)
        for name in plan.names:
            raw[name] = (marker_stats(values.values[name][plan.keep], plan.rs,
                                      confidence_level=opts.confidence_level, mde_alpha=alpha / K)
                         if final else partial_p(values.values[name][plan.keep], plan.rs))

    plans = tests.plans
    for index, plan in enumerate(plans.values()):
        run(index, plan)
    while True:  # adaptive permutations: p near a deciding Holm threshold -> double B
        again = []
        deciding = weighted_holm({nm: r["partial_p"] for nm in design.chosen if nm in raw
                                  for r in (raw[nm],)
                                  if math.isfinite(r.get("partial_p", math.nan))},
                                 fams, alpha)[1]
        for index, plan in enumerate(plans.values()):
            if plan.rs.enumerated or plan.n_resamples >= opts.max_permutations:
                continue
            near = any(abs(raw[nm]["partial_p"] - deciding[nm]) <= 3 * raw[nm]["partial_p_mcse"]
                       for nm in plan.names if nm in deciding)
            if near:
                plan.n_resamples = min(2 * plan.n_resamples, opts.max_permutations)
                plan.round += 1
                again.append((index, plan))
        if not again:
            break
        for index, plan in again:
            run(index, plan)
    for index, plan in enumerate(plans.values()):  # everything once, on the final resamples
        run(index, plan, final=True)
    for name, r in raw.items():  # the partial-residual plot keeps the marker's own unit
        if r.get("marker_residuals"):
            r["marker_residuals"] = tuple(float(v) * values.scales[name]
                                          for v in r["marker_residuals"])
    return raw


def _adjust(
    design: _Design, tests: _Tests, raw: dict[str, dict[str, Any]], alpha: float
) -> _Adjusted:
    """Phase 7: Holm over markers and within families; markers no p-value can decide.

    A marker whose statistics hold no p-value moves from ``raw`` to ``tests.not_applicable``
    with its reason (e.g. constant within every group).
    """
    g, mode, chosen, fams, na = design.g, design.mode, design.chosen, design.families, tests.not_applicable
    smallest = {nm: smallest_p(plan.keep, g, design.strata_codes, mode)
                for plan in tests.plans.values() for nm in plan.names}
    unreachable = {nm: p for nm, p in smallest.items() if tests.n_tested * p > alpha}
    for nm in [nm for nm in chosen if nm in raw and "p" not in raw[nm]]:
        na[nm] = raw.pop(nm).get("reason", "no test")  # e.g. constant within every group
    ok = [nm for nm in chosen if nm in raw]
    p_holm = dict(zip(ok, holm([raw[nm]["p"] for nm in ok]), strict=True)) if ok else {}
    ok_partial = [nm for nm in ok if "partial_p" in raw[nm]]
    pp_holm = weighted_holm({nm: raw[nm]["partial_p"] for nm in ok_partial}, fams, alpha)[0]
    family_of = {m: f for f, ms in fams.items() for m in ms}
    pp_family = {nm: raw[nm]["partial_p"] for nm in ok_partial}
    for members in fams.values():
        tested = [m for m in members if m in pp_family]
        if tested:
            pp_family.update(zip(tested, holm([pp_family[m] for m in tested]), strict=True))
    return _Adjusted(p_holm, pp_holm, pp_family, family_of, unreachable)


def _marker_result(
    name: str, design: _Design, context: _Context, values: _MarkerValues, tests: _Tests,
    raw: Mapping[str, dict[str, Any]], adjusted: _Adjusted,
    exclusions: Mapping[str, np.ndarray], extra_flags: Sequence[str], opts: _Options,
) -> MarkerStats:
    """Phase 8: one marker's flags, statistics and verdict."""
    y, K, alpha = design.y, tests.n_tested, opts.alpha
    base, na, unreachable = tests.base, tests.not_applicable, adjusted.unreachable
    family = adjusted.family_of.get(name, "")
    flags = list(context.common)
    if name in exclusions and exclusions[name].size:
        flags.append(f"self_reference_excluded({int(np.unique(exclusions[name]).size)} rows)")
    extra = list(extra_flags)
    keep = ~np.isnan(values.values[name])
    if name in na:  # the plain effect sizes still, where they are defined
        mk, yk = values.values[name][keep], y[keep]
        sizes = ({"spearman": float(sps.spearmanr(mk, yk).statistic),
                  "pearson": float(np.corrcoef(mk, yk)[0, 1])}
                 if mk.size >= 3 and np.ptp(mk) > 0 and np.ptp(yk) > 0 else {})
        return MarkerStats(marker=name, verdict=NOT_APPLICABLE, reason=na[name], family=family,
                           flags=tuple(flags + extra), **base[name], **sizes)
    if context.degenerate:
        mk, yk = values.values[name][keep], y[keep]
        rho = float(sps.spearmanr(mk, yk).statistic) if np.ptp(yk) > 0 else math.nan
        return MarkerStats(
            marker=name, verdict=INCONCLUSIVE, flags=tuple(flags + extra), family=family,
            reason="degenerate outcome: no test", spearman=rho,
            rows=tuple(np.flatnonzero(keep).tolist()), **base[name])
    r = raw[name]
    if name in unreachable:
        flags.append(f"insufficient_permutations(smallest attainable p "
                     f"{unreachable[name]:.3g} > alpha {alpha:g}"
                     + (f" / {K} markers" if K > 1 else "") + ")")
    near = abs(r["spearman"]) >= NEAR_IDENTICAL
    if near:
        flags.append(f"near_identical(|Spearman| {abs(r['spearman']):.3f} >= "
                     f"{NEAR_IDENTICAL}: the marker nearly is the outcome; no adds/partial "
                     "verdict)")
    ph, pph = float(adjusted.p_holm[name]), float(adjusted.partial_p_holm.get(name, math.nan))
    verdict = decide(
        p_holm=ph, partial_p_holm=pph, oos_p=r.get("oos_p", math.nan),
        partial_ci=(r.get("partial_low", math.nan), r.get("partial_high", math.nan)),
        marginal_ci=(r.get("marginal_low", math.nan), r.get("marginal_high", math.nan)),
        alpha=alpha, delta=opts.equivalence_margin, near_identical=near,
        partial_undefined=bool(r.get("partial_undefined")))
    stats = {k: v for k, v in r.items() if k in MarkerStats.__dataclass_fields__}
    reason = str(stats.pop("reason", "") or "")
    if name in unreachable:
        verdict = INCONCLUSIVE
        why = (f"no p-value can reach alpha: the smallest attainable p is "
               f"{unreachable[name]:.3g} with {base[name]['n']} models"
               + (f" over {K} markers (Holm)" if K > 1 else "") + "; add models")
        reason = "; ".join(x for x in (reason, why) if x)
    return MarkerStats(marker=name, verdict=verdict, p_holm=ph, partial_p_holm=pph,
                       family=family,
                       partial_p_family=float(adjusted.partial_p_family.get(name, math.nan)),
                       flags=tuple(flags + extra), reason=reason,
                       rows=tuple(np.flatnonzero(keep).tolist()), **base[name], **stats)


def _closing_warnings(
    context: _Context, results: Sequence[MarkerStats], adjusted: _Adjusted, K: int,
    opts: _Options, mode: str,
) -> tuple[str, ...]:
    """Phase 9: the analysis warnings (unreachable alpha, too few permutations, not applicable)."""
    warnings = list(context.warnings)
    alpha, n_permutations, unreachable = opts.alpha, opts.n_permutations, adjusted.unreachable
    if unreachable:
        worst = min(unreachable.values())
        warnings.append(f"too few models for a test at alpha {alpha:g}: the smallest attainable "
                        f"p is {worst:.3g}" + (f" (x {K} markers for Holm)" if K > 1 else "")
                        + f"; {', '.join(unreachable)} inconclusive (insufficient data)")
    need = n_permutations_for(alpha, K)
    if mode != "cluster" and n_permutations < need:
        warnings.append(f"{n_permutations} permutations cannot give a Holm p <= {alpha:g} over "
                        f"{K} markers (the smallest p is 1/{n_permutations + 1}); use >= {need}")
    nas = [s.marker for s in results if not s.applicable]
    if nas:
        warnings.append(f"not applicable: {', '.join(nas)} (see the reason column)")
    return tuple(warnings)
