"""Which markers predict the outcome over a population of models, and beyond the covariates?

Guide: ``docs/diagnosis.md`` (anchors: Jiang et al., "Fantastic Generalization
Measures and Where to Find Them", ICLR 2020, on why a plain correlation misleads when a design
knob drives both marker and outcome; An & Du's HE study for the level-mean unit). For each
marker ``m``, outcome ``y`` and covariates ``C`` (design knobs, ID accuracy):

- **marginal**: Spearman rho and Pearson r of ``(m, y)`` over models; percentile bootstrap CIs
  resampling groups (models when ``groups`` is None); two-sided permutation p of rho (``y``
  permuted over models, ``p = (1 + #{|rho*| >= |rho|}) / (1 + n_perm)``); Holm over markers.
- **partial**: ``m`` and ``y`` residualised on ``[1, C]`` by least squares (text covariates
  one-hot), Pearson r of the residuals; CI by the same group bootstrap (the residualisation is
  refitted in every resample); p by Freedman & Lane (1983): permute the residuals ``e_y`` of the
  reduced model ``y ~ [1, C]``, add back its fitted part, residualise again and recompute;
  two-sided; Holm over markers.
- **out-of-sample gain**: leave one group out (each model its own group when ``groups`` is
  None), ordinary least squares ``y ~ [1, C]`` and ``y ~ [1, C, m]`` on the other groups,
  predictions for the held-out group pooled; ``R^2 = 1 - sum (y - yhat)^2 / sum (y - ybar)^2``
  for each model; ``delta_r2 = R^2_full - R^2_covariates``; CI by a paired bootstrap over groups
  of the two held-out residual vectors.
- **verdict**: ``adds_beyond_covariates`` when the partial Holm p <= alpha and the lower
  ``delta_r2`` bound > 0; ``explained_by_covariates`` when the marginal Holm p <= alpha but not
  the former; ``no_association`` otherwise; ``not_applicable`` (with a reason) when the marker
  cannot be analysed (fewer than 3 groups with a value, constant, ...).

With no covariates the partial correlation is the Pearson r and its test a plain permutation
test of Pearson's r. Permutation nulls are matrix products over all permutations at once.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from jaxtyping import Float, Int
from scipy import stats as sps

from probekit.errors import ConfigError, DataError
from probekit.report.notebook import NotebookMixin
from probekit.stats.bootstrap import bootstrap_indices, percentile_interval
from probekit.stats.multiple import holm
from probekit.stats.permutation import check_n_permutations, n_permutations_for, permutation_pvalue

from .table import MarkerTable, as_marker_table

__all__ = [
    "ADDS",
    "EXPLAINED",
    "NONE",
    "NOT_APPLICABLE",
    "MarkerAnalysis",
    "MarkerStats",
    "freedman_lane_null",
    "logo_predictions",
    "marker_analysis",
    "permutations",
    "spearman_null",
]

ADDS = "adds_beyond_covariates"
EXPLAINED = "explained_by_covariates"
NONE = "no_association"
NOT_APPLICABLE = "not_applicable"
_TIE = 1e-12  # a permuted statistic within this of the observed counts as "at least as extreme"


# --------------------------------------------------------------------------- pure numpy parts


def permutations(
    n: int, n_permutations: int, rng: np.random.Generator,
    strata: Int[np.ndarray, " n"] | None = None,
) -> Int[np.ndarray, "perm n"]:
    """``n_permutations`` independent uniform permutations of ``range(n)``, one per row.

    With ``strata`` (a code per item), items are permuted only within their stratum.
    """
    if strata is None:
        return rng.permuted(np.tile(np.arange(n), (n_permutations, 1)), axis=1)
    out = np.tile(np.arange(n), (n_permutations, 1))
    for k in np.unique(strata):
        idx = np.flatnonzero(strata == k)
        out[:, idx] = idx[rng.permuted(np.tile(np.arange(idx.size), (n_permutations, 1)), axis=1)]
    return out


def _unit(x: np.ndarray) -> np.ndarray:
    c = x - x.mean()
    return c / np.linalg.norm(c)


def spearman_null(
    m: Float[np.ndarray, " n"], y: Float[np.ndarray, " n"], perms: Int[np.ndarray, "perm n"]
) -> tuple[float, Float[np.ndarray, " perm"]]:
    """Spearman rho of ``(m, y)`` and of ``(m, y[perm])`` for every row of ``perms``.

    rho is Pearson's r of the average ranks, so with unit-norm centred ranks ``a``, ``b`` the
    null is the matrix product ``b[perms] @ a``.
    """
    b, B = _rank_parts(y, perms)
    a = _unit(sps.rankdata(m))
    return float(b @ a), B @ a


def _rank_parts(y: np.ndarray, perms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Unit-norm centred ranks of ``y`` and their permuted copies (shared by all markers)."""
    b = _unit(sps.rankdata(y))
    return b, b[perms]


