"""Jiang et al. (ICLR 2020)'s granulated Kendall tau and conditional-mutual-information test.

Jiang, Neyshabur, Mobahi, Krishnan, Bengio, "Fantastic Generalization Measures and Where to Find
Them", ICLR 2020, sections 4-5 (guide: ``docs/diagnosis.md``); the CMI score is also PGDL's
(NeurIPS 2020) ranking metric. Both ask whether a marker ``m`` tracks the outcome ``y`` when the
design knobs that drive both are held fixed.

Our reading of the details the paper leaves to the population:

- **Kendall's tau** is Jiang et al.'s pairwise definition,
  ``tau = sum_{i<j} sign(m_i - m_j) sign(y_i - y_j) / C(n, 2)`` (tau-a): a tie counts 0, so a
  marker constant within a group has tau 0 there (tau-b would be undefined). Without ties it
  equals ``scipy.stats.kendalltau``.
- **Granulated tau** of knob ``i``: models are grouped by their values of every *other* knob;
  ``psi_i`` is the mean tau over those groups. Seeds (or any column not among ``knobs``) are not
  knobs: replicates of a design cell fall in the same group. Defined only where the population
  is a full grid (every combination of the knobs' levels has at least one model, every knob
  has >= 2 levels); otherwise the result is not applicable, with the reason. ``psi`` = the mean
  of ``psi_i`` over knobs (their Psi).
- **CMI**: the sample space is the ordered pairs of models ``(a, b)`` that differ in exactly one
  knob (any other columns, e.g. seeds, may differ). ``V_m = sign(m_a - m_b)``,
  ``V_y = sign(y_a - y_b)`` (in {-1, 0, 1}), ``U_S`` = the values of the knobs in ``S`` of both
  models, ``(theta_a[S], theta_b[S])``. Plug-in estimate of
  ``I(V_m; V_y | U_S) / H(V_y | U_S)`` (the normalisation makes a perfect marker score 1); the
  score is the minimum over conditioning sets ``|S| <= max_set_size`` (the empty set included;
  Jiang et al. use ``|S| <= 2``). A set with ``H(V_y | U_S) = 0`` (the outcome's order is fixed
  by the design) leaves nothing to explain and is skipped, and listed.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from jaxtyping import Float

from probekit.errors import ConfigError, DataError
from probekit.report.blocks import Block, Column, Table
from probekit.report.notebook import NotebookMixin

from .table import MarkerTable, as_marker_table

__all__ = [
    "granulated_tables",
    "CMIResult",
    "GranulatedTau",
    "conditional_mutual_information",
    "granulated_kendall_tau",
    "kendall_tau_a",
]


def kendall_tau_a(m: Float[np.ndarray, " n"], y: Float[np.ndarray, " n"]) -> float:
    """Jiang et al.'s tau: mean of ``sign(dm) sign(dy)`` over all pairs (ties count 0)."""
    if m.size < 2:
        raise DataError(f"Kendall's tau needs >= 2 models, got {m.size}")
    i, j = np.triu_indices(m.size, k=1)
    return float(np.mean(np.sign(m[i] - m[j]) * np.sign(y[i] - y[j])))


def _prepare(
    table: Any, outcome: str, marker: str, knobs: Sequence[str]
) -> tuple[MarkerTable, np.ndarray, np.ndarray, np.ndarray, int]:
    """Rows with a marker value: (table, m, y, knob codes (n, k), dropped rows)."""
    t = as_marker_table(table)
    knobs = tuple(knobs)
    if not knobs:
        raise ConfigError("knobs is empty; name the design knob columns (e.g. ['noise', 'depth'])")
    t.check_names([outcome], "outcome")
    t.check_names([marker], "marker")
    t.check_names(knobs, "knob")
    if len(set(knobs)) != len(knobs) or {outcome, marker} & set(knobs):
        raise ConfigError(f"knobs {list(knobs)} repeat a column or include the outcome / marker")
    y = t.numeric(outcome, "outcome")
    m = t.numeric(marker, "marker", allow_missing=True)
    codes = np.column_stack([t.codes(k, "knob")[0] for k in knobs])
    keep = ~np.isnan(m)
    return t, m[keep], y[keep], codes[keep], int((~keep).sum())


