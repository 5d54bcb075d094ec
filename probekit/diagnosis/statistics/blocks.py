"""Report blocks of a diagnosis: ranking table, one sentence per marker, scatter plots.

Everything here turns results of :mod:`.analysis`, :mod:`.granulated`, :mod:`.levels` and
:mod:`.early` into the typed blocks of :mod:`probekit.report.blocks`; it computes nothing new.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from probekit.errors import DataError
from probekit.report.blocks import Block, Fold, Scatter

from .analysis import MarkerAnalysis
from .degenerate import degenerate_outcome
from .early import EarlyWarning
from .granulated import CMIResult, GranulatedTau, granulated_tables
from .levels import LevelMeanR2, levels_table
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


def _reordered(values: Sequence[Any] | None, order: list[int] | None) -> tuple | None:
    if values is None:
        return None
    return tuple(values) if order is None else tuple(values[i] for i in order)


def _scatters(analysis: MarkerAnalysis, t: Any, color_by: str | None,
              shape_by: str | None = None, labels: Sequence[str] | None = None,
              marker_cis: dict[str, Sequence[Any]] | None = None,
              censored: Sequence[bool] | None = None) -> dict[str, list[Block]]:
    """Marker -> its scatter against the outcome and its partial-residual scatter."""
    y_all = t.numeric(analysis.outcome, "outcome")
    out: dict[str, list[Block]] = {}
    code = t.codes(color_by, "color_by")[0] if color_by else None
    for s in analysis.markers:
        if not s.applicable:
            continue
        rows = list(s.rows)
        m = t.numeric(s.marker, "marker", allow_missing=True)
        cats = _categories(t, color_by, rows)
        shapes = _categories(t, shape_by, rows)
        names = None if labels is None else [str(labels[i]) for i in rows]
        cis = (marker_cis or {}).get(s.marker)
        low = high = None
        if cis is not None:
            pairs = [cis[i] if cis[i] is not None else (None, None) for i in rows]
            low, high = [p[0] for p in pairs], [p[1] for p in pairs]
        order = sorted(range(len(rows)), key=lambda i: code[rows[i]]) if code is not None else None
        x, y, c = _sorted_by_category([float(m[i]) for i in rows], [float(y_all[i]) for i in rows],
                                      cats, order)
        cens = None if censored is None else [bool(censored[i]) for i in rows]
        extra = {"shapes": _reordered(shapes, order), "shape_label": shape_by or "",
                 "labels": _reordered(names, order), "censored": _reordered(cens, order)}
        mine = out.setdefault(s.marker, [])
        mine.append(Scatter(
            title=f"{s.marker} vs {analysis.outcome} (Spearman {s.spearman:+.2f}, n = {s.n})",
            x=x, y=y, xlabel=s.marker, ylabel=analysis.outcome, categories=c,
            color_label=color_by or "", x_low=_reordered(low, order),
            x_high=_reordered(high, order), **extra))
        if analysis.covariates and s.marker_residuals:
            partial = _partial_scatter(analysis, s, cats, order, color_by)
            shift = None
            if low is not None:  # the CI moved with the point: residual -/+ the CI's half-widths
                raw = [float(m[i]) for i in rows]
                res = list(s.marker_residuals)
                shift = ([None if lo is None else res[k] - (raw[k] - lo) for k, lo in enumerate(low)],
                         [None if hi is None else res[k] + (hi - raw[k]) for k, hi in enumerate(high)])
            mine.append(dataclasses.replace(
                partial, x_low=None if shift is None else _reordered(shift[0], order),
                x_high=None if shift is None else _reordered(shift[1], order), **extra))
    return out


def diagnosis_blocks(
    analysis: MarkerAnalysis,
    table: Any,
    *,
    color_by: str | None = None,
    levels: LevelMeanR2 | Sequence[LevelMeanR2] | None = None,
    granulated: GranulatedTau | CMIResult | Sequence[GranulatedTau | CMIResult] | None = None,
    early: EarlyWarning | None = None,
    shape_by: str | None = None,
    labels: Sequence[str] | None = None,
    marker_cis: dict[str, Sequence[Any]] | None = None,
    censored: Sequence[bool] | None = None,
) -> tuple[Block, ...]:
    """The report blocks of a diagnosis, in reading order.

    Warnings (a degenerate outcome, :func:`.degenerate.degenerate_outcome`: no verdicts); the
    ranking table (one row per marker, sorted by |partial r|, verdict column);
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
        shape_by: a column drawn as the points' marker shape (e.g. the seed).
        labels: a name per row of ``table`` (the checkpoint): the hover text of each point.
        marker_cis: marker -> per row of ``table`` its own ``(low, high)`` CI (or None): the
            points' horizontal error bars.
        censored: per row of ``table`` whether its outcome is right-censored (a run that never
            crossed): drawn as an open marker with an arrow up.

    The per-marker sentences and scatters fold into ``<details>`` (a layer family's under its
    curve), so that the page opens on the answer and the ranking.
    """
    t = as_marker_table(table)
    if t.n_rows != analysis.n_models:
        raise DataError(f"the table has {t.n_rows} rows but the analysis was made on "
                        f"{analysis.n_models}; pass the table given to marker_analysis")
    flags = [f for s in analysis.markers for f in s.flags]
    degenerate = degenerate_outcome(analysis.outcome, t.numeric(analysis.outcome, "outcome",
                                                                 allow_missing=True),
                                    flags)
    plots = _scatters(analysis, t, color_by, shape_by, labels, marker_cis, censored)
    in_family = {m for ms in analysis.families.values() for m in ms}
    blocks = list(analysis_blocks(analysis, degenerate,
                                  {m: p for m, p in plots.items() if m in in_family}))
    if levels is not None:  # beside the per-model numbers, before the plots
        blocks.append(levels_table([levels] if isinstance(levels, LevelMeanR2) else list(levels)))
    rest = [p for m, ps in plots.items() if m not in in_family for p in ps]
    if rest:
        blocks.append(Fold(title=f"Scatter plots: each marker vs {analysis.outcome}"
                           + (" and its partial residuals" if analysis.covariates else "")
                           + f" ({len(rest)}, hover a point for its run)", blocks=tuple(rest),
                           anchor="scatters"))
    if granulated is not None:
        items = [granulated] if isinstance(granulated, (GranulatedTau, CMIResult)) else granulated
        blocks.extend(granulated_tables(list(items)))
    if early is not None:
        blocks.extend(early_blocks(early))
    return tuple(blocks)