def _basis(X: np.ndarray) -> np.ndarray:
    """Orthonormal basis of the column space of ``X`` (rank-revealing SVD)."""
    u, s, _ = np.linalg.svd(X, full_matrices=False)
    keep = s > s[0] * 1e-10 if s.size else np.zeros(0, dtype=bool)
    return u[:, keep]


def _residual(Q: np.ndarray, v: np.ndarray) -> np.ndarray:
    return v - Q @ (Q.T @ v)


def freedman_lane_null(
    m: Float[np.ndarray, " n"],
    y: Float[np.ndarray, " n"],
    X: Float[np.ndarray, "n q"],
    perms: Int[np.ndarray, "perm n"],
) -> tuple[float, Float[np.ndarray, " perm"]]:
    """Partial r of ``(m, y)`` given ``X`` and its Freedman-Lane permutation null.

    ``X`` includes the intercept column. With ``H`` the projection on ``X``'s columns,
    ``e_m = (I - H) m``, ``e_y = (I - H) y``: the statistic is ``corr(e_m, e_y)``; under
    permutation ``pi``, ``y* = H y + e_y[pi]`` and ``(I - H) y* = (I - H) e_y[pi]``, so the null
    is ``e_m . e_y[pi] / (|e_m| |(I - H) e_y[pi]|)`` (``e_m`` is orthogonal to ``X``), computed
    for all permutations at once. Freedman & Lane (1983); Anderson & Legendre (1999).
    """
    Q = _basis(X)
    em, ey = _residual(Q, m), _residual(Q, y)
    E, den = _fl_parts(ey, Q, perms)
    return _fl_statistic(em, ey, E, den)


def _fl_parts(ey: np.ndarray, Q: np.ndarray, perms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Permuted outcome residuals ``e_y[pi]`` and ``|(I - H) e_y[pi]|`` (shared by all markers)."""
    E = ey[perms]
    return E, np.sqrt(np.maximum((E * E).sum(1) - ((E @ Q) ** 2).sum(1), 0.0))


def _fl_statistic(
    em: np.ndarray, ey: np.ndarray, E: np.ndarray, den: np.ndarray
) -> tuple[float, np.ndarray]:
    nm, ny = np.linalg.norm(em), np.linalg.norm(ey)
    with np.errstate(divide="ignore", invalid="ignore"):
        null = (E @ em) / (nm * den)
    return float(em @ ey / (nm * ny)), null


def logo_predictions(
    y: Float[np.ndarray, " n"], X: Float[np.ndarray, "n q"], groups: Int[np.ndarray, " n"]
) -> Float[np.ndarray, " n"]:
    """Leave-one-group-out OLS predictions of ``y`` from ``X`` (``X`` holds the intercept).

    Each group's rows are predicted by the least-squares fit on all other rows. Computed from
    the full fit: with hat matrix ``H`` and residuals ``e``, the held-out residuals of group
    ``g`` are ``(I - H_gg)^{-1} e_g`` (exact for OLS; e.g. Hastie et al. 2009, sec. 7.10 for
    one left out); a fold whose training rows do not span ``X``'s columns (``I - H_gg``
    singular) is fitted directly (minimum-norm least squares).
    """
    n, q = X.shape
    Q = _basis(X)
    if Q.shape[1] < q:  # rank-deficient design: fit every fold directly
        return _logo_direct(y, X, groups, np.unique(groups))
    e = _residual(Q, y)
    pred = np.empty_like(y)
    _, inverse, counts = np.unique(groups, return_inverse=True, return_counts=True)
    single = counts[inverse.reshape(-1)] == 1
    h = (Q * Q).sum(1)
    ok = single & (1.0 - h > 1e-10)
    pred[ok] = y[ok] - e[ok] / (1.0 - h[ok])
    direct = list(np.unique(groups[single & ~ok]))
    for k in np.unique(groups[~single]):
        idx = np.flatnonzero(groups == k)
        Qg = Q[idx]
        A = np.eye(idx.size) - Qg @ Qg.T
        if np.linalg.svd(A, compute_uv=False).min() <= 1e-10:
            direct.append(k)
            continue
        pred[idx] = y[idx] - np.linalg.solve(A, e[idx])
    if direct:
        rows = np.isin(groups, direct)
        pred[rows] = _logo_direct(y, X, groups, np.array(direct))[rows]
    return pred


def _logo_direct(y: np.ndarray, X: np.ndarray, groups: np.ndarray, which: np.ndarray) -> np.ndarray:
    pred = np.full_like(y, np.nan)
    for k in which:
        test = groups == k
        beta = np.linalg.lstsq(X[~test], y[~test], rcond=None)[0]
        pred[test] = X[test] @ beta
    return pred


def _wcorr(W: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Weighted Pearson r per row of ``W`` (= Pearson r of the sample replicated by weight)."""
    sw = W.sum(1)
    ca = a - ((W * a).sum(1) / sw)[:, None]
    cb = b - ((W * b).sum(1) / sw)[:, None]
    va, vb = (W * ca * ca).sum(1), (W * cb * cb).sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = (W * ca * cb).sum(1) / np.sqrt(va * vb)
    scale_a, scale_b = np.abs(a).max() + 1e-300, np.abs(b).max() + 1e-300
    degenerate = (va <= 1e-24 * scale_a**2 * sw) | (vb <= 1e-24 * scale_b**2 * sw)
    return np.where(degenerate, np.nan, r)


