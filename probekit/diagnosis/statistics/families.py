r"""Marker families: one marker read at several layers (or sites), tested as one family.

A ``[[marker]]`` with ``layers = [0, 1, 2, 3]`` (or ``"all"``) or ``sites = [...]``
(:mod:`probekit.diagnosis.spec`) expands into one column per layer, named ``NAME@L<k>``
(``NAME@<site>`` for ``sites``); every column whose name holds ``@`` belongs to the family
named by the part before the first ``@``.

**Multiplicity** (the reading of issue 46 item 4: "each copy enlarges the Holm family"). The
layers of a family form one family and the family counts *once* in the across-marker
correction. Exactly: the partial p-values of all analysed markers are adjusted by a
sequentially rejective weighted Bonferroni procedure (Holm 1979; the sequential rejection
principle of Goeman & Solari 2010, Ann. Statist. 38(6)), whose weights, given the set ``R``
of hypotheses rejected so far, are::

    w_i(R) = 1 / (U(R) * |F_i \ R|)

with ``U(R)`` the number of *units* (a family, or a marker outside any family) that still hold
an unrejected hypothesis and ``F_i`` the unit of marker ``i``. The weights sum to 1 and never
decrease as ``R`` grows (the monotonicity condition of Goeman & Solari), so the procedure
controls the family-wise error rate over all markers and all layers. The adjusted p of the
hypothesis rejected at step ``s`` is ``max_{t <= s} min(1, U * |F \ R| * p)`` (an integer
factor times p, so that the special cases are exact):

- no families: ``U = K - s + 1`` and ``|F| = 1``: Holm's adjusted p-values over the markers;
- one family and nothing else: ``U = 1``: Holm within the family's layers;
- the family's best layer (smallest p) is tested first within its family at ``U * |F| * p_min``:
  the family enters the across-marker Holm with the Bonferroni-of-the-minimum family p
  ``|F| p_min``, so the layer the report names as the strongest (where the marker adds most)
  has its selection among the ``|F|`` layers in its p-value.

``partial_p_family`` of each layer is Holm within its family alone (no across-marker
correction): what a reader who asks only "which layers of this marker?" would use.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .analysis import MarkerAnalysis

__all__ = [
    "FAMILY_SEP",
    "FamilySummary",
    "family_blocks",
    "family_name",
    "family_sentence",
    "family_summaries",
    "group_families",
    "layer_of",
    "member_label",
    "member_name",
    "weighted_holm",
]

#: the separator of a family column ``NAME@L<k>`` / ``NAME@<site>``
FAMILY_SEP = "@"
_LAYER = re.compile(r"^L(\d+)$")


def member_name(family: str, layer: int | str) -> str:
    """``probe@L3`` for a layer (an int), ``probe@<site>`` for a site string."""
    return f"{family}{FAMILY_SEP}L{layer}" if isinstance(layer, int) else f"{family}{FAMILY_SEP}{layer}"


def family_name(marker: str) -> str | None:
    """The family of a marker column (the part before the first ``@``); None outside a family."""
    head, sep, _ = marker.partition(FAMILY_SEP)
    return head if sep and head else None


def member_label(marker: str) -> str:
    """The part after the first ``@`` (``L3``, ``resid_post@2``); the name itself otherwise."""
    head, sep, tail = marker.partition(FAMILY_SEP)
    return tail if sep and head else marker


def layer_of(marker: str) -> int | None:
    """The layer of a ``NAME@L<k>`` column, or of a ``NAME@site@k`` column; None otherwise."""
    label = member_label(marker)
    m = _LAYER.match(label)
    if m:
        return int(m.group(1))
    tail = label.rpartition("@")[2]
    return int(tail) if tail.isdigit() and label != marker else None


def group_families(markers: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """Family -> its member columns (input order), from the ``NAME@...`` convention.

    Raises:
        ValueError: a column named like a family (``probe``) and family members
            (``probe@L0``) side by side: the family would be ambiguous.
    """
    out: dict[str, list[str]] = {}
    for m in markers:
        f = family_name(m)
        if f is not None:
            out.setdefault(f, []).append(m)
    clash = sorted(set(out) & set(markers))
    if clash:
        raise ValueError(f"marker {clash[0]!r} and the family columns {out[clash[0]]} share a "
                         f"name; rename the single marker (a family is NAME@L<k> columns)")
    return {f: tuple(ms) for f, ms in out.items()}


def weighted_holm(p: Mapping[str, float], families: Mapping[str, Sequence[str]],
                  alpha: float = 0.05) -> tuple[dict[str, float], dict[str, float]]:
    """Family-aware Holm: adjusted p-values and the threshold that decides each p.

    The procedure of the module docstring over the finite ``p`` (marker -> raw p; input order
    breaks ties). ``families``: family -> members (members without a finite p are ignored; a
    marker in no family is its own unit). Returns ``(adjusted, thresholds)``: the adjusted p of
    each marker and ``alpha * w_i(R)`` at the step it is tested (for the adaptive permutations
    of :func:`probekit.diagnosis.marker_analysis`). Without families this is :func:`holm`
    exactly.
    """
    unit_of = {m: m for m in p}
    for f, members in families.items():
        for m in members:
            if m in unit_of:
                unit_of[m] = f"{FAMILY_SEP}{f}"  # a family key no marker name can equal
    order = {m: i for i, m in enumerate(p)}
    remaining = list(p)
    adjusted: dict[str, float] = {}
    thresholds: dict[str, float] = {}
    prev = 0.0
    while remaining:
        sizes: dict[str, int] = {}
        for m in remaining:
            sizes[unit_of[m]] = sizes.get(unit_of[m], 0) + 1
        n_units = len(sizes)
        factor = {m: n_units * sizes[unit_of[m]] for m in remaining}
        pick = min(remaining, key=lambda m: (factor[m] * p[m], p[m], order[m]))
        prev = max(prev, min(1.0, factor[pick] * p[pick]))
        adjusted[pick] = prev
        thresholds[pick] = alpha / factor[pick]
        remaining.remove(pick)
    return adjusted, thresholds


@dataclass(frozen=True, kw_only=True)
class FamilySummary:
    """One family of a :class:`~probekit.diagnosis.statistics.analysis.MarkerAnalysis`.

    Attributes:
        family: its name; members: its columns in layer order; labels: ``L0``, ...
        best: the member with the smallest partial p (ties: larger |partial r|): where the
            marker adds most; None when no member was tested.
        p_family: the family's p, ``|F| * p_min`` capped at 1 (Holm's first step within the
            family = the best member's ``partial_p_family``).
        p_holm: the family's p after the across-marker correction (the best member's
            ``partial_p_holm``).
        verdict: the best member's verdict.
    """

    family: str
    members: tuple[str, ...]
    labels: tuple[str, ...]
    best: str | None
    p_family: float
    p_holm: float
    verdict: str

    def to_dict(self) -> dict[str, Any]:
        """JSON form."""
        return {"family": self.family, "members": list(self.members), "labels": list(self.labels),
                "best": self.best, "p_family": self.p_family, "p_holm": self.p_holm,
                "verdict": self.verdict}


def _ordered(members: Sequence[str]) -> tuple[str, ...]:
    layers = [layer_of(m) for m in members]
    if all(v is not None for v in layers):
        return tuple(m for _, m in sorted(zip(layers, members, strict=True)))
    return tuple(members)


def family_summaries(analysis: MarkerAnalysis) -> list[FamilySummary]:
    """One :class:`FamilySummary` per family of ``analysis`` (file order)."""
    out = []
    for f, members in analysis.families.items():
        members = _ordered(members)
        stats = [analysis[m] for m in members]
        tested = [s for s in stats if math.isfinite(s.partial_p)]
        best = (min(tested, key=lambda s: (s.partial_p, -abs(s.partial_r))) if tested else None)
        out.append(FamilySummary(
            family=f, members=members, labels=tuple(member_label(m) for m in members),
            best=None if best is None else best.marker,
            p_family=math.nan if best is None else best.partial_p_family,
            p_holm=math.nan if best is None else best.partial_p_holm,
            verdict="not_applicable" if best is None else best.verdict))
    return out


def _fmt(x: float) -> str:
    return "undefined" if not math.isfinite(x) else f"{x:.2g}"


def family_sentence(analysis: MarkerAnalysis, family: str) -> str:
    """One sentence for a family: the layer where it adds most, with the selection in its p.

    E.g. ``"probe (4 layers L0-L3): strongest at L2 (smallest partial p), partial r 0.45
    [0.12, 0.70] (raw p 0.004;
    family p 0.016 = Holm over the 4 layers, the selection among them included; Holm p 0.08
    across markers, the family counted once): partial; per layer: L0 inconclusive, ..."``
    """
    s = next((x for x in family_summaries(analysis) if x.family == family), None)
    if s is None:
        raise KeyError(f"no family {family!r}; families: {list(analysis.families)}")
    span = f"{s.labels[0]}-{s.labels[-1]}" if len(s.labels) > 1 else s.labels[0]
    head = f"{family} ({len(s.members)} layers {span})"
    per = "; per layer: " + ", ".join(f"{lab} {analysis[m].verdict}"
                                      for m, lab in zip(s.members, s.labels, strict=True))
    if s.best is None:
        return f"{head}: no layer could be tested{per}."
    b = analysis[s.best]
    return (f"{head}: strongest at {member_label(s.best)} (smallest partial p), partial r "
            f"{b.partial_r:.2f} [{b.partial_low:.2f}, {b.partial_high:.2f}] (raw p {_fmt(b.partial_p)}; family p "
            f"{_fmt(s.p_family)} = Holm over the {len(s.members)} layers, the selection among "
            f"them included; Holm p {_fmt(s.p_holm)} across markers, the family counted once):"
            f" {s.verdict}{per}.")


def family_blocks(analysis: MarkerAnalysis, *, tables: Mapping[str, Any] | None = None,
                  plots: Mapping[str, Sequence[Any]] | None = None,
                  sentences: bool = True) -> tuple[Any, ...]:
    """Per family: the partial r per layer with its CI band, its sentence, the layers folded.

    A :class:`~probekit.report.blocks.LinePlot` (x = layer, each label ``L2: adds``, hover on
    every layer; the layer where the marker adds most marked), the family's sentence, and a
    :class:`~probekit.report.blocks.Fold` holding ``tables[family]`` (its per-layer rows), the
    per-layer sentences (``sentences``) and ``plots[member]`` of each layer, so that a family
    adds one curve to the page, not one row, sentence and scatter per layer.
    """
    from probekit.report.blocks import Fold, LinePlot, Series, Text

    blocks: list[Any] = []
    for s in family_summaries(analysis):
        stats = [analysis[m] for m in s.members]

        def val(x: float) -> float | None:
            return x if math.isfinite(x) else None

        blocks.append(LinePlot(
            title=f"{s.family}: partial r with {analysis.outcome} per layer",
            x_labels=tuple(f"{lab}: {st.verdict}" for lab, st in zip(s.labels, stats,
                                                                        strict=True)),
            series=(Series(name="partial r", values=tuple(val(st.partial_r) for st in stats),
                           low=tuple(val(st.partial_low) for st in stats),
                           high=tuple(val(st.partial_high) for st in stats)),),
            xlabel="layer", ylabel="partial r (CI)", hlines=((0.0, "0"),),
            marker=None if s.best is None else s.members.index(s.best),
            marker_label="strongest layer (smallest p)", ylim=(-1.0, 1.0)))
        blocks.append(Text(text=family_sentence(analysis, s.family)))
        inner: list[Any] = []
        if tables and s.family in tables:
            inner.append(tables[s.family])
        if sentences:
            inner.extend(Text(text=analysis.sentence(m)) for m in s.members)
        for m in s.members:
            inner.extend((plots or {}).get(m, ()))
        if inner:
            blocks.append(Fold(title=f"{s.family}: each of its {len(s.members)} layers (rows, "
                               "sentences, scatters)", blocks=tuple(inner)))
    return tuple(blocks)