@dataclass(frozen=True, kw_only=True, repr=False)
class GranulatedTau(NotebookMixin):
    """Granulated Kendall tau of one marker (Jiang et al. 2020, eq. of psi_i and Psi).

    Attributes:
        marker, outcome, knobs: the columns.
        applicable: False when the population is not a full grid (``reason`` says why).
        reason: "" or why not applicable.
        tau: Kendall tau (tau-a) over all models with a marker value.
        per_knob: knob -> psi_i (mean tau over the groups that differ only in that knob).
        n_groups: knob -> number of such groups.
        psi: mean of ``per_knob`` (Jiang et al.'s Psi).
        n, n_missing: models used and rows dropped for a missing marker cell.
    """

    marker: str
    outcome: str
    knobs: tuple[str, ...]
    applicable: bool
    reason: str
    tau: float
    per_knob: dict[str, float]
    n_groups: dict[str, int]
    psi: float
    n: int
    n_missing: int

    def to_records(self) -> list[dict[str, Any]]:
        """One row per knob plus ``knob="(all: psi)"`` (NaN where not applicable)."""
        rows = [{"marker": self.marker, "knob": k, "tau": self.per_knob.get(k, math.nan),
                 "n_groups": self.n_groups.get(k, 0), "reason": self.reason} for k in self.knobs]
        rows.append({"marker": self.marker, "knob": "(all: psi)", "tau": self.psi,
                     "n_groups": sum(self.n_groups.values()), "reason": self.reason})
        return rows

    def _blocks(self) -> tuple[Block, ...]:
        return tuple(granulated_tables([self]))

    def _summary(self) -> str:
        if not self.applicable:
            return f"{self.marker} -> {self.outcome}: not applicable ({self.reason})"
        return (f"{self.marker} -> {self.outcome}, {self.n} models: tau {self.tau:+.3f}, "
                f"psi {self.psi:+.3f} over {', '.join(self.knobs)}")


def granulated_kendall_tau(
    table: Mapping[str, Sequence[Any]] | Any, outcome: str, marker: str, knobs: Sequence[str]
) -> GranulatedTau:
    """Jiang et al.'s granulated Kendall tau of ``marker`` vs ``outcome`` per design knob.

    See the module docstring for the definitions and our reading of them. Rows whose marker is
    missing are dropped first (which may break the grid: then not applicable).
    """
    t, m, y, codes, dropped = _prepare(table, outcome, marker, knobs)
    knobs = tuple(knobs)
    n = m.size
    tau = kendall_tau_a(m, y) if n >= 2 else math.nan
    base = {"marker": marker, "outcome": outcome, "knobs": knobs, "tau": tau, "n": n,
            "n_missing": dropped}
    levels = [np.unique(t.codes(k, "knob")[0]) for k in knobs]
    single = [k for k, lv in zip(knobs, levels, strict=True) if lv.size < 2]
    reason = ""
    if single:
        reason = f"knob(s) {', '.join(single)} take a single value: nothing varies"
    else:
        present = {tuple(r) for r in codes.tolist()}
        total = math.prod(lv.size for lv in levels)
        if len(present) < total:
            absent = next(c for c in itertools.product(*[lv.tolist() for lv in levels])
                          if c not in present)
            cell = ", ".join(f"{k}={t.codes(k, 'knob')[1][c]!r}"
                             for k, c in zip(knobs, absent, strict=True))
            reason = (f"not a full grid: {total - len(present)} of {total} knob combinations "
                      f"have no model with a {marker} value (e.g. {cell})")
    if reason:
        return GranulatedTau(**base, applicable=False, reason=reason, per_knob={}, n_groups={},
                             psi=math.nan)
    per_knob, n_groups = {}, {}
    for i, k in enumerate(knobs):
        others = np.delete(codes, i, axis=1)
        _, group = np.unique(others, axis=0, return_inverse=True)
        group = group.reshape(-1)
        taus = [kendall_tau_a(m[group == g], y[group == g]) for g in range(int(group.max()) + 1)]
        per_knob[k], n_groups[k] = float(np.mean(taus)), len(taus)
    return GranulatedTau(**base, applicable=True, reason="", per_knob=per_knob,
                         n_groups=n_groups, psi=float(np.mean(list(per_knob.values()))))