def _wranks(W: np.ndarray, x: np.ndarray) -> np.ndarray:
    """Average ranks of ``x`` in each weighted (replicated) resample, one row per row of ``W``."""
    order = np.argsort(x, kind="stable")
    xs = x[order]
    new = np.r_[True, xs[1:] != xs[:-1]]
    tie = np.empty(x.size, dtype=np.int64)
    tie[order] = np.cumsum(new) - 1
    onehot = np.zeros((x.size, int(tie.max()) + 1))
    onehot[np.arange(x.size), tie] = 1.0
    S = W @ onehot
    below = np.cumsum(S, axis=1) - S
    return (below + (S + 1.0) / 2.0)[:, tie]


def _wgram_pinv(W: np.ndarray, X: np.ndarray) -> np.ndarray:
    """``pinv(X^T diag(w) X)`` for every row ``w`` of ``W`` (shared by all markers)."""
    WX = W[:, :, None] * X
    return np.linalg.pinv(np.matmul(WX.transpose(0, 2, 1), X), rcond=1e-10)


def _wresidual(
    W: np.ndarray, X: np.ndarray, v: np.ndarray, gram_pinv: np.ndarray | None = None
) -> np.ndarray:
    """Residual of ``v`` on ``X`` by weighted least squares, one fit per row of ``W``."""
    G = _wgram_pinv(W, X) if gram_pinv is None else gram_pinv
    rhs = (W * v) @ X
    beta = np.matmul(G, rhs[:, :, None])[:, :, 0]
    return v - beta @ X.T


def _group_weights(groups: np.ndarray, n_bootstrap: int, rng: np.random.Generator) -> np.ndarray:
    """Row weights of a bootstrap over groups: each row weighs its group's multiplicity."""
    n_groups = int(groups.max()) + 1
    idx = bootstrap_indices(n_groups, n_bootstrap, rng)
    counts = np.zeros((n_bootstrap, n_groups))
    np.add.at(counts, (np.arange(n_bootstrap)[:, None], idx), 1.0)
    return counts[:, groups]


def _two_sided_p(observed: float, null: np.ndarray) -> float:
    null = np.nan_to_num(np.abs(null), nan=0.0)
    return permutation_pvalue(abs(observed) - _TIE, null, "greater")


# --------------------------------------------------------------------------- results


