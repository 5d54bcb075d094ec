"""Report blocks of a diagnosis: ranking table, one sentence per marker, scatter plots.

Everything here turns results of :mod:`.analysis`, :mod:`.granulated`, :mod:`.levels` and
:mod:`.early` into the typed blocks of :mod:`probekit.report.blocks`; it computes nothing new.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from probekit.errors import DataError
from probekit.report.blocks import Block, Column, Scatter, Table

from .analysis import MarkerAnalysis
from .early import EarlyWarning
from .granulated import CMIResult, GranulatedTau
from .levels import UNIT, LevelMeanR2
from .ranking import (
    _partial_scatter,
    _sorted_by_category,
    analysis_blocks,
    early_blocks,
    partial_scatters,
)
from .table import as_marker_table

__all__ = ["analysis_blocks", "diagnosis_blocks", "partial_scatters"]

def _categories(t: Any, color_by: str | None, rows: Sequence[int]) -> tuple[str, ...] | None:
    if color_by is None:
        return None
    t.check_names([color_by], "color_by")
    code, levels = t.codes(color_by, "color_by")
    return tuple(f"{color_by}={_level(levels[code[i]])}" for i in rows)


def _level(v: Any) -> str:
    return f"{v:g}" if isinstance(v, float) else str(v)


def _scatters(analysis: MarkerAnalysis, t: Any, color_by: str | None) -> list[Block]:
    y_all = t.numeric(analysis.outcome, "outcome")
    out: list[Block] = []
    code = t.codes(color_by, "color_by")[0] if color_by else None
    for s in analysis.markers:
        if not s.applicable:
            continue
        rows = list(s.rows)
        m = t.numeric(s.marker, "marker", allow_missing=True)
        cats = _categories(t, color_by, rows)
        order = sorted(range(len(rows)), key=lambda i: code[rows[i]]) if code is not None else None
        x, y, c = _sorted_by_category([float(m[i]) for i in rows], [float(y_all[i]) for i in rows],
                                      cats, order)
        out.append(Scatter(
            title=f"{s.marker} vs {analysis.outcome} (Spearman {s.spearman:+.2f}, n = {s.n})",
            x=x, y=y, xlabel=s.marker, ylabel=analysis.outcome, categories=c,
            color_label=color_by or ""))
        if analysis.covariates and s.marker_residuals:
            out.append(_partial_scatter(analysis, s, cats, order, color_by))
    return out


def _levels_table(levels: Sequence[LevelMeanR2]) -> Table:
    rows = tuple(
        {"marker": r["marker"], "knob": r["knob"], "degree": r["degree"],
         "n_levels": r["n_levels"], "r2_levels": r["r2_level_means"],
         "r2_models": r["r2_models"], "n": r["n_models"], "reason": r["reason"]}
        for lv in levels for r in lv.to_records()
    )
    return Table(
        title=UNIT,
        columns=(Column(key="marker", header="marker", fmt="", align="left"),
                 Column(key="knob", header="knob", fmt="", align="left"),
                 Column(key="degree", header="poly degree", fmt="d"),
                 Column(key="n_levels", header="levels", fmt="d"),
                 Column(key="r2_levels", header="R^2 over level means"),
                 Column(key="r2_models", header="R^2 over models"),
                 Column(key="n", header="models", fmt="d"),
                 Column(key="reason", header="note", fmt="", align="left")),
        rows=rows,
        caption="An & Du's unit: outcome and marker averaged over seeds at each level of the knob, "
        "polynomial fit of the means. Shown beside the per-model R^2 of the same fit; averaging "
        "removes the within-level spread, so level means overstate what a marker says about one "
        "model. The ranking above (per model, given the covariates) is the primary result.",
    )


def _granulated_tables(items: Sequence[GranulatedTau | CMIResult]) -> list[Block]:
    out: list[Block] = []
    taus = [g for g in items if isinstance(g, GranulatedTau)]
    if taus:
        out.append(Table(
            title="Granulated Kendall tau (Jiang et al. 2020)",
            columns=(Column(key="marker", header="marker", fmt="", align="left"),
                     Column(key="knob", header="knob", fmt="", align="left"),
                     Column(key="tau", header="tau", fmt="+.3f"),
                     Column(key="n_groups", header="groups", fmt="d"),
                     Column(key="reason", header="note", fmt="", align="left")),
            rows=tuple(r for g in taus for r in g.to_records()),
            caption="tau of (marker, outcome) within each group of models that differ only in "
            "the knob, averaged over groups; '(all: psi)' is the mean over knobs (their Psi). "
            "Defined on a full grid of the knobs only.",
        ))
    cmis = [g for g in items if isinstance(g, CMIResult)]
    if cmis:
        out.append(Table(
            title="Conditional mutual information (Jiang et al. 2020)",
            columns=(Column(key="marker", header="marker", fmt="", align="left"),
                     Column(key="score", header="min normalised CMI"),
                     Column(key="argmin", header="attained given", fmt="", align="left"),
                     Column(key="unconditional", header="given nothing"),
                     Column(key="n_pairs", header="pairs", fmt="d"),
                     Column(key="reason", header="note", fmt="", align="left")),
            rows=tuple({"marker": c.marker, "score": c.score,
                        "argmin": ", ".join(c.argmin) or "(none)",
                        "unconditional": c.sets.get((), math.nan), "n_pairs": c.n_pairs,
                        "reason": c.reason} for c in cmis),
            caption="I(V_m; V_y | U_S) / H(V_y | U_S) over ordered pairs of models that differ "
            "in one knob (V = sign of the difference), minimised over conditioning sets S of "
            "knobs; 0: the marker's order says nothing about the outcome's once S is known.",
        ))
    return out


def diagnosis_blocks(
    analysis: MarkerAnalysis,
    table: Any,
    *,
    color_by: str | None = None,
    levels: LevelMeanR2 | Sequence[LevelMeanR2] | None = None,
    granulated: GranulatedTau | CMIResult | Sequence[GranulatedTau | CMIResult] | None = None,
    early: EarlyWarning | None = None,
) -> tuple[Block, ...]:
    """The report blocks of a diagnosis, in reading order.

    Warnings; the ranking table (one row per marker, sorted by |partial r|, verdict column);
    one sentence per marker; the level-mean table labelled "level means (An & Du's unit)",
    beside the per-model numbers; for each applicable marker a scatter against the outcome and a
    partial-residual scatter (residual marker vs residual outcome given the covariates), both
    coloured by ``color_by`` (e.g. the main design knob); the granulated-tau and CMI tables; the early-warning curves
    (partial r and delta R^2 per step, one series per marker).

    Args:
        analysis: the :func:`marker_analysis` result.
        table: the table it was computed on (for the scatter plots).
        color_by: a column to colour points by (None: one colour).
        levels: :func:`level_mean_r2` result(s).
        granulated: :func:`granulated_kendall_tau` / :func:`conditional_mutual_information`
            result(s).
        early: an :func:`early_warning` result.
    """
    t = as_marker_table(table)
    if t.n_rows != analysis.n_models:
        raise DataError(f"the table has {t.n_rows} rows but the analysis was made on "
                        f"{analysis.n_models}; pass the table given to marker_analysis")
    blocks = list(analysis_blocks(analysis))
    if levels is not None:  # beside the per-model numbers, before the plots
        blocks.append(_levels_table([levels] if isinstance(levels, LevelMeanR2) else list(levels)))
    blocks.extend(_scatters(analysis, t, color_by))
    if granulated is not None:
        items = [granulated] if isinstance(granulated, (GranulatedTau, CMIResult)) else granulated
        blocks.extend(_granulated_tables(list(items)))
    if early is not None:
        blocks.extend(early_blocks(early))
    return tuple(blocks)