@dataclass(frozen=True, kw_only=True, repr=False)
class CMIResult(NotebookMixin):
    """Jiang et al.'s conditional-mutual-information score of one marker.

    Attributes:
        marker, outcome, knobs, max_set_size: the inputs.
        sets: conditioning set -> normalised CMI ``I(V_m; V_y | U_S) / H(V_y | U_S)``.
        cmi, entropy: conditioning set -> ``I`` and ``H(V_y | U_S)`` (nats).
        skipped: sets with ``H(V_y | U_S) = 0`` (nothing left to explain).
        score: the minimum normalised CMI over ``sets`` (NaN only when ``applicable`` is False).
        argmin: the conditioning set that attains it.
        n_pairs: ordered model pairs that differ in exactly one knob.
        applicable, reason: False and why, when no set is defined (no pair, or all skipped).
    """

    marker: str
    outcome: str
    knobs: tuple[str, ...]
    max_set_size: int
    sets: dict[tuple[str, ...], float]
    cmi: dict[tuple[str, ...], float]
    entropy: dict[tuple[str, ...], float]
    skipped: tuple[tuple[str, ...], ...]
    score: float
    argmin: tuple[str, ...]
    n_pairs: int
    applicable: bool
    reason: str

    def to_records(self) -> list[dict[str, Any]]:
        """One row per conditioning set (``set`` joined by ``+``, ``"(none)"`` for the empty)."""
        return [{"marker": self.marker, "set": "+".join(s) or "(none)", "cmi": self.cmi[s],
                 "entropy": self.entropy[s], "normalised": v} for s, v in self.sets.items()]

    def _blocks(self) -> tuple[Block, ...]:
        per_set = Table(
            title=f"{self.marker}: CMI per conditioning set",
            columns=(Column(key="set", header="given", fmt="", align="left"),
                     Column(key="cmi", header="I(V_m; V_y | U_S) (nats)"),
                     Column(key="entropy", header="H(V_y | U_S) (nats)"),
                     Column(key="normalised", header="normalised CMI")),
            rows=tuple(self.to_records()),
            caption="Every conditioning set scored; the score above is the smallest normalised "
            "CMI. Sets with H(V_y | U_S) = 0 are skipped.",
        )
        return (*granulated_tables([self]), per_set)

    def _summary(self) -> str:
        if not self.applicable:
            return f"{self.marker} -> {self.outcome}: not applicable ({self.reason})"
        return (f"{self.marker} -> {self.outcome}, {self.n_pairs} pairs: min normalised CMI "
                f"{self.score:.3f} given {', '.join(self.argmin) or '(none)'}")


def granulated_tables(items: Sequence[GranulatedTau | CMIResult]) -> list[Block]:
    """The report's granulated-tau table and CMI table (each only when it has rows)."""
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



def _entropy(counts: np.ndarray) -> float:
    p = counts[counts > 0] / counts.sum()
    return float(-(p * np.log(p)).sum())


def conditional_mutual_information(
    table: Mapping[str, Sequence[Any]] | Any,
    outcome: str,
    marker: str,
    knobs: Sequence[str],
    max_set_size: int = 2,
) -> CMIResult:
    """Jiang et al.'s CMI test: ``min_S I(V_m; V_y | U_S) / H(V_y | U_S)`` over ``|S| <= k``.

    See the module docstring for the sample space of pairs and the sign variables. Low scores
    mean that, once some set of knobs is known, the marker's order of two models says little
    about their outcomes' order.
    """
    if max_set_size < 0:
        raise ConfigError(f"max_set_size must be >= 0, got {max_set_size}")
    _, m, y, codes, _ = _prepare(table, outcome, marker, knobs)
    knobs = tuple(knobs)
    a, b = np.nonzero((codes[:, None, :] != codes[None, :, :]).sum(-1) == 1)
    vm = np.sign(m[a] - m[b]).astype(np.int64) + 1
    vy = np.sign(y[a] - y[b]).astype(np.int64) + 1
    sets: dict[tuple[str, ...], float] = {}
    cmi: dict[tuple[str, ...], float] = {}
    ent: dict[tuple[str, ...], float] = {}
    skipped = []
    for size in range(min(max_set_size, len(knobs)) + 1):
        for S in itertools.combinations(range(len(knobs)), size):
            names = tuple(knobs[i] for i in S)
            if a.size == 0:
                continue
            cols = list(S)
            u_rows = np.column_stack([codes[a][:, cols], codes[b][:, cols]]) if cols else \
                np.zeros((a.size, 1), dtype=np.int64)
            _, u = np.unique(u_rows, axis=0, return_inverse=True)
            u = u.reshape(-1)
            n_u = int(u.max()) + 1
            joint = np.zeros((n_u, 3, 3))
            np.add.at(joint, (u, vm, vy), 1.0)
            info = h = 0.0
            for k in range(n_u):
                jk = joint[k]
                pk = jk.sum() / a.size
                hm, hy = _entropy(jk.sum(1)), _entropy(jk.sum(0))
                info += pk * (hm + hy - _entropy(jk.reshape(-1)))
                h += pk * hy
            cmi[names], ent[names] = max(info, 0.0), h
            if h <= 1e-12:
                skipped.append(names)
            else:
                sets[names] = min(max(info, 0.0) / h, 1.0)
    if not sets:
        reason = ("no two models differ in exactly one knob" if a.size == 0 else
                  "the outcome's order is fixed by the knobs in every conditioning set")
        return CMIResult(marker=marker, outcome=outcome, knobs=knobs, max_set_size=max_set_size,
                         sets={}, cmi=cmi, entropy=ent, skipped=tuple(skipped), score=math.nan,
                         argmin=(), n_pairs=int(a.size), applicable=False, reason=reason)
    argmin = min(sets, key=lambda s: sets[s])
    return CMIResult(marker=marker, outcome=outcome, knobs=knobs, max_set_size=max_set_size,
                     sets=sets, cmi=cmi, entropy=ent, skipped=tuple(skipped), score=sets[argmin],
                     argmin=argmin, n_pairs=int(a.size), applicable=True, reason="")