@dataclass(frozen=True, kw_only=True)
class MarkerStats:
    """The statistics of one marker (see the module docstring for every definition).

    Attributes:
        marker: column name.
        verdict: ``adds_beyond_covariates``, ``explained_by_covariates``, ``no_association`` or
            ``not_applicable``.
        reason: why the marker is not applicable, or a note (e.g. an undefined partial); "".
        n, n_groups, n_missing: models and groups used, rows dropped for a missing cell.
        spearman, spearman_low, spearman_high: rho and its percentile bootstrap CI.
        pearson, pearson_low, pearson_high: r and its CI.
        p, p_holm: permutation p of rho and its Holm-adjusted value over the markers.
        partial_r, partial_low, partial_high, partial_p, partial_p_holm: partial correlation
            given the covariates, CI, Freedman-Lane p and Holm p.
        r2_covariates, r2_full, delta_r2, delta_r2_low, delta_r2_high: leave-one-group-out R^2
            of ``y ~ C`` and ``y ~ C + m`` and their difference with CI.
        rows: the table rows used; marker_residuals, outcome_residuals: ``m`` and ``y``
            residualised on ``[1, C]`` over those rows (the partial-residual plot).
    """

    marker: str
    verdict: str
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
    p: float = math.nan
    p_holm: float = math.nan
    partial_r: float = math.nan
    partial_low: float = math.nan
    partial_high: float = math.nan
    partial_p: float = math.nan
    partial_p_holm: float = math.nan
    r2_covariates: float = math.nan
    r2_full: float = math.nan
    delta_r2: float = math.nan
    delta_r2_low: float = math.nan
    delta_r2_high: float = math.nan
    rows: tuple[int, ...] = field(default=(), repr=False, compare=False)
    marker_residuals: tuple[float, ...] = field(default=(), repr=False, compare=False)
    outcome_residuals: tuple[float, ...] = field(default=(), repr=False, compare=False)

    @property
    def applicable(self) -> bool:
        """False for a ``not_applicable`` record."""
        return self.verdict != NOT_APPLICABLE

    def to_record(self) -> dict[str, Any]:
        """One dict with every statistic (NaN where not computed; ``reason`` says why)."""
        return {
            "marker": self.marker, "verdict": self.verdict, "reason": self.reason,
            "n": self.n, "n_groups": self.n_groups, "n_missing": self.n_missing,
            "spearman": self.spearman, "spearman_low": self.spearman_low,
            "spearman_high": self.spearman_high, "pearson": self.pearson,
            "pearson_low": self.pearson_low, "pearson_high": self.pearson_high,
            "p": self.p, "p_holm": self.p_holm, "partial_r": self.partial_r,
            "partial_low": self.partial_low, "partial_high": self.partial_high,
            "partial_p": self.partial_p, "partial_p_holm": self.partial_p_holm,
            "r2_covariates": self.r2_covariates, "r2_full": self.r2_full,
            "delta_r2": self.delta_r2, "delta_r2_low": self.delta_r2_low,
            "delta_r2_high": self.delta_r2_high,
        }


def _f(x: float, fmt: str = ".2f") -> str:
    if not math.isfinite(x):
        return "undefined"
    text = format(x, fmt)
    return text[1:] if text.startswith("-") and float(text) == 0 else text


def _p(x: float) -> str:
    return "undefined" if not math.isfinite(x) else f"{x:.2g}"


def _names(names: Sequence[str]) -> str:
    names = list(names)
    if len(names) <= 1:
        return "".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


