"""Report blocks of a diagnosis: ranking table, one sentence per marker, scatter plots, curves.

Everything here turns results of :mod:`.analysis`, :mod:`.granulated`, :mod:`.levels` and
:mod:`.early` into the typed blocks of :mod:`probekit.report.blocks`; it computes nothing new.
For a :class:`MarkerAnalysis` alone (no table): warnings, the ranking table (sorted by
|partial r|, verdict column), one sentence per marker and the partial-residual scatters
(:func:`analysis_blocks`); for an :class:`EarlyWarning`: its curves and sentences
(:func:`early_blocks`). :func:`diagnosis_blocks` adds what needs the table (the scatters of each
marker against the outcome) and puts them all in the report; the results show the same blocks
in a notebook (one renderer). The result modules are imported for annotations only (they import
this one for their display).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from probekit.errors import DataError
from probekit.report.blocks import Block, Column, Fold, LinePlot, Scatter, Series, Table, Text
from probekit.report.numbers import p_floor

from .degenerate import degenerate_outcome
from .granulated import CMIResult, GranulatedTau, granulated_tables
from .levels import LevelMeanR2, levels_table
from .table import as_marker_table

if TYPE_CHECKING:
    from .analysis import MarkerAnalysis
    from .early import EarlyWarning

__all__ = ["analysis_blocks", "diagnosis_blocks", "early_blocks", "flag_marks", "logo_cell",
           "partial_scatters"]

_ADDS = "adds_beyond_covariates"  # verdicts.ADDS (kept: the highlighted rows)

_CAPTION = (
    "Sorted by |partial r|. adds_beyond_covariates: the partial test rejects after Holm and the "
    "leave-one-group-out delta R^2 beats its permutation null (oos p <= alpha); "
    "partial_association: the partial test rejects, no out-of-sample gain shown; "
    "explained_by_covariates: the marginal test rejects and the partial-r CI lies inside "
    "+-{delta:g}; no_association: both CIs inside +-{delta:g}; inconclusive: neither shown (MDE: "
    "the |partial r| this design detects with 80% power); not_applicable: see the note. "
    "p-values and CIs (the CI inverts the same test) from {unit}; a p at its floor (one over the "
    "permutations + 1) reads \"< X\". A LOGO delta R^2 over fewer than {groups} groups or "
    "outside [-1, 1] reads \"unstable\" (its value on hover)."
)


def _rank_key(s: Any) -> tuple[int, float]:
    r = s.partial_r if math.isfinite(s.partial_r) else s.pearson
    return (0 if s.applicable else 1, -abs(r) if math.isfinite(r) else 0.0)


#: footnote marks of the ranking's flags, in order of first appearance
MARKS = ("*", "\u2020", "\u2021", "\u00a7", "\u00b6", "#", "**", "\u2020\u2020", "\u2021\u2021")

#: a leave-one-group-out delta R^2 over fewer groups than this is not printed as a number
MIN_LOGO_GROUPS = 5


def logo_cell(delta_r2: float, n_groups: int) -> float | dict[str, str] | None:
    """A LOGO delta R^2 as the report shows it: the number, or "unstable (G groups)".

    The fold-to-fold variance of a leave-one-group-out R^2 over fewer than
    :data:`MIN_LOGO_GROUPS` groups, or a value outside [-1, 1] (the covariates-only model
    predicts the held-out groups worse than their mean by more than their own variance), makes
    the number meaningless as a size: the cell says so and keeps the value as its hover text.
    """
    if not math.isfinite(delta_r2):
        return None
    if n_groups < MIN_LOGO_GROUPS or not -1.0 <= delta_r2 <= 1.0:
        why = (f"fewer than {MIN_LOGO_GROUPS} groups" if n_groups < MIN_LOGO_GROUPS
               else "outside [-1, 1]")
        return {"text": f"unstable ({n_groups} groups)",
                "hover": f"delta R^2 = {delta_r2:+.3f} (leave-one-group-out over {n_groups} "
                         f"groups; {why}: the folds disagree too much for a size)"}
    return delta_r2


def flag_marks(flag_lists: list[tuple[str, ...]]) -> tuple[list[str], list[tuple[str, str]]]:
    """Per row its footnote marks (``"*\u2020"``) and the legend ``[(mark, flag), ...]``."""
    legend: dict[str, str] = {}
    for flags in flag_lists:
        for f in flags:
            if f not in legend:
                k = len(legend)
                legend[f] = MARKS[k] if k < len(MARKS) else f"[{k + 1}]"
    return (["".join(legend[f] for f in flags) for flags in flag_lists],
            [(m, f) for f, m in legend.items()])


def _collapsed(analysis: MarkerAnalysis, stats: list[Any]) -> tuple[list[Any], dict[str, str]]:
    """``stats`` with each family (:mod:`.families`) as its best layer only; best -> row name."""
    from .families import family_summaries, member_label

    names: dict[str, str] = {}
    drop: set[str] = set()
    for f in family_summaries(analysis):
        if len(f.members) < 2:
            continue
        best = f.best or f.members[0]
        names[best] = f"{f.family} (best {member_label(best)} of {len(f.members)})"
        drop.update(m for m in f.members if m != best)
    return [s for s in stats if s.marker not in drop], names


def _ranking(analysis: MarkerAnalysis, degenerate: str | None = None, *,
             members: list[Any] | None = None, title: str = "") -> Table:
    """The ranking table; a layer family is one row (its best layer), unless ``members`` are given.

    ``members``: the rows of one family's per-layer table (collapsed in the report).
    """
    if members is None:
        stats, names = _collapsed(analysis, sorted(analysis.markers, key=_rank_key))
    else:
        stats, names = members, {}
    marks, legend = flag_marks([tuple(s.flags) for s in stats])
    rows = tuple(
        {"marker": s.marker, "label": f"{names.get(s.marker, s.marker)} {mark}".strip(),
         "verdict": None if degenerate else s.verdict, "spearman": s.spearman,
         "marginal_r": s.marginal_r, "marginal_ci": [s.marginal_low, s.marginal_high],
         "p_holm": s.p_holm, "partial_r": s.partial_r,
         "partial_ci": [s.partial_low, s.partial_high], "partial_p_holm": s.partial_p_holm,
         "delta_r2": logo_cell(s.delta_r2, s.n_groups), "oos_p": s.oos_p,
         "mde": s.mde_partial_r, "n": s.n, "flags": "; ".join(s.flags), "reason": s.reason,
         "p_floor": p_floor(s.n_permutations_used or analysis.settings.get("n_permutations"))}
        for s, mark in zip(stats, marks)
    )
    level = f"{analysis.settings['confidence_level']:.0%}"
    unit = _unit(analysis)
    given = ", ".join(analysis.covariates) or "none"
    within = f" (within {analysis.groups})" if analysis.settings.get("inference") == \
        "within_groups" else ""
    columns = (Column(key="label", header="marker", fmt="", align="left", nowrap=True),
               Column(key="verdict", header="verdict", fmt="", align="left", nowrap=True),
               Column(key="spearman", header="Spearman", fmt="+.3f", group=f"marginal{within}"),
               Column(key="marginal_r", header="r", fmt="+.3f", group=f"marginal{within}"),
               Column(key="marginal_ci", header=f"{level} CI", fmt="ci", nowrap=True,
                      group=f"marginal{within}"),
               Column(key="p_holm", header="Holm p", fmt="p", group=f"marginal{within}"),
               Column(key="partial_r", header="r", fmt="+.3f", group="partial"),
               Column(key="partial_ci", header=f"{level} CI", fmt="ci", nowrap=True,
                      group="partial"),
               Column(key="partial_p_holm", header="Holm p", fmt="p", group="partial"),
               Column(key="delta_r2", header="delta R^2", fmt="+.3f",
                      group="out-of-sample (LOGO)"),
               Column(key="oos_p", header="p", fmt="p", group="out-of-sample (LOGO)"),
               Column(key="mde", header="MDE |r|", fmt=".2f"),
               Column(key="n", header="n", fmt="d"),
               Column(key="reason", header="note", fmt="", align="left"))
    columns = tuple(c for c in columns if any(_filled(r.get(c.key)) for r in rows))
    notes = "; ".join(f"{m} {f}" for m, f in legend)
    caption = _CAPTION.format(unit=unit, delta=analysis.settings.get("equivalence_margin", 0.2),
                              groups=MIN_LOGO_GROUPS)
    if notes:
        caption = f"Flags: {notes}. {caption}"
    if names:
        caption = (f"{caption} A layer family is one row: its best layer (smallest partial p); "
                   "its Holm p is the family's step-down p, the selection among the layers "
                   "included (the per-layer rows fold under the family's curve).")
    if degenerate:
        caption = f"No verdict: {degenerate} {caption}"
    if members is not None:
        return Table(title=title, columns=columns, rows=rows, caption="Flags: " + notes
                     if notes else "", collapsed=True)
    return Table(
        title=f"Markers vs {analysis.outcome} (covariates: {given})", anchor="verdicts",
        columns=columns, rows=rows,
        highlight=tuple(i for i, s in enumerate(stats) if s.verdict == _ADDS and not degenerate),
        caption=caption,
    )


def _filled(v: Any) -> bool:
    """A cell that shows something (not None / NaN / empty text / an all-missing CI)."""
    if v is None or v == "":
        return False
    if isinstance(v, float):
        return math.isfinite(v)
    if isinstance(v, list):
        return any(_filled(x) for x in v)
    return True


def _sorted_by_category(x: list[float], y: list[float], cats: tuple[str, ...] | None,
                        order: list[int] | None) -> tuple[tuple, tuple, tuple | None]:
    if cats is None or order is None:
        return tuple(x), tuple(y), cats
    return (tuple(x[i] for i in order), tuple(y[i] for i in order),
            tuple(cats[i] for i in order))


def _partial_scatter(analysis: MarkerAnalysis, s: Any, cats: tuple[str, ...] | None,
                     order: list[int] | None, color_by: str | None) -> Scatter:
    """Residual marker vs residual outcome given the covariates (needs no table)."""
    given = ", ".join(analysis.covariates)
    x, y, c = _sorted_by_category(list(s.marker_residuals), list(s.outcome_residuals), cats, order)
    return Scatter(
        title=f"{s.marker}: partial residuals given {given} (partial r {s.partial_r:+.2f})",
        x=x, y=y, xlabel=f"{s.marker} | {given}", ylabel=f"{analysis.outcome} | {given}",
        categories=c, color_label=color_by or "")


def partial_scatters(analysis: MarkerAnalysis, *, top: int | None = None) -> tuple[Scatter, ...]:
    """The report's partial-residual scatters from the analysis alone (uncoloured).

    One per applicable marker with residuals, in ranking order (by |partial r|), the first
    ``top`` only when given; empty without covariates (the partial is then the plain r, and
    the marker-vs-outcome scatter needs the table: :func:`diagnosis_blocks`).
    """
    if not analysis.covariates:
        return ()
    stats = [s for s in sorted(analysis.markers, key=_rank_key)
             if s.applicable and s.marker_residuals and math.isfinite(s.partial_r)]
    return tuple(_partial_scatter(analysis, s, None, None, None) for s in stats[:top])


def analysis_blocks(analysis: MarkerAnalysis, degenerate: str | None = None,
                    plots: Mapping[str, Sequence[Block]] | None = None) -> tuple[Block, ...]:
    """Warnings, the ranking table (sorted by |partial r|, verdict column), families, sentences.

    The head of :func:`diagnosis_blocks` and of a :class:`MarkerAnalysis`'s notebook display.
    A layer family is one ranking row plus its curve over layers (:func:`.families.family_blocks`),
    its per-layer rows, sentences and ``plots`` folded under the curve; the sentences of the
    other markers fold into one ``<details>``. ``degenerate``: why the outcome cannot rank the
    models (:func:`.degenerate.degenerate_outcome`): a warning, no verdict column and no
    per-marker verdict sentences.
    """
    from .families import family_blocks

    blocks: list[Block] = [Text(text=w, level="warning") for w in analysis.warnings]
    if degenerate:
        blocks.append(Text(text=f"{degenerate} No marker gets a verdict.", level="warning"))
    blocks.append(_ranking(analysis, degenerate))
    in_family = {m for ms in analysis.families.values() for m in ms}
    if analysis.families:
        per_layer = {f: _ranking(analysis, degenerate, members=[analysis[m] for m in ms],
                                 title=f"{f}: one row per layer")
                     for f, ms in analysis.families.items()}
        blocks.extend(family_blocks(analysis, tables=per_layer, plots=plots or {},
                                    sentences=not degenerate))
    if not degenerate:
        rest = [Text(text=analysis.sentence(s.marker)) for s in analysis.markers
                if s.marker not in in_family]
        if rest:
            blocks.append(Fold(title=f"One sentence per marker: its effects, CIs and p-values "
                               f"({len(rest)})", blocks=tuple(rest), anchor="sentences"))
    return tuple(blocks)


def early_blocks(early: EarlyWarning) -> list[Block]:
    """Early-warning curves (partial r, delta R^2 per step; a series per marker), sentences.

    The report's blocks of an :class:`EarlyWarning` and its notebook display.
    """
    labels = tuple(str(s) for s in early.steps)
    out: list[Block] = []
    # the outcome column of a series row is "final_<outcome>": say "the final <outcome>" once
    outcome = (f"the final {early.outcome[len('final_'):]}" if early.outcome.startswith("final_")
               else early.outcome)
    unit = _unit(early.analyses[0]) if early.analyses else "models"
    for key, name in (("partial_r", "partial r"), ("delta_r2", "delta R^2 (LOGO)")):
        # partial r with its test-inversion CI; delta R^2 has a permutation p, no interval
        band = key == "partial_r"
        series = tuple(
            Series(name=marker,
                   values=tuple(_shown(a[marker], key) for a in early.analyses),
                   low=tuple(_finite(a[marker].partial_low) for a in early.analyses)
                   if band else None,
                   high=tuple(_finite(a[marker].partial_high) for a in early.analyses)
                   if band else None)
            for marker in early.markers
        )
        given = ", ".join(early.covariates) or "nothing"
        note = (" (an unstable LOGO value, over < 5 groups or outside [-1, 1], is not drawn)"
                if key == "delta_r2" else "")
        out.append(LinePlot(title=f"early warning: {name} with {outcome}, given "
                            f"{given} (per step){note}", x_labels=labels, series=series,
                            xlabel=early.step, ylabel=name, hlines=((0.0, "0"),)))
    out.append(Fold(title=f"Early warning: one sentence per marker ({len(early.markers)})",
                    blocks=tuple(Text(text=f"{early.sentence(m)} p-values and CIs at each step "
                                      f"from {unit}.") for m in early.markers)))
    return out


def _shown(s: Any, key: str) -> float | None:
    """A curve's point: the statistic, None where it is not drawn (an unstable LOGO delta R^2)."""
    v = getattr(s, key)
    if key == "delta_r2" and isinstance(logo_cell(v, s.n_groups), dict):
        return None  # unstable (< 5 groups or outside [-1, 1]): said in the ranking, not drawn
    return _finite(v)


def _unit(analysis: MarkerAnalysis) -> str:
    """The resampling unit of an analysis's p-values and CIs, in words."""
    return analysis.settings.get("unit") or (f"groups ({analysis.groups})" if analysis.groups
                                             else "models")


def _finite(v: float) -> float | None:
    return float(v) if math.isfinite(v) else None


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

