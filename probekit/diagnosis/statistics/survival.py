"""The crossing step as an outcome: censored runs, Cox hazards, Harrell's C, censoring sensitivity.

**Censoring** (:func:`censor_crossing`, :func:`check_censor`). The column ``id_step_<c>`` (the
pipeline's ``crossing_step`` outcome) is empty for a run whose held-out accuracy never reaches ``c``. As an outcome it is right-censored: such a run
gets the censoring value ``C`` (e.g. one evaluation past the end of training), larger than every
observed crossing. Ranks stay exact (every never-crossing run ties at the top, where it belongs),
so Spearman correlations and their permutation p-values are exact; partial r and delta R^2 treat
``C`` as an observed value and are approximate for those runs (cf. Tobit / survival models,
Klein & Moeschberger 2003, ch. 3, for a censoring-aware regression).

Each row also gets ``final_<column>``: its run's (censored) crossing step, as on its final row,
so that the early-warning analysis (:func:`probekit.diagnosis.early_warning`) can use it.

**Beyond the censored outcome.** The crossing outcome ``id_step_<c>`` is right-censored: a
run that never reaches held-out accuracy ``c`` during training has no crossing step, only the
knowledge that it is later than the end of training. :func:`~probekit.diagnosis.censor_crossing`
fills such runs with one censoring value ``C`` and the marker analysis then treats ``C`` as an
observed step; the linear statistics (partial r, delta R^2, hence the verdicts) depend on the
arbitrary ``C``. This module adds, beside that analysis:

- **Cox proportional hazards** (Cox 1972, "Regression models and life-tables", JRSS B 34;
  fitted by ``lifelines.CoxPHFitter``, Davidson-Pilon 2019, JOSS 4(40)) of the crossing time on
  ``[covariates, marker]``: ``h(t | x) = h_0(t) exp(beta' x)``. The partial likelihood uses only
  the order of the observed crossings and who is still "at risk" at each one, so it is the
  same for every ``C`` past the last observed crossing: censoring is modelled, not imputed.
  The marker enters standardised (``(m - mean) / sd``, ``sd`` with ``ddof = 1``): its hazard
  ratio ``exp(beta_m)`` is per one standard deviation of the marker; > 1: models with a larger
  marker cross *earlier* (grok faster). p: the Wald test of ``beta_m = 0``; CI: Wald interval of
  ``beta_m``, exponentiated. **Design groups**: with ``groups`` (e.g. the seed) the model is
  *stratified* by group (each group its own baseline hazard ``h_0g(t)``, Kalbfleisch & Prentice
  2002, sec. 4.4), not fitted with cluster-robust standard errors: a populations' few seeds
  (3 in the shipped grids) are too few clusters for the sandwich estimator, which needs many.
- **Harrell's C** (Harrell, Califf, Pryor, Lee & Rosati 1982, JAMA 247) of the marker alone:
  over the comparable pairs (the earlier time is an observed crossing), the fraction whose
  marker orders them the same way as their times (ties in the marker count 1/2); 0.5 = no
  information, > 0.5: a larger marker goes with a *later* crossing. Its p: the marker permuted
  over models (within groups when given), two-sided ``|C - 1/2|``; a rank statistic that keeps
  censoring exact (like the Spearman of the censored outcome, but it does not order the
  censored runs among themselves).
- **Censoring sensitivity**: :func:`probekit.diagnosis.marker_analysis` rerun with the never-crossing runs
  filled with each ``C`` of a grid (by default :func:`censor_grid`: from the first value past
  training to twice it); each marker's partial r, partial p and verdict per ``C``. A marker
  whose verdict changes across the grid is flagged ``verdict_depends_on_censoring``: its
  censored-outcome verdict is an artefact of the arbitrary ``C``; read its Cox hazard ratio.
"""

from __future__ import annotations

import dataclasses
import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from jaxtyping import Bool, Float, Int

from probekit.errors import ConfigError, DataError
from probekit.report.blocks import Block, Column, LinePlot, Series, Table, Text
from probekit.report.notebook import NotebookMixin
from probekit.stats.multiple import holm
from probekit.stats.permutation import check_n_permutations, mc_se, permutation_pvalue

from .table import as_marker_table

__all__ = ["CensoredCrossing", "CensoringSensitivity", "CoxMarker", "DEPENDS_ON_CENSORING",
           "censor_crossing", "censor_grid", "censoring_sensitivity", "check_censor",
           "concordance_test", "cox_marker", "harrell_c"]

