"""The answer a diagnosis report opens with: one line per marker and a forest plot.

Built from the ``report.json`` dict alone (``diagnosis.analysis``, ``diagnosis.settings`` and
``table``), so a saved report gains it when re-rendered, like the Population section:

* one line per marker in ranking order (|partial r|, as the ranking table): its verdict, the
  partial r with its CI, the Holm-adjusted p (:func:`probekit.report.numbers.format_p`) and
  the minimal detectable effect (the record's ``mde_partial_r``);
* a forest plot of the same: each marker's partial r and CI coloured by its verdict, the
  equivalence band ``+-margin`` over every row and each marker's MDE shaded on its row;
* a degenerate outcome (:func:`.statistics.degenerate.degenerate_outcome`): a warning and no verdicts;
* a layer family (``NAME@L<k>`` columns) is one line and one row: its best layer
  (:func:`collapse_families`).
"""

from __future__ import annotations

import math
from typing import Any

from probekit.report.blocks import Block, Bullets, Forest, Text
from probekit.report.numbers import format_p, p_floor

from .population_section import analysed_rows
from .statistics.degenerate import degenerate_outcome
from .statistics.families import family_name, member_label
from .statistics.verdicts import VERDICT_COLORS

__all__ = ["VERDICT_COLORS", "answer_blocks", "answer_line", "collapse_families", "rank_key",
           "with_report_sections"]

_NO_VERDICT = "no verdict"

#: a design whose smallest MDE (|partial r|) is at least this is called out under the title
WEAK_DESIGN_MDE = 0.8


def _num(v: Any) -> float:
    return float(v) if isinstance(v, (int, float)) and math.isfinite(float(v)) else math.nan


def rank_key(m: dict[str, Any]) -> tuple[int, float]:
    """The ranking table's order: applicable first, then by |partial r| (else |r|)."""
    r = _num(m.get("partial_r"))
    r = r if math.isfinite(r) else _num(m.get("pearson"))
    return (0 if m.get("verdict") != "not_applicable" else 1,
            -abs(r) if math.isfinite(r) else 0.0)


def _r(v: float) -> str:
    text = f"{v:+.2f}"
    return text[1:] if float(text) == 0 else text


