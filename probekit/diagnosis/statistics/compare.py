"""Two populations side by side: each marker's partial effect in both, and a test of the difference.

For populations ``A`` and ``B`` (two marker tables with the same outcome, marker and covariate
columns), each marker's partial effect is estimated in each population by
:func:`~probekit.diagnosis.marker_analysis` (its own design, groups and inference), and the
difference is tested by the **marker x population interaction** on the stacked table::

    y = [1_A, C_A 1_A, 1_B, C_B 1_B, group FE] gamma + beta m + delta (m 1_B) + e

where ``C_A``, ``C_B`` are each population's covariate terms (:meth:`MarkerTable.design`, coded
on that population alone: the nuisance is fully interacted with the population, so a knob may
act differently in each), the groups are nested in the population (seed 0 of A and seed 0 of
B are different models), and ``delta = beta_B - beta_A`` is the difference of the two slopes of
``m`` (raw units: the marker and the outcome are the same columns in both). ``H0: delta = 0`` is
tested with the single-population partial test's own machinery (:mod:`.association`): the
studentised coefficient (HC3; CR1 by group with ``inference="cluster"``), p by Freedman & Lane
(1983) with the reduced model's residuals (which include the common slope ``beta m``) permuted
within groups, or the wild cluster restricted bootstrap; the CI of the interaction's partial r
by test inversion. Holm over the markers (a layer family of :mod:`.families` counting once). The slopes rather than the partial r's are compared:
a partial r also moves with the residual spread of each population, a slope does not.

Calibration (``tests/diagnosis/test_compare.py``, simulated pairs of 40 models in 5 seeds):
within groups, a null pair rejects at .05 in 4.5-5.5% of 200; with ``inference="cluster"`` (seed
fixed effects in, as in :mod:`.association`) and 5 + 5 seeds the wild cluster bootstrap rejects
in 7.0-7.5% of 200 (11% before the fixed effects entered the cluster design).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from probekit.errors import ConfigError, DataError

from .analysis import MarkerAnalysis, _resolve_groups, marker_analysis
from .association import marker_stats, partial_p, row_set
from .families import weighted_holm
from .table import as_marker_table

__all__ = ["PopulationComparison", "compare_populations", "interaction_test"]


def _stack(table_a: Any, table_b: Any, outcome: str, marker: str, covariates: Sequence[str],
           groups: str | None, coding: Mapping[str, str] | None, spline_df: int,
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """``y, m, C, g, b`` of the stacked populations (rows with a missing ``m`` still in)."""
    ys, ms, Cs, gs, bs = [], [], [], [], []
    for k, table in enumerate((table_a, table_b)):
        t = as_marker_table(table)
        t.check_names([outcome, marker, *covariates], "column")
        C, _ = t.design(list(covariates), coding=dict(coding or {}), spline_df=spline_df,
                        groups=groups)
        ys.append(t.numeric(outcome, "outcome"))
        ms.append(t.numeric(marker, "marker", allow_missing=True))
        Cs.append(C)
        g = (np.arange(t.n_rows) if groups is None else t.codes(groups, "groups")[0])
        gs.append(g * 2 + k)  # groups nested in the population
        bs.append(np.full(t.n_rows, float(k)))
    na, nb = Cs[0].shape[0], Cs[1].shape[0]
    C = np.zeros((na + nb, Cs[0].shape[1] + Cs[1].shape[1] + 1))
    C[:na, :Cs[0].shape[1]] = Cs[0]
    C[na:, Cs[0].shape[1]:-1] = Cs[1]
    b = np.concatenate(bs)
    C[:, -1] = b  # B's own intercept
    return (np.concatenate(ys), np.concatenate(ms), C, np.concatenate(gs), b)


def interaction_test(
    table_a: Any, table_b: Any, outcome: str, marker: str, *, covariates: Sequence[str] = (),
    groups: str | None = "auto", inference: str = "within_groups", n_resamples: int = 1000,
    seed: int = 0, confidence_level: float | None = 0.95,
    covariate_coding: Mapping[str, str] | None = None, spline_df: int = 4,
) -> dict[str, Any]:
    """The marker x population interaction test of the module docstring for one marker.

    Returns:
        ``p`` (raw), ``p_mcse``, ``r`` (partial r of ``m 1_B`` given the reduced model),
        ``low``/``high`` (its CI; NaN with ``confidence_level=None``), ``delta`` (the slope
        difference ``beta_B - beta_A``), ``n`` (rows used), ``n_resamples``; ``p`` NaN with a
        ``reason`` when the interaction is a linear function of the reduced design.

    Raises:
        ConfigError: an unknown column, ``inference`` not ``within_groups`` / ``cluster``.
    """
    if inference not in ("within_groups", "cluster"):
        raise ConfigError(f"inference must be 'within_groups' or 'cluster', got {inference!r}")
    from probekit.stats.permutation import check_n_permutations

    check_n_permutations(n_resamples, name="n_resamples")  # permutations or bootstrap draws
    ta = as_marker_table(table_a)
    g_name, _ = _resolve_groups(ta, groups, outcome, tuple(covariates))
    y, m, C, g, b = _stack(table_a, table_b, outcome, marker, covariates, g_name,
                           covariate_coding, spline_df)
    keep = ~np.isnan(m)
    mode = "models" if g_name is None else inference
    mz = np.where(keep, m, 0.0)
    Cm = np.column_stack([C, mz])  # the common slope is in the reduced model
    rng = np.random.default_rng([seed, 46])
    rs = row_set(keep, y, Cm, g, None, mode=mode, n_resamples=n_resamples, rng=rng)
    inter = (m * b)[keep]
    out: dict[str, Any] = {"n": int(keep.sum()), "n_resamples": rs.n_resamples}
    if confidence_level is None:
        res = partial_p(inter, rs)
        if not res:
            return {**out, "p": math.nan, "reason": "the interaction is collinear with the design"}
        return {**out, "p": res["partial_p"], "p_mcse": res["partial_p_mcse"], "r": math.nan,
                "low": math.nan, "high": math.nan, "delta": _delta(rs, inter)}
    st = marker_stats(inter, rs, confidence_level=confidence_level, mde_alpha=0.05)
    if "partial_p" not in st:
        return {**out, "p": math.nan, "reason": "the interaction is collinear with the design"}
    return {**out, "p": st["partial_p"], "p_mcse": st["partial_p_mcse"], "r": st["partial_r"],
            "low": st["partial_low"], "high": st["partial_high"], "delta": _delta(rs, inter)}


def _delta(rs: Any, inter: np.ndarray) -> float:
    """OLS coefficient of the interaction in ``y ~ X + inter``."""
    X = np.column_stack([rs.X, inter])
    coef = np.linalg.lstsq(X, rs.y, rcond=None)[0]
    return float(coef[-1])


@dataclass(frozen=True, kw_only=True)
class PopulationComparison:
    """Result of :func:`compare_populations`.

    Attributes:
        labels: the two populations' names.
        a, b: each population's :class:`~probekit.diagnosis.statistics.analysis.MarkerAnalysis`.
        markers: the compared markers.
        tests: marker -> :func:`interaction_test` result plus ``p_holm`` (Holm over markers).
        settings: alpha, inference, unit, n_resamples, seed.
    """

    labels: tuple[str, str]
    a: MarkerAnalysis
    b: MarkerAnalysis
    markers: tuple[str, ...]
    tests: dict[str, dict[str, Any]]
    settings: dict[str, Any] = field(default_factory=dict)

    def sentence(self, marker: str) -> str:
        """One sentence: the partial r in each population and the test of their difference."""
        if marker not in self.tests:
            raise KeyError(f"no marker {marker!r}; markers: {list(self.markers)}")
        from probekit.report.numbers import format_p, p_floor

        la, lb = self.labels
        sa, sb, t = self.a[marker], self.b[marker], self.tests[marker]

        def eff(label: str, s: Any) -> str:
            if not math.isfinite(s.partial_r):
                return f"in {label} the partial r is undefined ({s.verdict})"
            floor = p_floor(s.n_permutations_used or self.a.settings.get("n_permutations"))
            return (f"in {label} the partial r is {s.partial_r:.2f} [{s.partial_low:.2f}, "
                    f"{s.partial_high:.2f}] (Holm p {format_p(s.partial_p_holm, floor)}, "
                    f"{s.verdict})")

        if not math.isfinite(t["p"]):
            diff = f"the difference is not testable ({t.get('reason', '')})"
        else:
            alpha = self.settings["alpha"]
            word = ("the slopes differ" if t["p_holm"] <= alpha
                    else "no difference shown")
            floor = p_floor(t.get("n_resamples"))
            diff = (f"the marker x population interaction (slope {lb} - {la} = "
                    f"{t['delta']:.3g} {self.slope_unit()}; partial r {t['r']:.2f} "
                    f"[{t['low']:.2f}, {t['high']:.2f}]) has p {format_p(t['p'], floor)}, Holm p "
                    f"{format_p(t['p_holm'], floor)}, from {self.settings['unit']}: {word} at "
                    f"alpha {alpha:g}")
        return f"{marker}: {eff(la, sa)}; {eff(lb, sb)}; {diff}."

    def to_dict(self) -> dict[str, Any]:
        """Strict-JSON form: both analyses, the tests and the sentences."""
        from probekit.report.blocks import strict_json

        return strict_json({
            "labels": list(self.labels), "settings": dict(self.settings),
            "markers": list(self.markers), "tests": self.tests,
            "sentences": {m: self.sentence(m) for m in self.markers},
            "populations": {self.labels[0]: self.a.to_dict(), self.labels[1]: self.b.to_dict()},
        })

    def slope_unit(self) -> str:
        """The unit of the slope difference: outcome units per marker unit (raw columns)."""
        return f"{self.settings.get('outcome', 'outcome')} per unit of the marker"

    def table(self) -> Any:
        """Both populations' verdicts with CIs and the interaction (its unit), one row a marker.

        Grouped headers: population A (verdict, partial r, CI, Holm p) | population B (the
        same) | the marker x population interaction (slope B - A, its partial r with CI, p,
        Holm p); the caption names the slope's unit and the resampling unit.
        """
        from probekit.report.blocks import Column, Table
        from probekit.report.numbers import p_floor

        la, lb = self.labels
        level = f"{self.a.settings.get('confidence_level', 0.95):.0%}"
        rows = []
        for m in self.markers:
            t = self.tests[m]
            row: dict[str, Any] = {"marker": m, "delta": t.get("delta", math.nan),
                                   "r": t.get("r", math.nan), "ci": [t.get("low"), t.get("high")],
                                   "p": t["p"], "p_holm": t.get("p_holm", math.nan),
                                   "p_floor": p_floor(t.get("n_resamples"))}
            for key, an in (("a", self.a), ("b", self.b)):
                s = an[m]
                row.update({f"{key}_verdict": s.verdict, f"{key}_r": s.partial_r,
                            f"{key}_ci": [s.partial_low, s.partial_high],
                            f"{key}_p": s.partial_p_holm})
            rows.append(row)
        cols = [Column(key="marker", header="marker", fmt="", align="left", nowrap=True)]
        for key, label in (("a", la), ("b", lb)):
            cols += [Column(key=f"{key}_verdict", header="verdict", fmt="", align="left",
                            nowrap=True, group=label),
                     Column(key=f"{key}_r", header="partial r", fmt="+.3f", group=label),
                     Column(key=f"{key}_ci", header=f"{level} CI", fmt="ci", nowrap=True,
                            group=label),
                     Column(key=f"{key}_p", header="Holm p", fmt="p", group=label)]
        inter = "interaction (marker x population)"
        cols += [Column(key="delta", header=f"slope {lb} - {la}", fmt="+.3g", group=inter),
                 Column(key="r", header="partial r", fmt="+.3f", group=inter),
                 Column(key="ci", header=f"{level} CI", fmt="ci", nowrap=True, group=inter),
                 Column(key="p", header="p", fmt="p", group=inter),
                 Column(key="p_holm", header="Holm p", fmt="p", group=inter)]
        caption = (f"Each population's verdict and partial r ({level} CI, Holm p) from its own "
                   f"analysis; the interaction: slope {lb} - {la} in {self.slope_unit()} (raw "
                   "columns, the same in both), its partial r given the fully interacted "
                   f"nuisance, p and CI from {self.settings['unit']}, Holm over the markers.")
        return Table(title=f"{la} and {lb}: verdicts and the difference of the slopes",
                     columns=tuple(cols), rows=tuple(rows), caption=caption, anchor="verdicts")

    def forest(self) -> Any:
        """The paired forest plot: per marker the partial r in A and in B, coloured by verdict."""
        from probekit.report.blocks import Forest
        from probekit.report.numbers import format_p, p_floor

        from .verdicts import VERDICT_COLORS

        margin = float(self.a.settings.get("equivalence_margin", 0.2))
        level = f"{self.a.settings.get('confidence_level', 0.95):.0%}"
        labels, values, low, high, cats, series, hover = [], [], [], [], [], [], []
        for m in self.markers:
            t = self.tests[m]
            diff = (f"interaction p {format_p(t['p'], p_floor(t.get('n_resamples')))}, Holm p "
                    f"{format_p(t.get('p_holm', math.nan), p_floor(t.get('n_resamples')))}")
            for label, an in zip(self.labels, (self.a, self.b), strict=True):
                s = an[m]
                labels.append(m)
                values.append(s.partial_r if math.isfinite(s.partial_r) else None)
                low.append(s.partial_low if math.isfinite(s.partial_low) else None)
                high.append(s.partial_high if math.isfinite(s.partial_high) else None)
                cats.append(s.verdict)
                series.append(label)
                floor = p_floor(s.n_permutations_used or an.settings.get("n_permutations"))
                hover.append(f"Holm p {format_p(s.partial_p_holm, floor)}; n = {s.n}; {diff}")
        given = ", ".join(self.settings.get("covariates") or []) or "nothing"
        return Forest(title=f"partial r with {self.settings.get('outcome')} given {given}, in "
                      f"{self.labels[0]} and {self.labels[1]}", labels=tuple(labels),
                      values=tuple(values), low=tuple(low), high=tuple(high),
                      categories=tuple(cats), colors=VERDICT_COLORS, series=tuple(series),
                      hover=tuple(hover), band=margin, band_label=f"equivalence +-{margin:g}",
                      xlabel=f"partial r ({level} CI)", anchor="forest")

    def blocks(self) -> tuple[Any, ...]:
        """Report blocks: the verdicts-and-interaction table, the sentences folded away."""
        from probekit.report.blocks import Fold, Text

        return (self.table(), Fold(title=f"One sentence per marker ({len(self.markers)})",
                                   blocks=tuple(Text(text=self.sentence(m))
                                                for m in self.markers)))


def compare_populations(
    table_a: Any, table_b: Any, outcome: str, *, markers: Sequence[str] | None = None,
    covariates: Sequence[str] = (), groups: str | None = "auto",
    inference: str = "within_groups", labels: tuple[str, str] = ("A", "B"),
    n_permutations: int = 1000, n_bootstrap: int = 1000, alpha: float = 0.05, seed: int = 0,
    confidence_level: float = 0.95, covariate_coding: Mapping[str, str] | None = None,
    spline_df: int = 4, **analysis_kwargs: Any,
) -> PopulationComparison:
    """Each marker's partial effect in two populations and the test of their difference.

    Args:
        table_a: the first marker table (mapping column -> values, or a DataFrame).
        table_b: the second, with the same outcome, covariate and marker columns.
        outcome: the outcome column.
        markers: the compared markers (default: the markers of ``table_a``'s analysis that
            ``table_b`` also has).
        covariates: as :func:`~probekit.diagnosis.marker_analysis`, coded per population.
        groups: as :func:`marker_analysis`; nested in the population for the interaction.
        inference: ``"within_groups"`` or ``"cluster"``, as :func:`marker_analysis`.
        labels: names of the two populations in the sentences.
        n_permutations: permutations of both analyses and of the interaction tests.
        n_bootstrap: wild cluster bootstrap draws (``inference="cluster"``).
        alpha: level of the Holm-adjusted difference tests (and of both analyses).
        seed: seeds both analyses; the interaction test of the i-th marker uses ``seed + i``.
        confidence_level: of every CI.
        covariate_coding: covariate -> coding, as :func:`marker_analysis`.
        spline_df: columns of each spline term.
        analysis_kwargs: further :func:`marker_analysis` arguments of both analyses.

    Raises:
        ConfigError: a marker one table lacks, identical labels.
        DataError: a table :func:`marker_analysis` refuses.
    """
    if labels[0] == labels[1]:
        raise ConfigError(f"labels {labels}: give the two populations different names")
    common = dict(covariates=covariates, groups=groups, inference=inference,
                  n_permutations=n_permutations, n_bootstrap=n_bootstrap, alpha=alpha,
                  seed=seed, confidence_level=confidence_level,
                  covariate_coding=covariate_coding, spline_df=spline_df, **analysis_kwargs)
    a = marker_analysis(table_a, outcome, markers=markers, **common)
    chosen = tuple(s.marker for s in a.markers)
    tb = as_marker_table(table_b)
    missing = [m for m in chosen if m not in tb.names]
    if missing:
        if markers is not None:
            raise ConfigError(f"population {labels[1]!r} has no column {missing[0]!r}; its "
                              f"columns are {list(tb.names)}")
        chosen = tuple(m for m in chosen if m not in missing)
        a = marker_analysis(table_a, outcome, markers=chosen, **common)
    b = marker_analysis(table_b, outcome, markers=chosen, **common)
    if a.groups != b.groups:
        raise DataError(f"the populations resolve different groups ({a.groups!r} vs "
                        f"{b.groups!r}); pass groups= explicitly")
    B = n_bootstrap if inference == "cluster" and a.groups is not None else n_permutations
    tests: dict[str, dict[str, Any]] = {}
    for i, m in enumerate(chosen):
        tests[m] = interaction_test(table_a, table_b, outcome, m, covariates=covariates,
                                    groups=a.groups, inference=inference, n_resamples=B,
                                    seed=seed + i, confidence_level=confidence_level,
                                    covariate_coding=covariate_coding, spline_df=spline_df)
    ok = {m: tests[m]["p"] for m in chosen if math.isfinite(tests[m]["p"])}
    fams = {f: tuple(x for x in ms if x in ok) for f, ms in a.families.items()}
    for m, ph in weighted_holm(ok, fams, alpha)[0].items():  # Holm; a family counts once
        tests[m]["p_holm"] = float(ph)
    for m in chosen:
        tests[m].setdefault("p_holm", math.nan)
    mode = "models" if a.groups is None else inference
    unit = {"within_groups": f"models permuted within {a.groups} strata (nested in the "
                             "population)",
            "cluster": f"{a.groups} groups (wild cluster bootstrap)",
            "models": "models"}[mode]
    return PopulationComparison(
        labels=(str(labels[0]), str(labels[1])), a=a, b=b, markers=chosen, tests=tests,
        settings={"alpha": alpha, "inference": mode, "unit": unit, "n_resamples": B,
                  "seed": seed, "outcome": outcome, "covariates": list(covariates)})