#: the flag of a marker whose censored-outcome verdict changes with the censoring value
DEPENDS_ON_CENSORING = "verdict_depends_on_censoring"
SURVIVAL_INSTALL_HINT = "pip install 'probekit-interp[survival]'"


def check_censor(censor: Any, observed: Sequence[float | None] = ()) -> float:
    """The one rule on a censoring step: a finite number > 0, above every observed crossing.

    A run that never crosses is placed after every run that does (its crossing happens, if at
    all, after training ended), so ``censor`` must exceed the largest observed crossing step;
    0 or a negative step would rank the never-crossing runs first. Called with the value alone
    where the crossings are not known yet (a file's ``[diagnosis] censor``, a grid not trained),
    and with ``observed`` wherever they are (``--check`` on existing runs, the run itself).

    Raises:
        DataError: ``censor = 0: a censoring step must be a finite number > 0 ...`` or
            ``censor = 500 is not above the largest observed crossing step 800 ...``.
    """
    if isinstance(censor, bool) or not isinstance(censor, (int, float)) or not (
            math.isfinite(censor) and censor > 0):
        number = isinstance(censor, (int, float)) and not isinstance(censor, bool)
        raise DataError(f"censor = {f'{censor:g}' if number else repr(censor)}: a censoring step "
                        "must be a finite number > 0 (a "
                        "training step after the last evaluation), or \"next_eval\"")
    seen = [float(v) for v in observed if v is not None]
    if seen and censor <= max(seen):
        raise DataError(f"censor = {censor:g} is not above the largest observed crossing step "
                        f"{max(seen):g}; give a step after the end of training (e.g. one "
                        "evaluation past the last)")
    return float(censor)


@dataclass(frozen=True, kw_only=True)
class CensoredCrossing:
    """A marker table whose crossing column is censored.

    Attributes:
        table: the input table (copied) with ``column`` filled and ``final_<column>`` added.
        column: the crossing column (``id_step_0.9``).
        censor: the value given to runs that never cross.
        n_censored: number of runs that never cross.
        n_runs: number of runs.
    """

    table: dict[str, list[Any]]
    column: str
    censor: float
    n_censored: int
    n_runs: int

    def warning(self) -> str:
        """The report's warning sentence (empty when no run is censored)."""
        if not self.n_censored:
            return ""
        return (f"{self.n_censored} of {self.n_runs} runs never cross ({self.column} empty): "
                f"censored at {self.censor:g}. Rank statistics (Spearman, its p-values) stay "
                "exact; partial r and delta R^2 treat the censored value as observed and are "
                "approximate.")


def censor_crossing(table: dict[str, list[Any]], column: str, censor: float, *,
                    run: str = "run", step: str = "step") -> CensoredCrossing:
    """Fill the empty cells of ``column`` with ``censor``; add ``final_<column>`` per run.

    Args:
        table: long-form marker table (``markers.csv`` columns) with ``column``, ``run`` and
            ``step``; a ``final`` column (1 on each run's final row) is used when present, else
            each run's last step is its final row.
        column: the crossing column; ``None`` / ``""`` cells are runs that never cross.
        censor: the value for those runs; must exceed every observed crossing step.
        run: the run column.
        step: the step column.

    Raises:
        DataError: a missing column, or ``censor`` not above every observed crossing step.
    """
    for c in (column, run, step):
        if c not in table:
            raise DataError(f"column {c!r} is not in the table; columns are {sorted(table)}")
    values = [None if v in (None, "") else float(v) for v in table[column]]
    if censor != math.inf:  # inf: no censoring requested (the runs all cross)
        check_censor(censor, values)
    runs = table[run]
    final = table.get("final")
    last: dict[Any, int] = {}
    for i, r in enumerate(runs):
        if final is not None:
            if int(final[i]):
                last[r] = i
        elif r not in last or float(table[step][i]) > float(table[step][last[r]]):
            last[r] = i
    missing = sorted({str(r) for r in runs} - {str(r) for r in last})
    if missing:
        raise DataError(f"run {missing[0]!r} has no final row (final = 1); every run needs one")
    filled = [censor if v is None else v for v in values]
    out = {k: list(v) for k, v in table.items()}
    out[column] = filled
    out[f"final_{column}"] = [filled[last[r]] for r in runs]
    return CensoredCrossing(table=out, column=column, censor=float(censor),
                            n_censored=sum(values[i] is None for i in last.values()),
                            n_runs=len(last))