@dataclass(frozen=True, kw_only=True, repr=False)
class MarkerAnalysis(NotebookMixin):
    """Result of :func:`marker_analysis`: one :class:`MarkerStats` per marker, in input order.

    In a notebook the result shows the report's own blocks (:func:`.ranking.analysis_blocks`:
    warnings, ranking table, one sentence per marker, and, given covariates, the
    partial-residual scatters); ``plot()`` draws the partial-residual scatter of the top-ranked
    marker; ``to_frame()`` is :meth:`to_records` as a DataFrame (the ``notebook`` extra).

    Attributes:
        outcome: the outcome column.
        covariates: covariate columns as given; covariate_terms: the regression terms (text
            covariates one-hot, ``NAME=level``).
        groups: the resampling / leave-out unit column (None: each model its own group).
        n_models, n_groups: rows of the table and distinct groups.
        settings: n_permutations, n_bootstrap, alpha, confidence_level, seed.
        markers: the per-marker statistics.
        warnings: sentences the reader must see (few groups, too few permutations for Holm).
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

        return strict_json({
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
        from .ranking import analysis_blocks, partial_scatters

        return (*analysis_blocks(self), *partial_scatters(self))

    def _main_plot(self) -> Any:
        """The partial-residual scatter of the top-ranked marker (None without covariates)."""
        from .ranking import partial_scatters

        return next(iter(partial_scatters(self, top=1)), None)

    def sentence(self, marker: str) -> str:
        """One sentence for ``marker``: effect, CI, p and verdict.

        E.g. ``"he: Spearman -0.84 [-0.90, -0.75] with ood (p 0.001, Holm p 0.004, ...), but
        given noise the partial r is 0.07 [-0.10, 0.20] (p 0.55, Holm p 1) and it adds delta R^2
        -0.01 [-0.03, 0.01] out of sample: explained by the covariates."`` (p: the permutation
        p of the marker alone; Holm p: adjusted over the markers, the one the verdict uses).
        """
        s = self[marker]
        if not s.applicable:
            return f"{marker}: not applicable ({s.reason})."
        level = f"{self.settings['confidence_level']:.0%}"
        head = (f"{marker}: Spearman {_f(s.spearman)} [{_f(s.spearman_low)}, "
                f"{_f(s.spearman_high)}] with {self.outcome} (p {_p(s.p)}, Holm p {_p(s.p_holm)}, n = {s.n} "
                f"models, {level} CI over {s.n_groups} {self._unit()})")
        given = (f"given {_names(self.covariates)}" if self.covariates
                 else "with no covariates (partial = Pearson)")
        joint = ", but" if s.verdict == EXPLAINED else ";"
        part = (f"{joint} {given} the partial r is {_f(s.partial_r)} [{_f(s.partial_low)}, "
                f"{_f(s.partial_high)}] (p {_p(s.partial_p)}, Holm p {_p(s.partial_p_holm)}) and it adds delta R^2 "
                f"{_f(s.delta_r2)} [{_f(s.delta_r2_low)}, {_f(s.delta_r2_high)}] out of sample")
        word = {ADDS: "adds beyond the covariates", EXPLAINED: "explained by the covariates",
                NONE: "no association"}[s.verdict]
        if not self.covariates:
            word = {ADDS: "predicts the outcome out of sample", EXPLAINED: "associated (rank) "
                    "but adds no out-of-sample gain", NONE: "no association"}[s.verdict]
        if (s.verdict == NONE and self.covariates
                and s.partial_p_holm <= self.settings["alpha"]):  # partial only: say why "none"
            word = ("no association claimed (the partial correlation is significant, but the "
                    "out-of-sample gain's CI includes 0)")
        note = f" ({s.reason})" if s.reason else ""
        return f"{head}{part}: {word}{note}."

    def _unit(self) -> str:
        return f"groups ({self.groups})" if self.groups else "models"


# --------------------------------------------------------------------------- the analysis


def _not_applicable(name: str, reason: str, n: int, n_groups: int, n_missing: int) -> MarkerStats:
    return MarkerStats(marker=name, verdict=NOT_APPLICABLE, reason=reason, n=n,
                       n_groups=n_groups, n_missing=n_missing)


@dataclass
class _Rows:
    """What every marker with the same usable rows shares: permutations, resamples, y's parts."""

    keep: np.ndarray
    g: np.ndarray
    y: np.ndarray
    X: np.ndarray
    perms: np.ndarray
    W: np.ndarray
    Q: np.ndarray
    ey: np.ndarray
    y_linear: bool
    pred_c: np.ndarray
    y_ranks_boot: np.ndarray
    y_resid_boot: np.ndarray | None
    y_unit_ranks: np.ndarray
    y_ranks_perm: np.ndarray
    ey_perm: np.ndarray
    ey_perm_norm: np.ndarray
    gram_pinv: np.ndarray


