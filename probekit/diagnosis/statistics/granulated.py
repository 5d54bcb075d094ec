"""Jiang et al. (ICLR 2020)'s granulated Kendall tau and conditional-mutual-information test.

Jiang, Neyshabur, Mobahi, Krishnan, Bengio, "Fantastic Generalization Measures and Where to Find
Them", ICLR 2020, sections 4-5; the CMI score is also PGDL's
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

Every number comes with its uncertainty (vectorised over many permuted markers or bootstrap
weightings of the models at once: :func:`tau_stat`, :func:`cmi_scores`): a
permutation p with its Monte-Carlo SE -- ``psi_i`` permutes the marker within the groups that
hold the other knobs fixed; ``psi``, tau and the CMI score (which pool every knob's groups)
permute it over all models -- and a percentile bootstrap interval whose unit is the design's
groups (seeds) when there are >= 3, else the models within each design cell.

**Permutation nulls (design-respecting).** ``psi_i`` (the tau of knob ``i`` averaged over the
groups of models that share every other knob) is tested by permuting the marker *within those
groups*: exact under "within each such group the marker is exchangeable given the outcome",
whatever the knobs do to the marker or the outcome across groups. ``psi`` (the mean over knobs),
the plain tau and the CMI score pool every knob's groups; the permutations that keep all of
them at once generate every permutation of the models (the grid is connected by one-knob
steps), so their null -- all the per-knob nulls together -- is exchangeability over all models,
and they are tested by permuting the marker over all models. Two-sided for tau and psi
(``|stat|``), one-sided for the CMI score (>= 0). p: ``(1 + #{null at least as extreme}) /
(1 + B)`` (Phipson & Smyth 2010) with its Monte-Carlo SE ``sqrt(p (1 - p) / B)``.

**Bootstrap intervals.** The unit is the design's: the levels of ``groups`` (e.g. seeds) when
there are >= 3 of them, else the models within each full design cell (the cell's replicates,
resampled with replacement; a cell with one model then contributes no resampling variability).
A resample is a weighting ``w`` of the models (how many times each is drawn); a statistic over
pairs weights pair ``(a, b)`` by ``w_a w_b`` (never a model with its own copy, whose tie
would shrink tau towards 0), so a group's tau is ``sum w_a w_b s_ab / sum w_a w_b`` and
the CMI's counts are weighted the same way. Percentile intervals.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from jaxtyping import Float, Int

from probekit.errors import ConfigError, DataError
from probekit.report.blocks import Block, Column, Table
from probekit.report.notebook import NotebookMixin
from probekit.stats.permutation import mc_se, permutation_pvalue

from .table import MarkerTable, as_marker_table

__all__ = [
    "granulated_tables",
    "CMIResult",
    "PairSet",
    "GranulatedTau",
    "conditional_mutual_information",
    "granulated_kendall_tau",
    "kendall_tau_a",
    "cmi_scores",
    "group_weights",
    "pair_set",
    "permute_within",
    "tau_stat",
]

#: most pair-by-replicate cells held at once (chunks of replicates above it)
_CHUNK = 4_000_000


class PairSet:
    """The pairs ``a < b`` of models within the same group, and each pair's group.

    Attributes:
        a, b: model indices of each pair.
        group: each pair's group (0 .. n_groups - 1).
        n_groups: number of groups with at least one pair.
        sy: ``sign(y_a - y_b)`` of each pair.
    """

    def __init__(self, a: np.ndarray, b: np.ndarray, group: np.ndarray, sy: np.ndarray) -> None:
        self.a, self.b, self.group, self.sy = a, b, group, sy
        self.n_groups = int(group.max()) + 1 if group.size else 0


def pair_set(group: Int[np.ndarray, " n"], y: Float[np.ndarray, " n"]) -> PairSet:
    """Every pair ``a < b`` of models in the same level of ``group``."""
    a, b = np.triu_indices(group.size, k=1)
    keep = group[a] == group[b]
    a, b = a[keep], b[keep]
    _, g = np.unique(group[a], return_inverse=True)
    return PairSet(a, b, g.reshape(-1), np.sign(y[a] - y[b]))


def tau_stat(ps: PairSet, M: Float[np.ndarray, "r n"],
             W: Float[np.ndarray, "r n"] | None = None) -> Float[np.ndarray, " r"]:
    """Mean over groups of each group's (weighted) tau-a, for each row of ``M`` (and ``W``).

    A group whose pairs all have weight 0 is left out of the mean (NaN if all are).
    """
    out = np.empty(M.shape[0])
    step = max(1, _CHUNK // max(ps.a.size, 1))
    onehot = np.zeros((ps.a.size, ps.n_groups))
    onehot[np.arange(ps.a.size), ps.group] = 1.0
    for lo in range(0, M.shape[0], step):
        m = M[lo:lo + step]
        s = np.sign(m[:, ps.a] - m[:, ps.b]) * ps.sy
        w = np.ones_like(s) if W is None else W[lo:lo + step][:, ps.a] * W[lo:lo + step][:, ps.b]
        den = w @ onehot
        with np.errstate(invalid="ignore", divide="ignore"):
            tau = (s * w) @ onehot / den
        tau[den == 0] = np.nan
        ok = ~np.isnan(tau)
        out[lo:lo + step] = np.where(ok.any(1), np.nansum(tau, 1) / np.maximum(ok.sum(1), 1),
                                     np.nan)
    return out


def permute_within(group: Int[np.ndarray, " n"], m: Float[np.ndarray, " n"], n: int,
                   rng: np.random.Generator) -> Float[np.ndarray, "r n"]:
    """``n`` copies of ``m``, each permuted within the levels of ``group``."""
    out = np.tile(m, (n, 1))
    for level in np.unique(group):
        idx = np.flatnonzero(group == level)
        out[:, idx] = rng.permuted(out[:, idx], axis=1)
    return out


def group_weights(unit: Int[np.ndarray, " n"], strata: Int[np.ndarray, " n"], n: int,
                  rng: np.random.Generator) -> Float[np.ndarray, "r n"]:
    """Bootstrap weights of the models (rows: resamples).

    Within each level of ``strata`` its ``unit`` levels are drawn with replacement; a model's
    weight is how often its unit was drawn.
    """
    W = np.zeros((n, unit.size))
    for s in np.unique(strata):
        rows = np.flatnonzero(strata == s)
        levels, code = np.unique(unit[rows], return_inverse=True)
        counts = rng.multinomial(levels.size, np.full(levels.size, 1.0 / levels.size), size=n)
        W[:, rows] = counts[:, code.reshape(-1)]
    return W


def _entropy_along(c: np.ndarray, axis: tuple[int, ...] | int) -> np.ndarray:
    """Plug-in entropy (nats) of counts ``c`` summed over ``axis`` (0 for an empty count)."""
    s = c.sum(axis)
    with np.errstate(invalid="ignore", divide="ignore"):
        clogc = np.where(c > 0, c * np.log(np.where(c > 0, c, 1.0)), 0.0).sum(axis)
        return np.where(s > 0, np.log(np.where(s > 0, s, 1.0)) - clogc / np.where(s > 0, s, 1.0),
                        0.0)


def cmi_scores(u_sets: list[np.ndarray], pa: Int[np.ndarray, " p"], pb: Int[np.ndarray, " p"],
               vy: Int[np.ndarray, " p"], M: Float[np.ndarray, "r n"],
               W: Float[np.ndarray, "r n"] | None = None) -> Float[np.ndarray, " r"]:
    """``min_S I(V_m; V_y | U_S) / H(V_y | U_S)`` for each row of ``M`` (and weights ``W``).

    ``u_sets``: per conditioning set, each pair's code of ``U_S`` (0 .. n_u - 1); ``vy`` in
    {0, 1, 2} (sign + 1). Sets with ``H(V_y | U_S) = 0`` are left out of the minimum (NaN if all).
    """
    r = M.shape[0]
    vm = (np.sign(M[:, pa] - M[:, pb]) + 1).astype(np.int64)
    w = np.ones(vm.shape) if W is None else W[:, pa] * W[:, pb]
    best = np.full(r, np.inf)
    rows = np.arange(r)[:, None]
    for u in u_sets:
        n_u = int(u.max()) + 1
        idx = ((rows * n_u + u[None, :]) * 3 + vm) * 3 + vy[None, :]
        J = np.bincount(idx.ravel(), weights=w.ravel(), minlength=r * n_u * 9).reshape(r, n_u, 3, 3)
        N = J.sum((1, 2, 3))
        pk = J.sum((2, 3)) / np.where(N > 0, N, 1.0)[:, None]
        hm, hy = _entropy_along(J.sum(3), 2), _entropy_along(J.sum(2), 2)
        hj = _entropy_along(J.reshape(r, n_u, 9), 2)
        info = np.maximum((pk * (hm + hy - hj)).sum(1), 0.0)
        h = (pk * hy).sum(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            score = np.where(h > 1e-12, np.minimum(info / h, 1.0), np.inf)
        best = np.minimum(best, score)
    return np.where(np.isfinite(best), best, np.nan)


def kendall_tau_a(m: Float[np.ndarray, " n"], y: Float[np.ndarray, " n"]) -> float:
    """Jiang et al.'s tau: mean of ``sign(dm) sign(dy)`` over all pairs (ties count 0)."""
    if m.size < 2:
        raise DataError(f"Kendall's tau needs >= 2 models, got {m.size}")
    i, j = np.triu_indices(m.size, k=1)
    return float(np.mean(np.sign(m[i] - m[j]) * np.sign(y[i] - y[j])))