def censor_grid(first: float | int, n: int = 5) -> tuple[float, ...]:
    """``n`` censoring values evenly from ``first`` (one evaluation past training) to ``2 first``.

    Rounded to whole steps when ``first`` is one.
    """
    if n < 2 or not math.isfinite(first) or first <= 0:
        raise ConfigError(f"censor_grid needs a finite first value > 0 and n >= 2, got "
                          f"first={first!r}, n={n}")
    grid = np.linspace(first, 2.0 * first, n)
    return tuple(float(round(v)) if float(first).is_integer() else float(v) for v in grid)


def harrell_c(
    time: Float[np.ndarray, " n"], event: Bool[np.ndarray, " n"], score: Float[np.ndarray, "b n"]
) -> Float[np.ndarray, " b"]:
    """Harrell's concordance of each row of ``score`` with right-censored ``(time, event)``.

    Pair ``(i, j)`` is comparable when ``event_i`` and ``time_i < time_j``, or ``time_i = time_j``
    with ``j`` censored (a crossing before a censoring at the same step); it is concordant when
    ``score_i < score_j`` (a larger score, a later time), half when the scores tie. Equal to
    ``lifelines.utils.concordance_index(time, score, event)`` (tests).
    """
    later = (time[:, None] < time[None, :]) | ((time[:, None] == time[None, :]) & ~event[None, :])
    comparable = event[:, None] & later
    i, j = np.nonzero(comparable)
    if i.size == 0:
        raise DataError("no comparable pair: no run crosses before another run's time; "
                        "Harrell's C is undefined")
    d = score[:, j] - score[:, i]
    return ((d > 0).sum(1) + 0.5 * (d == 0).sum(1)) / i.size


def concordance_test(
    time: Float[np.ndarray, " n"], event: Bool[np.ndarray, " n"], marker: Float[np.ndarray, " n"],
    groups: Int[np.ndarray, " n"], *, n_permutations: int, seed: int = 0,
) -> tuple[float, float]:
    """Harrell's C of ``marker`` and its two-sided permutation p (``|C - 1/2|``).

    The marker is permuted within the levels of ``groups`` (all zeros: over all models); the p
    is ``(1 + #{|C* - 1/2| >= |C - 1/2|}) / (1 + B)``.
    """
    c_obs = float(harrell_c(time, event, marker[None, :])[0])
    perms = _within(groups, n_permutations, np.random.default_rng([seed, 7]))
    null = harrell_c(time, event, marker[perms])
    return c_obs, permutation_pvalue(abs(c_obs - 0.5) - 1e-12, np.abs(null - 0.5), "greater")


@dataclass(frozen=True, kw_only=True)
class CoxMarker:
    """Cox hazard ratio and Harrell's C of one marker for the crossing time.

    Attributes:
        marker: the column.
        hazard_ratio, hr_low, hr_high: ``exp(beta_m)`` per one SD of the marker and its Wald CI.
        coef, se, p: ``beta_m``, its standard error and Wald p.
        p_holm: ``p`` Holm-adjusted over the markers fitted together
            (:func:`censoring_sensitivity`; NaN from :func:`cox_marker` alone).
        concordance, concordance_p, concordance_p_mcse: Harrell's C of the marker alone, its
            permutation p and that p's Monte-Carlo SE.
        n, n_events: models and observed crossings.
        note: lifelines' convergence warning, or why the fit is not applicable ("" when fine).
    """

    marker: str
    hazard_ratio: float = math.nan
    hr_low: float = math.nan
    hr_high: float = math.nan
    coef: float = math.nan
    se: float = math.nan
    p: float = math.nan
    p_holm: float = math.nan
    concordance: float = math.nan
    concordance_p: float = math.nan
    concordance_p_mcse: float = math.nan
    n: int = 0
    n_events: int = 0
    note: str = ""

    def to_record(self) -> dict[str, Any]:
        """The fields as one dict."""
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


def _require_lifelines() -> Any:
    try:
        import lifelines
    except ImportError:
        raise ConfigError("the Cox model of a censored crossing step needs lifelines, which is "
                          f"not installed; {SURVIVAL_INSTALL_HINT}") from None
    return lifelines