def _rows_context(
    keep: np.ndarray, y_all: np.ndarray, C_all: np.ndarray, g_all: np.ndarray,
    s_all: np.ndarray | None, *, n_permutations: int, n_bootstrap: int, seed: int, index: int,
) -> _Rows:
    _, g = np.unique(g_all[keep], return_inverse=True)
    y = y_all[keep]
    n = y.size
    X = np.column_stack([np.ones(n), C_all[keep]])
    rng = np.random.default_rng([seed, index])
    perms = permutations(n, n_permutations, rng, None if s_all is None else s_all[keep])
    W = _group_weights(g, n_bootstrap, rng)
    Q = _basis(X)
    ey = _residual(Q, y)
    y_linear = bool(np.linalg.norm(ey) <= 1e-10 * np.linalg.norm(y - y.mean()))
    b, B = _rank_parts(y, perms)
    E, den = _fl_parts(ey, Q, perms)
    gram_pinv = _wgram_pinv(W, X)
    return _Rows(
        keep=keep, g=g, y=y, X=X, perms=perms, W=W, Q=Q, ey=ey, y_linear=y_linear,
        pred_c=logo_predictions(y, X, g), y_ranks_boot=_wranks(W, y),
        y_resid_boot=None if y_linear else _wresidual(W, X, y, gram_pinv),
        y_unit_ranks=b, y_ranks_perm=B, ey_perm=E, ey_perm_norm=den, gram_pinv=gram_pinv,
    )


def _one_marker(
    m_all: np.ndarray, y_all: np.ndarray, C_all: np.ndarray, g_all: np.ndarray,
    s_all: np.ndarray | None, contexts: dict[bytes, _Rows], *, n_permutations: int,
    n_bootstrap: int, confidence_level: float, seed: int,
) -> dict[str, Any]:
    """Every statistic of one marker but the Holm adjustments and the verdict."""
    keep = ~np.isnan(m_all)
    n, n_missing = int(keep.sum()), int((~keep).sum())
    if n == 0:
        return {"na": f"no model has a value ({n_missing} missing cells)", "n": 0,
                "n_groups": 0, "n_missing": n_missing}
    n_groups = int(np.unique(g_all[keep]).size)
    base = {"n": n, "n_groups": n_groups, "n_missing": n_missing}
    m, y = m_all[keep], y_all[keep]
    if n_groups < 3:
        return {**base, "na": f"only {n_groups} group(s) have a value; leave-one-group-out "
                "needs >= 3"}
    if np.ptp(m) == 0:
        return {**base, "na": f"constant ({m[0]:g}) over the {n} models that have it"}
    if np.ptp(y) == 0:
        return {**base, "na": f"the outcome is constant over the {n} models with this marker"}
    q = np.linalg.matrix_rank(np.column_stack([np.ones(n), C_all[keep]]))
    if n <= q + 1:
        return {**base, "na": f"{n} models are too few for {q} regression terms"}
    key = keep.tobytes()
    if key not in contexts:
        contexts[key] = _rows_context(keep, y_all, C_all, g_all, s_all,
                                      n_permutations=n_permutations,
                                      n_bootstrap=n_bootstrap, seed=seed, index=len(contexts))
    ctx = contexts[key]
    X, Q, W = ctx.X, ctx.Q, ctx.W
    a = _unit(sps.rankdata(m))
    rho, null_rho = float(ctx.y_unit_ranks @ a), ctx.y_ranks_perm @ a
    pearson = float(_unit(m) @ _unit(y))
    out = {**base, "spearman": rho, "pearson": pearson, "p": _two_sided_p(rho, null_rho)}

    em = _residual(Q, m)
    notes = []
    m_linear = bool(np.linalg.norm(em) <= 1e-10 * np.linalg.norm(m - m.mean()))
    if m_linear:
        notes.append("the marker is a linear function of the covariates: no partial correlation")
    if ctx.y_linear:
        notes.append("the outcome is a linear function of the covariates: no partial correlation")
    if not notes:
        r, null_r = _fl_statistic(em, ctx.ey, ctx.ey_perm, ctx.ey_perm_norm)
        out.update(partial_r=r, partial_p=_two_sided_p(r, null_r))
    out["reason"] = "; ".join(notes)
    out["marker_residuals"], out["outcome_residuals"] = tuple(em.tolist()), tuple(ctx.ey.tolist())
    out["rows"] = tuple(np.flatnonzero(keep).tolist())

    pred_f = logo_predictions(y, np.column_stack([X, m]), ctx.g)
    sst = float(((y - y.mean()) ** 2).sum())
    ec, ef = y - ctx.pred_c, y - pred_f
    out["r2_covariates"] = 1.0 - float(ec @ ec) / sst
    out["r2_full"] = 1.0 - float(ef @ ef) / sst
    out["delta_r2"] = out["r2_full"] - out["r2_covariates"]

    boot = {
        "spearman": _wcorr(W, _wranks(W, m), ctx.y_ranks_boot),
        "pearson": _wcorr(W, np.broadcast_to(m, W.shape), np.broadcast_to(y, W.shape)),
    }
    if not notes and ctx.y_resid_boot is not None:
        boot["partial"] = _wcorr(W, _wresidual(W, X, m, ctx.gram_pinv), ctx.y_resid_boot)
    sw = W.sum(1)
    yb = (W * y).sum(1) / sw
    sst_b = (W * (y - yb[:, None]) ** 2).sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        # a resample of (nearly) one outcome value has no R^2: left out of the interval
        flat = sst_b <= 1e-12 * (W @ (y - y.mean()) ** 2)
        boot["delta_r2"] = np.where(flat, np.nan, (W @ (ec * ec) - W @ (ef * ef)) / sst_b)
    for name, samples in boot.items():
        if np.isfinite(samples).any():
            lo, hi = percentile_interval(samples, confidence_level)
            out[f"{name}_low"], out[f"{name}_high"] = float(lo), float(hi)
    return out