def _check_inference(n_permutations: int, n_bootstrap: int, confidence_level: float) -> None:
    if n_permutations < 0 or n_bootstrap < 0:
        raise ConfigError(f"n_permutations and n_bootstrap must be >= 0 (0: none), got "
                          f"{n_permutations} and {n_bootstrap}")
    if 0 < n_bootstrap < 1000:
        raise ConfigError(f"n_bootstrap={n_bootstrap} is below the 1000 the percentile intervals "
                          "need; pass n_bootstrap >= 1000 (or 0: no interval)")
    from probekit.stats.bootstrap import check_n_resamples
    from probekit.stats.permutation import check_n_permutations

    check_n_permutations(n_permutations, minimum=0)  # 0: no p
    if n_bootstrap:
        check_n_resamples(n_bootstrap, name="n_bootstrap")
    if not 0.0 < confidence_level < 1.0:
        raise ConfigError(f"confidence_level must be in (0, 1), got {confidence_level}")


def _two_sided(observed: float, null: np.ndarray, n_permutations: int) -> tuple[float, float]:
    """Permutation p of ``|observed|`` against ``|null|`` (ties within 1e-12 count) and its MC SE."""
    if not n_permutations or not math.isfinite(observed):
        return math.nan, math.nan
    p = permutation_pvalue(abs(observed) - 1e-12, np.abs(null), "greater")
    return p, mc_se(p, n_permutations)