def _times(t: Any, outcome: str) -> tuple[np.ndarray, np.ndarray]:
    """Observed crossing steps (NaN: never crosses) and the event indicator."""
    y = t.numeric(outcome, "outcome", allow_missing=True)
    return y, ~np.isnan(y)


def cox_marker(
    table: Mapping[str, Sequence[Any]] | Any,
    outcome: str,
    marker: str,
    *,
    censor: float,
    covariates: Sequence[str] = (),
    groups: str | None = None,
    n_permutations: int = 1000,
    seed: int = 0,
    confidence_level: float = 0.95,
    covariate_coding: Mapping[str, str] | None = None,
    spline_df: int = 4,
) -> CoxMarker:
    """Cox model of the crossing time on ``[covariates, marker]`` (stratified by ``groups``).

    Args:
        table: one row per model; ``outcome`` empty (None / NaN) for the runs that never cross.
        outcome: the crossing column (``id_step_0.9``).
        marker: the marker column (standardised in the fit; rows missing it are dropped).
        censor: the time of the never-crossing runs (> every observed crossing; the Cox fit and
            Harrell's C do not depend on its value).
        covariates: numeric or text (one-hot) columns, as in the marker analysis.
        groups: strata of the Cox model and of the permutations of Harrell's C (e.g. the seed).
        n_permutations: permutations for Harrell's C's p.
        seed: seeds the permutations.
        confidence_level: level of the hazard ratio's interval.
        covariate_coding: covariate -> ``"factor" | "linear" | "spline"``, as in
            :func:`~probekit.diagnosis.marker_analysis` (:meth:`MarkerTable.design`).
        spline_df: columns of each spline covariate.

    Raises:
        ConfigError: lifelines missing, unknown columns, bad counts.
        DataError: ``censor`` not above every crossing, no observed crossing.
    """
    check_n_permutations(n_permutations)
    t = as_marker_table(table)
    t.check_names([outcome], "outcome")
    t.check_names([marker], "marker")
    t.check_names(list(covariates), "covariate")
    if groups is not None:
        t.check_names([groups], "groups")
    time, event = _times(t, outcome)
    if event.any() and censor <= np.nanmax(time):
        raise DataError(f"censor = {censor:g} is not above the largest observed crossing step "
                        f"{np.nanmax(time):g}; give a step after the end of training")
    time = np.where(event, time, censor)
    m = t.numeric(marker, "marker", allow_missing=True)
    keep = ~np.isnan(m)
    X, terms = t.design(list(covariates), coding=covariate_coding, spline_df=spline_df,
                        groups=groups)
    g = t.codes(groups, "groups")[0] if groups is not None else np.zeros(t.n_rows, dtype=np.int64)
    time, event, m, X, g = time[keep], event[keep], m[keep], X[keep], g[keep]
    base = {"marker": marker, "n": int(keep.sum()), "n_events": int(event.sum())}
    if not event.any():
        return CoxMarker(**base, note="no run crosses: nothing to fit")
    if np.ptp(m) == 0:
        return CoxMarker(**base, note="the marker is constant")
    c_obs, c_p = concordance_test(time, event, m, g, n_permutations=n_permutations, seed=seed)
    base.update(concordance=c_obs, concordance_p=c_p,
                concordance_p_mcse=mc_se(c_p, n_permutations))
    frame = cox_frame(time, event, X, terms, (m - m.mean()) / m.std(ddof=1),
                      g if groups is not None else None)
    lifelines = _require_lifelines()
    fitter = lifelines.CoxPHFitter(alpha=1.0 - confidence_level)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            fitter.fit(frame, duration_col="duration", event_col="event",
                       strata=["stratum"] if groups is not None else None)
        except lifelines.exceptions.ConvergenceError as err:
            return CoxMarker(**base, note=f"the Cox fit did not converge: {str(err).splitlines()[0]}")
    row = fitter.summary.loc["marker"]
    note = next((str(w.message).splitlines()[0] for w in caught
                 if "Convergence" in type(w.message).__name__), "")
    low = next(k for k in row.index if k.startswith("exp(coef) lower"))
    high = next(k for k in row.index if k.startswith("exp(coef) upper"))
    return CoxMarker(**base, hazard_ratio=float(row["exp(coef)"]), hr_low=float(row[low]),
                     hr_high=float(row[high]),
                     coef=float(row["coef"]), se=float(row["se(coef)"]), p=float(row["p"]),
                     note=note)