def collapse_families(markers: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The marker records with each layer family (``NAME@L<k>``, :mod:`.statistics.families`) as one row.

    The row is the family's best layer (smallest partial p, ties: larger |partial r|), named
    ``"NAME (best L2 of 4)"``; its Holm p is that layer's, which has the selection among the
    layers in it (the weighted step-down of :func:`.statistics.families.weighted_holm`). A family whose
    layers none was tested keeps its first layer. Markers outside a family pass unchanged.
    """
    groups: dict[str, list[dict[str, Any]]] = {}
    for m in markers:
        f = family_name(str(m["marker"]))
        if f is not None:
            groups.setdefault(f, []).append(m)
    out, done = [], set()
    for m in markers:
        f = family_name(str(m["marker"]))
        if f is None or len(groups[f]) < 2:
            out.append(m)
            continue
        if f in done:
            continue
        done.add(f)
        tested = [x for x in groups[f] if math.isfinite(_num(x.get("partial_p")))]
        best = (min(tested, key=lambda x: (_num(x.get("partial_p")), -abs(_num(x.get("partial_r")))))
                if tested else groups[f][0])
        out.append({**best, "marker": f"{f} (best {member_label(str(best['marker']))} of "
                                      f"{len(groups[f])})"})
    return out


def answer_line(m: dict[str, Any], verdict: str, floor: float | None) -> str:
    """``"he: adds_beyond_covariates, partial r -0.52 [-0.66, -0.35], Holm p < 0.001, MDE 0.31"``."""
    if m.get("verdict") == "not_applicable":
        return f"{m['marker']}: not_applicable ({m.get('reason') or 'see the ranking'})"
    r, lo, hi = (_num(m.get(k)) for k in ("partial_r", "partial_low", "partial_high"))
    parts = [f"{m['marker']}: {verdict}"]
    if math.isfinite(r):
        ci = f" [{_r(lo)}, {_r(hi)}]" if math.isfinite(lo) and math.isfinite(hi) else ""
        parts.append(f"partial r {_r(r)}{ci}")
    else:
        parts.append("partial r undefined")
    parts.append(f"Holm p {format_p(_num(m.get('partial_p_holm')), floor)}")
    mde = _num(m.get("mde_partial_r"))
    parts.append(f"MDE {mde:.2f}" if math.isfinite(mde) else "MDE not computed")
    return ", ".join(parts)


def answer_blocks(report: dict[str, Any]) -> list[Block]:
    """The answer's blocks of a ``report.json``-shaped diagnosis dict (empty without analysis)."""
    analysis = (report.get("diagnosis") or {}).get("analysis") or {}
    markers = sorted(collapse_families(list(analysis.get("markers") or [])), key=rank_key)
    if not markers:
        return []
    settings = analysis.get("settings") or {}
    outcome = analysis.get("outcome") or report["diagnosis"]["settings"]["outcome"]
    covs = list(analysis.get("covariates") or [])
    margin = float(settings.get("equivalence_margin", 0.2))
    level = f"{float(settings.get('confidence_level', 0.95)):.0%}"
    table = report.get("table") or {}
    rows = analysed_rows(table)
    values = [table[outcome][i] for i in rows] if outcome in table else []
    degenerate = degenerate_outcome(outcome, values, [f for m in markers
                                                      for f in m.get("flags") or []])
    verdicts = [_NO_VERDICT if degenerate and m.get("verdict") != "not_applicable"
                else str(m.get("verdict")) for m in markers]
    colors = dict(VERDICT_COLORS)
    floors = [p_floor(m.get("n_permutations_used") or settings.get("n_permutations"))
              for m in markers]
    given = f" given {', '.join(covs)}" if covs else ""
    unit = settings.get("unit") or "models"
    blocks: list[Block] = []
    if degenerate:
        blocks.append(Text(text=f"{degenerate} No marker gets a verdict; the estimates below "
                           "are for the record.", level="warning"))
    mdes = [x for x in (_num(m.get("mde_partial_r")) for m in markers) if math.isfinite(x)]
    if mdes and min(mdes) >= WEAK_DESIGN_MDE:
        blocks.append(Text(text=f"this design detects only |partial r| >= {min(mdes):.2f} with "
                           "80% power: a marker without a verdict here is not shown to be "
                           "unrelated to the outcome.", level="warning"))
    blocks.append(Text(text=f"Which markers predict {outcome}{given}? Ranked by |partial r|, "
                       f"with its {level} CI, the Holm-adjusted p over {len(markers)} markers "
                       f"({unit}) and the MDE (the |partial r| this design detects with 80% "
                       "power)."))
    blocks.append(Bullets(items=tuple(answer_line(m, v, f)
                                      for m, v, f in zip(markers, verdicts, floors)),
                          colors=tuple(colors.get(v) for v in verdicts), anchor="answer-lines"))
    shade = tuple(_finite_or_none(m.get("mde_partial_r")) for m in markers)
    blocks.append(Forest(
        title=f"partial r with {outcome}{given}",
        labels=tuple(str(m["marker"]) for m in markers),
        values=tuple(_finite_or_none(m.get("partial_r")) for m in markers),
        low=tuple(_finite_or_none(m.get("partial_low")) for m in markers),
        high=tuple(_finite_or_none(m.get("partial_high")) for m in markers),
        categories=tuple(verdicts), colors=VERDICT_COLORS,
        hover=tuple(f"Holm p {format_p(_num(m.get('partial_p_holm')), f)}; n = {m.get('n')}; "
                    f"MDE {_num(m.get('mde_partial_r')):.2f}" for m, f in zip(markers, floors)),
        band=margin, band_label=f"equivalence +-{margin:g}",
        shade=shade if any(v is not None for v in shade) else None,
        shade_label="|r| below the MDE (80% power)",
        xlabel=f"partial r ({level} CI)", anchor="forest"))
    return blocks


def _finite_or_none(v: Any) -> float | None:
    x = _num(v)
    return x if math.isfinite(x) else None


def with_report_sections(report: dict[str, Any]) -> dict[str, Any]:
    """``report`` with its answer and Population sections first among ``analyses``.

    Each is (re)built from the dict (:func:`answer_blocks`,
    :func:`.population_section.with_population_section`); a report without an analysis gets
    no answer section.
    """
    from probekit.report.blocks import blocks_to_dicts

    from .population_section import with_population_section

    report = with_population_section(report)
    rest = [a for a in report["analyses"] if a.get("section") != "answer"]
    blocks = answer_blocks(report)
    if not blocks:
        return {**report, "analyses": rest}
    section = {"section": "answer", "title": "Answer", "data": {}, "warnings": [],
               "hypotheses": [], "blocks": blocks_to_dicts(blocks)}
    return {**report, "analyses": [section, *rest]}