def _interval(boot: np.ndarray, confidence_level: float) -> tuple[float, float]:
    boot = boot[np.isfinite(boot)]
    if boot.size == 0:
        return math.nan, math.nan
    q = 100 * (1 - confidence_level) / 2
    return float(np.percentile(boot, q)), float(np.percentile(boot, 100 - q))


def _weights(t: MarkerTable, groups: str | None, knobs: Sequence[str], keep: np.ndarray,
             codes: np.ndarray, n_bootstrap: int, rng: np.random.Generator
             ) -> tuple[np.ndarray | None, str]:
    """Bootstrap weights (rows: resamples) and the name of their unit."""
    if not n_bootstrap:
        return None, ""
    if groups is not None and groups not in knobs:
        g = t.codes(groups, "groups")[0][keep]
        k = int(np.unique(g).size)
        if k >= 3:
            return group_weights(g, np.zeros_like(g), n_bootstrap, rng), f"{groups} ({k} groups)"
    _, cell = np.unique(codes, axis=0, return_inverse=True)
    return (group_weights(np.arange(codes.shape[0]), cell.reshape(-1), n_bootstrap, rng),
            "models within design cells")


def _prepare(
    table: Any, outcome: str, marker: str, knobs: Sequence[str]
) -> tuple[MarkerTable, np.ndarray, np.ndarray, np.ndarray, int, np.ndarray]:
    """Rows with a marker value: (table, m, y, knob codes (n, k), dropped rows, kept mask)."""
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
    return t, m[keep], y[keep], codes[keep], int((~keep).sum()), keep


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
        tau_p, psi_p, per_knob_p: two-sided permutation p of each (``per_knob_p``: the marker
            permuted within that knob's groups; tau and psi: over all models); ``*_p_mcse``:
            their Monte-Carlo SE.
        tau_ci, psi_ci, per_knob_ci: percentile bootstrap intervals over ``unit``.
        n_permutations, n_bootstrap, confidence_level: the settings (0: not computed, NaN).
        unit: the bootstrap's resampling unit.
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
    tau_p: float = math.nan
    tau_p_mcse: float = math.nan
    tau_ci: tuple[float, float] = (math.nan, math.nan)
    per_knob_p: dict[str, float] = field(default_factory=dict)
    per_knob_p_mcse: dict[str, float] = field(default_factory=dict)
    per_knob_ci: dict[str, tuple[float, float]] = field(default_factory=dict)
    psi_p: float = math.nan
    psi_p_mcse: float = math.nan
    psi_ci: tuple[float, float] = (math.nan, math.nan)
    n_permutations: int = 0
    n_bootstrap: int = 0
    confidence_level: float = 0.95
    unit: str = ""

    def to_records(self) -> list[dict[str, Any]]:
        """One row per knob plus ``knob="(all: psi)"`` (NaN where not applicable).

        Keys: marker, knob, tau, low, high (its interval), p, p_mcse, n_groups, unit, reason.
        """
        nan2 = (math.nan, math.nan)
        rows = [{"marker": self.marker, "knob": k, "tau": self.per_knob.get(k, math.nan),
                 "low": self.per_knob_ci.get(k, nan2)[0], "high": self.per_knob_ci.get(k, nan2)[1],
                 "p": self.per_knob_p.get(k, math.nan),
                 "p_mcse": self.per_knob_p_mcse.get(k, math.nan),
                 "n_groups": self.n_groups.get(k, 0), "unit": self.unit, "reason": self.reason}
                for k in self.knobs]
        rows.append({"marker": self.marker, "knob": "(all: psi)", "tau": self.psi,
                     "low": self.psi_ci[0], "high": self.psi_ci[1], "p": self.psi_p,
                     "p_mcse": self.psi_p_mcse, "n_groups": sum(self.n_groups.values()),
                     "unit": self.unit, "reason": self.reason})
        return rows

    def _blocks(self) -> tuple[Block, ...]:
        return tuple(granulated_tables([self]))

    def _summary(self) -> str:
        if not self.applicable:
            return f"{self.marker} -> {self.outcome}: not applicable ({self.reason})"
        return (f"{self.marker} -> {self.outcome}, {self.n} models: tau {self.tau:+.3f}, "
                f"psi {self.psi:+.3f} over {', '.join(self.knobs)}")


def granulated_kendall_tau(
    table: Mapping[str, Sequence[Any]] | Any, outcome: str, marker: str, knobs: Sequence[str],
    groups: str | None = None, *, n_permutations: int = 1000, n_bootstrap: int = 1000,
    seed: int = 0, confidence_level: float = 0.95,
) -> GranulatedTau:
    """Jiang et al.'s granulated Kendall tau of ``marker`` vs ``outcome`` per design knob.

    See the module docstring for the definitions and our reading of them. Rows whose marker is
    missing are dropped first (which may break the grid: then not applicable).

    Args:
        table: one row per model.
        outcome: the outcome column.
        marker: the marker column.
        knobs: the design knob columns.
        groups: the bootstrap unit (e.g. the seed) when it has >= 3 levels; else (or None) the
            models within each design cell are resampled.
        n_permutations: permutations of each p (0: none).
        n_bootstrap: bootstrap resamples of each interval (0: none, else >= 1000).
        seed: seeds both.
        confidence_level: level of the intervals.
    """
    _check_inference(n_permutations, n_bootstrap, confidence_level)
    t, m, y, codes, dropped, keep = _prepare(table, outcome, marker, knobs)
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
    per_p, per_se, per_ci = {}, {}, {}
    W, unit = _weights(t, groups, knobs, keep, codes, n_bootstrap, np.random.default_rng([seed, 3]))
    glob = permute_within(np.zeros(n, dtype=np.int64), m, n_permutations,
                          np.random.default_rng([seed, 2]))
    psi_null = np.zeros(n_permutations)
    psi_boot = np.zeros(0 if W is None else n_bootstrap)
    for i, k in enumerate(knobs):
        others = np.delete(codes, i, axis=1)
        _, group = np.unique(others, axis=0, return_inverse=True)
        group = group.reshape(-1)
        taus = [kendall_tau_a(m[group == g], y[group == g]) for g in range(int(group.max()) + 1)]
        per_knob[k], n_groups[k] = float(np.mean(taus)), len(taus)
        ps = pair_set(group, y)
        null = tau_stat(ps, permute_within(group, m, n_permutations,
                                           np.random.default_rng([seed, 1, i])))
        per_p[k], per_se[k] = _two_sided(per_knob[k], null, n_permutations)
        psi_null += tau_stat(ps, glob) / len(knobs)
        if W is not None:
            boot = tau_stat(ps, np.broadcast_to(m, W.shape), W)
            per_ci[k] = _interval(boot, confidence_level)
            psi_boot += boot / len(knobs)
    psi = float(np.mean(list(per_knob.values())))
    all_pairs = pair_set(np.zeros(n, dtype=np.int64), y)
    tau_p, tau_se = _two_sided(tau, tau_stat(all_pairs, glob), n_permutations)
    psi_p, psi_se = _two_sided(psi, psi_null, n_permutations)
    nan2 = (math.nan, math.nan)
    return GranulatedTau(
        **base, applicable=True, reason="", per_knob=per_knob, n_groups=n_groups, psi=psi,
        tau_p=tau_p, tau_p_mcse=tau_se, per_knob_p=per_p, per_knob_p_mcse=per_se,
        per_knob_ci=per_ci, psi_p=psi_p, psi_p_mcse=psi_se,
        psi_ci=_interval(psi_boot, confidence_level) if W is not None else nan2,
        tau_ci=(_interval(tau_stat(all_pairs, np.broadcast_to(m, W.shape), W), confidence_level)
                if W is not None else nan2),
        n_permutations=n_permutations, n_bootstrap=n_bootstrap,
        confidence_level=confidence_level, unit=unit)


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
        p, p_mcse: permutation p of ``score`` (the marker permuted over all models; one-sided,
            the score is >= 0) and its Monte-Carlo SE.
        low, high: percentile bootstrap interval of ``score`` over ``unit``.
        n_permutations, n_bootstrap, confidence_level, unit: the settings (0: not computed).
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
    p: float = math.nan
    p_mcse: float = math.nan
    low: float = math.nan
    high: float = math.nan
    n_permutations: int = 0
    n_bootstrap: int = 0
    confidence_level: float = 0.95
    unit: str = ""

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
            title="Granulated Kendall tau (Jiang et al. 2020)", collapsed=True,
            columns=(Column(key="marker", header="marker", fmt="", align="left"),
                     Column(key="knob", header="knob", fmt="", align="left"),
                     Column(key="tau", header="tau", fmt="+.3f"),
                     Column(key="ci", header="CI", fmt="ci"),
                     Column(key="p", header="perm. p", fmt=".2g"),
                     Column(key="p_mcse", header="p MC SE", fmt=".1g"),
                     Column(key="n_groups", header="groups", fmt="d"),
                     Column(key="unit", header="CI unit", fmt="", align="left"),
                     Column(key="reason", header="note", fmt="", align="left")),
            rows=tuple({**r, "ci": [r["low"], r["high"]]} for g in taus for r in g.to_records()),
            caption="tau of (marker, outcome) within each group of models that differ only in "
            "the knob, averaged over groups; '(all: psi)' is the mean over knobs (their Psi). "
            "Defined on a full grid of the knobs only. p: two-sided, the marker permuted within "
            "the knob's groups (psi: over all models, the permutations that keep every knob's "
            "groups together), with its Monte-Carlo SE; CI: percentile bootstrap over the unit "
            "shown.",
        ))
    cmis = [g for g in items if isinstance(g, CMIResult)]
    if cmis:
        out.append(Table(
            title="Conditional mutual information (Jiang et al. 2020)", collapsed=True,
            columns=(Column(key="marker", header="marker", fmt="", align="left"),
                     Column(key="score", header="min normalised CMI"),
                     Column(key="ci", header="CI", fmt="ci"),
                     Column(key="p", header="perm. p", fmt=".2g"),
                     Column(key="p_mcse", header="p MC SE", fmt=".1g"),
                     Column(key="argmin", header="attained given", fmt="", align="left"),
                     Column(key="unconditional", header="given nothing"),
                     Column(key="n_pairs", header="pairs", fmt="d"),
                     Column(key="reason", header="note", fmt="", align="left")),
            rows=tuple({"marker": c.marker, "score": c.score, "ci": [c.low, c.high], "p": c.p,
                        "p_mcse": c.p_mcse, "argmin": ", ".join(c.argmin) or "(none)",
                        "unconditional": c.sets.get((), math.nan), "n_pairs": c.n_pairs,
                        "reason": c.reason} for c in cmis),
            caption="I(V_m; V_y | U_S) / H(V_y | U_S) over ordered pairs of models that differ "
            "in one knob (V = sign of the difference), minimised over conditioning sets S of "
            "knobs; 0: the marker's order says nothing about the outcome's once S is known. p: "
            "one-sided, the marker permuted over all models; CI: percentile bootstrap of the "
            "score over the unit of the tau table.",
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
    groups: str | None = None,
    *,
    n_permutations: int = 1000,
    n_bootstrap: int = 1000,
    seed: int = 0,
    confidence_level: float = 0.95,
) -> CMIResult:
    """Jiang et al.'s CMI test: ``min_S I(V_m; V_y | U_S) / H(V_y | U_S)`` over ``|S| <= k``.

    See the module docstring for the sample space of pairs and the sign variables. Low scores
    mean that, once some set of knobs is known, the marker's order of two models says little
    about their outcomes' order. ``groups``, ``n_permutations``, ``n_bootstrap``, ``seed`` and
    ``confidence_level`` as in :func:`granulated_kendall_tau` (the score's p and interval).
    """
    if max_set_size < 0:
        raise ConfigError(f"max_set_size must be >= 0, got {max_set_size}")
    _check_inference(n_permutations, n_bootstrap, confidence_level)
    t, m, y, codes, _, keep = _prepare(table, outcome, marker, knobs)
    knobs = tuple(knobs)
    a, b = np.nonzero((codes[:, None, :] != codes[None, :, :]).sum(-1) == 1)
    vm = np.sign(m[a] - m[b]).astype(np.int64) + 1
    vy = np.sign(y[a] - y[b]).astype(np.int64) + 1
    sets: dict[tuple[str, ...], float] = {}
    cmi: dict[tuple[str, ...], float] = {}
    ent: dict[tuple[str, ...], float] = {}
    skipped = []
    u_sets = []
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
                u_sets.append(u)
    if not sets:
        reason = ("no two models differ in exactly one knob" if a.size == 0 else
                  "the outcome's order is fixed by the knobs in every conditioning set")
        return CMIResult(marker=marker, outcome=outcome, knobs=knobs, max_set_size=max_set_size,
                         sets={}, cmi=cmi, entropy=ent, skipped=tuple(skipped), score=math.nan,
                         argmin=(), n_pairs=int(a.size), applicable=False, reason=reason)
    argmin = min(sets, key=lambda s: sets[s])
    score = sets[argmin]
    p = p_se = low = high = math.nan
    vy = vy.astype(np.int64)
    if n_permutations:
        perms = permute_within(np.zeros(m.size, dtype=np.int64), m, n_permutations,
                               np.random.default_rng([seed, 2]))
        null = cmi_scores(u_sets, a, b, vy, perms)
        p = permutation_pvalue(score - 1e-12, null, "greater")
        p_se = mc_se(p, n_permutations)
    W, unit = _weights(t, groups, knobs, keep, codes, n_bootstrap, np.random.default_rng([seed, 3]))
    if W is not None:
        low, high = _interval(cmi_scores(u_sets, a, b, vy, np.broadcast_to(m, W.shape), W),
                              confidence_level)
    return CMIResult(marker=marker, outcome=outcome, knobs=knobs, max_set_size=max_set_size,
                     sets=sets, cmi=cmi, entropy=ent, skipped=tuple(skipped), score=score,
                     argmin=argmin, n_pairs=int(a.size), applicable=True, reason="", p=p,
                     p_mcse=p_se, low=low, high=high, n_permutations=n_permutations,
                     n_bootstrap=n_bootstrap, confidence_level=confidence_level, unit=unit)