def cox_frame(
    time: Float[np.ndarray, " n"], event: Bool[np.ndarray, " n"], X: Float[np.ndarray, "n k"],
    terms: Sequence[str], marker: Float[np.ndarray, " n"], strata: Int[np.ndarray, " n"] | None,
) -> Any:
    """The lifelines frame: ``duration, event, x0..x{k-1}`` (covariate terms), ``marker``, ``stratum``."""
    import pandas as pd

    cols: dict[str, Any] = {"duration": time, "event": event.astype(np.int64)}
    for i in range(len(terms)):
        cols[f"x{i}"] = X[:, i]
    cols["marker"] = marker
    if strata is not None:
        cols["stratum"] = strata
    return pd.DataFrame(cols)


def _within(g: Int[np.ndarray, " n"], n_permutations: int,
            rng: np.random.Generator) -> Int[np.ndarray, "b n"]:
    """``n_permutations`` index permutations that keep each index within its level of ``g``."""
    out = np.tile(np.arange(g.size), (n_permutations, 1))
    for level in np.unique(g):
        idx = np.flatnonzero(g == level)
        out[:, idx] = rng.permuted(np.tile(idx, (n_permutations, 1)), axis=1)
    return out


@dataclass(frozen=True, kw_only=True, repr=False)
class CensoringSensitivity(NotebookMixin):
    """Cox hazards of the crossing time and the marker analysis over a grid of censoring values.

    Attributes:
        outcome, covariates, groups: the question.
        censors: the censoring values ``C`` of the grid.
        n_censored, n_runs: models that never cross, and models.
        cox: per marker, its :class:`CoxMarker`.
        curve: one dict per (marker, ``C``): ``partial_r``, ``partial_p``, ``partial_p_holm``,
            ``spearman``, ``verdict`` of :func:`~probekit.diagnosis.marker_analysis`.
        flags: marker -> flag strings (``verdict_depends_on_censoring``).
        settings: n_permutations, seed.
        label: which rows the markers come from (e.g. ``"markers at step 300"``), appended to
            the titles; "" for the final models.
    """

    outcome: str
    covariates: tuple[str, ...]
    groups: str | None
    censors: tuple[float, ...]
    n_censored: int
    n_runs: int
    cox: tuple[CoxMarker, ...]
    curve: tuple[dict[str, Any], ...]
    flags: dict[str, tuple[str, ...]]
    settings: dict[str, Any]
    label: str = ""

    def to_records(self) -> list[dict[str, Any]]:
        """The sensitivity curve: one dict per (marker, censoring value)."""
        return [dict(r) for r in self.curve]

    def cox_records(self) -> list[dict[str, Any]]:
        """One dict per marker: the Cox and Harrell's C statistics and the flags."""
        return [{**c.to_record(), "flags": ",".join(self.flags.get(c.marker, ()))}
                for c in self.cox]

    def to_dict(self) -> dict[str, Any]:
        """Strict-JSON form (``report.json``'s ``diagnosis.survival``)."""
        from probekit.report.blocks import strict_json

        return strict_json({
            "outcome": self.outcome, "covariates": list(self.covariates), "groups": self.groups,
            "label": self.label, "censors": list(self.censors), "n_censored": self.n_censored,
            "n_runs": self.n_runs,
            "settings": dict(self.settings), "cox": self.cox_records(),
            "curve": self.to_records(), "flags": {k: list(v) for k, v in self.flags.items()},
            "sentences": {m: s for m in self.markers if (s := self.sentence(m))},
        })

    @property
    def markers(self) -> tuple[str, ...]:
        """The markers, in input order."""
        return tuple(c.marker for c in self.cox)

    def verdicts(self, marker: str) -> list[str]:
        """``marker``'s verdict at each censoring value."""
        return [r["verdict"] for r in self.curve if r["marker"] == marker]

    def sentence(self, marker: str) -> str:
        """The warning sentence of a flagged marker ("" otherwise)."""
        if DEPENDS_ON_CENSORING not in self.flags.get(marker, ()):
            return ""
        rows = [r for r in self.curve if r["marker"] == marker]
        parts = ", ".join(f"{r['verdict']} at C = {r['censor']:g} (partial r {r['partial_r']:+.2f})"
                          for r in rows)
        c = next(c for c in self.cox if c.marker == marker)
        cox = (f"; the Cox hazard ratio per SD, which does not depend on C, is "
               f"{c.hazard_ratio:.2f} [{c.hr_low:.2f}, {c.hr_high:.2f}] (p {c.p:.2g}, Holm p "
               f"{c.p_holm:.2g})"
               if math.isfinite(c.hazard_ratio) else "")
        return (f"{marker}{self._of()}: its verdict on the censored {self.outcome} depends on the "
                "censoring "
                f"value given to the {self.n_censored} never-crossing runs ({parts}){cox}.")

    def _title(self) -> str:
        return f"{self.outcome} as a censored survival time{self._of()}"

    def _of(self) -> str:
        return f" ({self.label})" if self.label else ""

    def _summary(self) -> str:
        flagged = [m for m in self.markers if self.flags.get(m)]
        return (f"{self.n_censored} of {self.n_runs} runs censored, C in "
                f"[{self.censors[0]:g}, {self.censors[-1]:g}]: "
                f"{len(flagged)} of {len(self.markers)} verdicts depend on C")

    def _blocks(self) -> tuple[Block, ...]:
        level = f"{self.settings.get('confidence_level', 0.95):.0%}"
        strata = (f"stratified by {self.groups} (a baseline hazard per group)" if self.groups
                  else "unstratified")
        given = ", ".join(self.covariates) or "nothing"
        cox = Table(
            title=f"{self.outcome} as a survival time: Cox proportional hazards and Harrell's C"
            f"{self._of()}",
            columns=(Column(key="marker", header="marker", fmt="", align="left"),
                     Column(key="hazard_ratio", header="hazard ratio per SD", fmt=".2f"),
                     Column(key="hr_ci", header=f"{level} CI", fmt="ci"),
                     Column(key="p", header="Wald p", fmt=".2g"),
                     Column(key="p_holm", header="Holm p", fmt=".2g"),
                     Column(key="concordance", header="Harrell's C", fmt=".3f"),
                     Column(key="concordance_p", header="perm. p", fmt=".2g"),
                     Column(key="concordance_p_mcse", header="p MC SE", fmt=".1g"),
                     Column(key="n_events", header="crossings", fmt="d"),
                     Column(key="flags", header="flags", fmt="", align="left"),
                     Column(key="note", header="note", fmt="", align="left")),
            rows=tuple({**r, "hr_ci": [r["hr_low"], r["hr_high"]]} for r in self.cox_records()),
            caption=f"Cox model of the crossing step given {given} and the standardised marker, "
            f"{strata}; the {self.n_censored} never-crossing runs are censored, not imputed, so "
            "nothing depends on the censoring value. Hazard ratio > 1: a larger marker, an "
            "earlier crossing. Harrell's C of the marker alone (> 0.5: a larger marker, a later "
            "crossing); its p permutes the marker"
            + (f" within {self.groups}." if self.groups else " over models."),
        )
        curve = Table(
            title=f"Sensitivity of the marker analysis to the censoring value C of {self.outcome}"
            f"{self._of()}",
            columns=(Column(key="marker", header="marker", fmt="", align="left"),
                     Column(key="censor", header="C", fmt="g"),
                     Column(key="spearman", header="Spearman", fmt="+.3f"),
                     Column(key="partial_r", header="partial r", fmt="+.3f"),
                     Column(key="partial_p", header="partial p", fmt=".2g"),
                     Column(key="partial_p_holm", header="Holm p", fmt=".2g"),
                     Column(key="verdict", header="verdict", fmt="", align="left")),
            rows=self.curve,
            caption="The never-crossing runs filled with each C and the marker analysis rerun "
            "(same permutations). Spearman does not move (the censored runs stay tied at the "
            "top); partial r and the verdict may.",
        )
        markers = self.markers
        plot = LinePlot(
            title=f"partial r with {self.outcome} vs the censoring value{self._of()}",
            x_labels=tuple(f"{c:g}" for c in self.censors),
            series=tuple(Series(name=m, values=tuple(r["partial_r"] for r in self.curve
                                                     if r["marker"] == m),
                                style="dashed" if self.flags.get(m) else "line")
                         for m in markers),
            xlabel="censoring value C", ylabel="partial r", hlines=((0.0, ""),),
        )
        texts = tuple(Text(text=s, level="warning") for m in markers if (s := self.sentence(m)))
        return (cox, *texts, curve, plot)