def _check_args(n_permutations: int, n_bootstrap: int, alpha: float, confidence_level: float) -> None:
    check_n_permutations(n_permutations)
    if n_bootstrap < 1000:
        raise ConfigError(f"n_bootstrap={n_bootstrap} is below the 1000 the percentile intervals "
                          "need; pass n_bootstrap >= 1000")
    for name, v in (("alpha", alpha), ("confidence_level", confidence_level)):
        if not 0.0 < v < 1.0:
            raise ConfigError(f"{name} must be in (0, 1), got {v}")


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


def marker_analysis(
    table: Mapping[str, Sequence[Any]] | Any,
    outcome: str,
    *,
    markers: Sequence[str] | None = None,
    covariates: Sequence[str] = (),
    groups: str | None = None,
    n_permutations: int = 1000,
    n_bootstrap: int = 1000,
    alpha: float = 0.05,
    seed: int = 0,
    confidence_level: float = 0.95,
    strata: str | None = None,
) -> MarkerAnalysis:
    """Marginal, partial and out-of-sample association of each marker with ``outcome``.

    Definitions (``docs/diagnosis.md``) in the module docstring. Holm runs over the
    applicable markers (marginal and partial families separately; a marker whose partial is
    undefined, being a linear function of the covariates, is left out of the partial family).
    With no covariates the partial correlation equals the Pearson r (its p is then a plain
    permutation test of Pearson's r) and ``r2_covariates`` is the intercept-only model's.

    Args:
        table: mapping column -> sequence, or a pandas DataFrame; one row per model.
        outcome: the outcome column (e.g. OOD accuracy); numeric, complete, not constant.
        markers: marker columns (default: every numeric column not used otherwise). A missing
            cell (None/NaN) drops that row for that marker only (``n_missing``).
        covariates: columns the marker must add beyond (design knobs, ID accuracy); text
            columns are one-hot coded.
        groups: the resampling and leave-out unit (e.g. the seed); None: each model.
        n_permutations: permutations for the marginal and the Freedman-Lane tests.
        n_bootstrap: bootstrap resamples (>= 1000) for every CI.
        alpha: level of the Holm-adjusted tests in the verdicts.
        seed: seeds permutations and resamples. Markers with the same usable rows share the
            same permutations and bootstrap resamples (stream ``[seed, k]`` for the k-th
            distinct row set), so their intervals are joint.
        confidence_level: level of the percentile intervals.
        strata: a column whose levels the permutations stay within (diagnosis.md: "within
            strata of the design if the caller asks for it"), e.g. the main knob: the marginal
            test then asks whether the marker orders models *within* each level. None: permute
            over all models.

    Returns:
        A :class:`MarkerAnalysis`.

    Raises:
        ConfigError: unknown columns (the valid ones listed), a column in two roles, bad counts.
        DataError: ragged columns, missing cells in the outcome / covariates / groups, a
            constant outcome, fewer than 3 groups for leave-one-group-out.
    """
    _check_args(n_permutations, n_bootstrap, alpha, confidence_level)
    t = as_marker_table(table)
    covariates = (covariates,) if isinstance(covariates, str) else tuple(covariates)
    t.check_names([outcome], "outcome")
    t.check_names(covariates, "covariate")
    if groups is not None:
        t.check_names([groups], "groups")
    if outcome in covariates or outcome == groups:
        raise ConfigError(f"the outcome {outcome!r} is also a covariate or the groups column")
    chosen = _select_markers(t, outcome, markers, covariates, groups)
    y = t.numeric(outcome, "outcome")
    if np.ptp(y) == 0:
        raise DataError(f"outcome column {outcome!r} is constant ({y[0]:g} in all {y.size} rows); "
                        "nothing can predict it: check the outcome split or the population")
    C, terms = t.design(covariates)
    strata_codes = None if strata is None else t.codes(strata, "strata")[0]
    if groups is None:
        g = np.arange(t.n_rows)
    else:
        g, _ = t.codes(groups, "groups")
    n_groups = int(np.unique(g).size)
    if n_groups < 3:
        raise DataError(
            f"leave-one-group-out needs >= 3 groups; groups column {groups!r} has {n_groups} "
            f"distinct value(s) over {t.n_rows} rows: pass a groups column with more levels "
            "(e.g. the seed) or groups=None (each model its own group)"
            if groups else f"leave-one-out needs >= 3 models, the table has {t.n_rows}"
        )
    contexts: dict[bytes, _Rows] = {}
    raw = [
        _one_marker(t.numeric(name, "marker", allow_missing=True), y, C, g, strata_codes, contexts,
                    n_permutations=n_permutations, n_bootstrap=n_bootstrap,
                    confidence_level=confidence_level, seed=seed)
        for name in chosen
    ]
    ok = [i for i, r in enumerate(raw) if "na" not in r]
    p_holm = dict(zip(ok, holm([raw[i]["p"] for i in ok]), strict=True)) if ok else {}
    ok_partial = [i for i in ok if "partial_p" in raw[i]]
    pp_holm = (dict(zip(ok_partial, holm([raw[i]["partial_p"] for i in ok_partial]), strict=True))
               if ok_partial else {})
    results = []
    for i, (name, r) in enumerate(zip(chosen, raw, strict=True)):
        if "na" in r:
            results.append(_not_applicable(name, r["na"], r["n"], r["n_groups"], r["n_missing"]))
            continue
        ph, pph = float(p_holm[i]), float(pp_holm.get(i, math.nan))
        adds = pph <= alpha and r.get("delta_r2_low", math.nan) > 0
        verdict = ADDS if adds else EXPLAINED if ph <= alpha else NONE
        fields = {k: v for k, v in r.items() if k in MarkerStats.__dataclass_fields__}
        results.append(MarkerStats(marker=name, verdict=verdict, p_holm=ph, partial_p_holm=pph,
                                   **fields))
    warnings = []
    if n_groups < 10:
        warnings.append(f"the bootstrap resamples only {n_groups} groups: its intervals are rough "
                        "(diagnosis.md: fewer than 10 groups)")
    need = n_permutations_for(alpha, max(len(ok), 1))
    if n_permutations < need:
        warnings.append(f"{n_permutations} permutations cannot give a Holm p <= {alpha:g} over "
                        f"{len(ok)} markers (the smallest p is 1/{n_permutations + 1}); use >= {need}")
    na = [r.marker for r in results if not r.applicable]
    if na:
        warnings.append(f"not applicable: {', '.join(na)} (see the reason column)")
    return MarkerAnalysis(
        outcome=outcome, covariates=covariates, covariate_terms=terms, groups=groups,
        n_models=t.n_rows, n_groups=n_groups,
        settings={"n_permutations": n_permutations, "n_bootstrap": n_bootstrap, "alpha": alpha,
                  "confidence_level": confidence_level, "seed": seed, "strata": strata},
        markers=tuple(results), warnings=tuple(warnings),
    )