def censoring_sensitivity(
    table: Mapping[str, Sequence[Any]] | Any,
    outcome: str,
    *,
    markers: Sequence[str],
    censors: Sequence[float | int] | None = None,
    covariates: Sequence[str] = (),
    groups: str | None = None,
    n_permutations: int = 1000,
    seed: int = 0,
    confidence_level: float = 0.95,
    label: str = "",
    **analysis_options: Any,
) -> CensoringSensitivity:
    """Cox hazards per marker and the marker analysis over a grid of censoring values.

    Args:
        table: one row per model; ``outcome`` empty (None / NaN) for the runs that never cross.
        outcome: the crossing column.
        markers: the marker columns.
        censors: increasing censoring values, each above every observed crossing; default
            :func:`censor_grid` from one step past the largest observed crossing (pass
            ``censor_grid(first value past training)`` when that is known, as the runner does
            with ``[diagnosis] censor``).
        covariates: as in :func:`~probekit.diagnosis.marker_analysis` (and the Cox model's).
        groups: as in :func:`~probekit.diagnosis.marker_analysis`; the Cox strata.
        n_permutations: permutations of every test (the same at every ``C``).
        seed: seeds them.
        confidence_level: level of the hazard ratios' intervals.
        label: which rows the markers come from, for the titles (e.g. "markers at step 300").
        **analysis_options: further keywords of :func:`~probekit.diagnosis.marker_analysis`
            (e.g. ``covariate_coding``, ``spline_df``, ``inference``), the same at every ``C``;
            ``covariate_coding`` / ``spline_df`` also code the Cox model's covariates.

    Raises:
        ConfigError: an empty or unsorted grid, no marker.
        DataError: a censoring value not above every observed crossing, or no run censored.
    """
    from .analysis import marker_analysis

    t = as_marker_table(table)
    t.check_names([outcome], "outcome")
    markers = [markers] if isinstance(markers, str) else list(markers)
    if not markers:
        raise ConfigError("markers is empty; name at least one marker column")
    time, event = _times(t, outcome)
    if event.all():
        raise DataError(f"every run crosses ({outcome} has no empty cell): nothing is censored")
    last = float(np.nanmax(time)) if event.any() else 0.0
    grid = tuple(float(c) for c in (censors if censors is not None else censor_grid(last + 1.0)))
    if not grid or list(grid) != sorted(set(grid)):
        raise ConfigError(f"censors must be increasing and distinct, got {list(grid)}")
    if grid[0] <= last:
        raise DataError(f"censor = {grid[0]:g} is not above the largest observed crossing step "
                        f"{last:g}; start the grid after the end of training")
    cox = tuple(cox_marker(table, outcome, m, censor=grid[0], covariates=covariates,
                           groups=groups, n_permutations=n_permutations, seed=seed,
                           confidence_level=confidence_level,
                           **{k: v for k, v in analysis_options.items()
                              if k in ("covariate_coding", "spline_df")}) for m in markers)
    fitted = [i for i, c in enumerate(cox) if math.isfinite(c.p)]
    if fitted:
        adj = holm([cox[i].p for i in fitted])
        cox = tuple(dataclasses.replace(c, p_holm=float(adj[fitted.index(i)])) if i in fitted
                    else c for i, c in enumerate(cox))
    cols = list(dict.fromkeys([*covariates, *([groups] if groups else []), *markers]))
    base = {c: list(t.columns[c]) for c in cols}
    curve: list[dict[str, Any]] = []
    for c in grid:
        filled = {**base, outcome: np.where(event, time, c).tolist()}
        a = marker_analysis(filled, outcome, markers=markers, covariates=list(covariates),
                            groups=groups, n_permutations=n_permutations, seed=seed,
                            **analysis_options)
        curve += [{"marker": s.marker, "censor": c, "spearman": s.spearman,
                   "partial_r": s.partial_r, "partial_p": s.partial_p,
                   "partial_p_holm": s.partial_p_holm, "verdict": s.verdict} for s in a.markers]
    flags = {m: (DEPENDS_ON_CENSORING,) if len({r["verdict"] for r in curve
                                                 if r["marker"] == m}) > 1 else ()
             for m in markers}
    return CensoringSensitivity(
        outcome=outcome, covariates=tuple(covariates), groups=groups, censors=grid,
        n_censored=int((~event).sum()), n_runs=int(event.size), cox=cox, curve=tuple(curve),
        flags=flags, settings={"n_permutations": n_permutations, "seed": seed,
                               "confidence_level": confidence_level}, label=label)
