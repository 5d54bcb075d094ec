"""Every statistic of one marker over one set of rows (the engine of :func:`marker_analysis`).

Three designs (``mode``), each with its resampling unit:

- ``"within_groups"``: ``X = [1, C, group fixed effects]``; HC3 t; Freedman-Lane permutations
  within groups (and within the caller's strata). The partial effect is a *within-group*
  effect; the marginal test uses ``X0 = [1, group fixed effects]``.
- ``"cluster"``: the same fixed-effects designs, CR1 t clustered by group, wild cluster
  restricted bootstrap (the seed is the resampling unit; robust to any dependence of the
  models within a seed, e.g. a seed-specific slope). (Earlier versions left the fixed effects
  out of the cluster designs: a seed effect shared by marker and outcome then counted as a
  partial effect.)
- ``"models"``: ``X = [1, C]`` (``X0 = [1]``); HC3 t; Freedman-Lane over all models (within the
  caller's strata).

Out-of-sample gain: leave-one-group-out OLS predictions ``pred = L y`` of ``y ~ Z`` and
``y ~ [Z, m]`` (``Z = [1, C]``; with fixed effects the outcome, covariates and marker are
centred within groups first, which is fitting the group fixed effects: a held-out group's own
effect cannot be predicted, so predictions and outcome are compared within groups);
``delta_r2 = R^2_full - R^2_cov``. Its null uses the same resamples as the partial test
(``y* = H y + e*``), and ``oos_p = (1 + #{d* >= d}) / (1 + B)`` (one-sided).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats as sps

from .inference import (
    FixedNull,
    basis,
    ci_by_inversion,
    cluster_weights,
    logo_operator,
    mde_partial_r,
    r_of_beta,
    resample_pvalue,
    stratified_permutations,
)

__all__ = ["FIXED_EFFECTS", "RowSet", "marker_stats", "partial_p", "row_set"]

#: the modes whose designs hold the group fixed effects
FIXED_EFFECTS = ("within_groups", "cluster")


def _onehot(codes: np.ndarray) -> np.ndarray:
    _, g = np.unique(codes, return_inverse=True)
    out = np.zeros((codes.size, int(g.max()) + 1))
    out[np.arange(codes.size), g] = 1.0
    return out


def _centre_within(M: np.ndarray, onehot: np.ndarray) -> np.ndarray:
    """Subtract group means from each column of ``M`` (rows = models)."""
    means = (onehot.T @ M) / onehot.sum(0)[:, None]
    return M - onehot @ means


@dataclass
class RowSet:
    """What every marker with the same usable rows shares: design, resamples, outcome parts."""

    keep: np.ndarray
    mode: str
    g: np.ndarray
    y: np.ndarray
    X: np.ndarray  # full reduced design (partial test)
    X0: np.ndarray  # marginal test design
    Z: np.ndarray  # LOGO covariate design (within-centred in within_groups)
    yz: np.ndarray  # outcome as the LOGO sees it (within-centred in within_groups)
    onehot: np.ndarray
    perms: np.ndarray | None
    weights: np.ndarray | None  # (B, n) row weights of the wild cluster bootstrap
    enumerated: bool
    n_resamples: int
    L_cov: np.ndarray
    r2_cov: float

    def resample(self, e: np.ndarray) -> np.ndarray:
        """``(B, n)`` resampled copies of the residual vector ``e``."""
        if self.perms is not None:
            return e[self.perms]
        return self.weights * e


def row_set(
    keep: np.ndarray, y_all: np.ndarray, C_all: np.ndarray, g_all: np.ndarray,
    s_all: np.ndarray | None, *, mode: str, n_resamples: int, rng: np.random.Generator,
) -> RowSet:
    """Design matrices, resamples and the covariate-only LOGO fit for the rows ``keep``."""
    _, g = np.unique(g_all[keep], return_inverse=True)
    y, C = y_all[keep], C_all[keep]
    n = y.size
    onehot = _onehot(g)
    one = np.ones((n, 1))
    fe = onehot[:, 1:]
    if mode in FIXED_EFFECTS:
        X, X0 = np.column_stack([one, C, fe]), np.column_stack([one, fe])
        Z, yz = _centre_within(C, onehot), _centre_within(y[:, None], onehot)[:, 0]
    else:
        X, X0 = np.column_stack([one, C]), one
        Z, yz = np.column_stack([one, C]), y
    perms = weights = None
    enumerated = False
    if mode == "cluster":
        V, enumerated = cluster_weights(int(g.max()) + 1, n_resamples, rng)
        weights = V[:, g]
    else:
        strata = g if mode == "within_groups" else None
        if s_all is not None:
            s = s_all[keep]
            strata = s if strata is None else np.unique(np.column_stack([strata, s]), axis=0,
                                                       return_inverse=True)[1].reshape(-1)
        perms = stratified_permutations(n, n_resamples, rng, strata)
    L_cov = logo_operator(Z, g)
    return RowSet(keep=keep, mode=mode, g=g, y=y, X=X, X0=X0, Z=Z, yz=yz, onehot=onehot,
                  perms=perms, weights=weights, enumerated=enumerated,
                  n_resamples=(weights if weights is not None else perms).shape[0],
                  L_cov=L_cov, r2_cov=_r2(yz, L_cov @ yz, mode))


def _sst(Y: np.ndarray, mode: str) -> np.ndarray | float:
    if mode in FIXED_EFFECTS:  # already centred within groups
        return np.asarray((Y * Y).sum(-1))
    c = Y - Y.mean(-1, keepdims=True)
    return np.asarray((c * c).sum(-1))


def _r2(y: np.ndarray, pred: np.ndarray, mode: str) -> float:
    e = y - pred
    return float(1.0 - (e @ e) / _sst(y, mode))


def _coef_test(
    m: np.ndarray, y: np.ndarray, X: np.ndarray, rs: RowSet, *, ci_alpha: float | None,
) -> dict[str, Any] | None:
    """Test of ``m``'s coefficient in ``y ~ X + m`` with the row set's resamples (+ its CI).

    Returns None when ``m`` is a linear function of ``X``'s columns.
    """
    kind = "cr1" if rs.mode == "cluster" else "hc3"
    f = FixedNull.build(m, X, kind, rs.g)
    scale = np.linalg.norm(m - m.mean()) or 1.0
    if f.em2 <= (1e-10 * scale) ** 2:
        return None
    ey = f.project(y[None, :])[0]
    beta, t = (float(v[0]) for v in f.t_stats(ey[None, :]))
    rss = f.rss(ey)
    Ey = f.project(rs.resample(ey))
    t_null = f.t_stats(Ey)[1]
    p = resample_pvalue(t, t_null, rs.enumerated)
    r = float(ey @ f.em / math.sqrt(f.em2 * float(ey @ ey))) if ey @ ey > 0 else math.nan
    out = {"r": r, "beta": beta, "t": t, "p": p, "em": f.em, "ey": ey,
           "df": m.size - (f.Q.shape[1] + 1), "low": math.nan, "high": math.nan}
    if ci_alpha is not None and math.isfinite(t) and t != 0:
        null_at = f.shifted_null(Ey, f.project(rs.resample(f.em)))
        se = abs(beta / t)

        def p_at(b0: float) -> float:
            return resample_pvalue((beta - b0) / se, null_at(b0), rs.enumerated)

        lo, hi = ci_by_inversion(p_at, beta, se, ci_alpha)
        out["low"], out["high"] = r_of_beta(lo, f.em2, rss), r_of_beta(hi, f.em2, rss)
    return out


def partial_p(m: np.ndarray, rs: RowSet) -> dict[str, float]:
    """Only the partial test's p and its MC SE (what the adaptive permutation rounds need)."""
    part = _coef_test(m, rs.y, rs.X, rs, ci_alpha=None)
    if part is None:
        return {}
    se = 0.0 if rs.enumerated else math.sqrt(part["p"] * (1 - part["p"]) / rs.n_resamples)
    return {"partial_p": part["p"], "partial_p_mcse": se}


def marker_stats(
    m: np.ndarray, rs: RowSet, *, confidence_level: float, mde_alpha: float,
    with_ci: bool = True,
) -> dict[str, Any]:
    """The statistics of one marker on its row set (Holm and verdicts are the caller's).

    ``with_ci=False`` skips the test-inversion CIs (the adaptive rounds need only p-values).
    """
    y, mode = rs.y, rs.mode
    ci_alpha = 1.0 - confidence_level if with_ci else None
    B = rs.n_resamples
    mcse = (lambda p: 0.0) if rs.enumerated else (lambda p: math.sqrt(p * (1.0 - p) / B))
    out: dict[str, Any] = {
        "spearman": float(sps.spearmanr(m, y).statistic),
        "pearson": float(np.corrcoef(m, y)[0, 1]),
        "n_permutations_used": B,
    }
    marg = _coef_test(m, y, rs.X0, rs, ci_alpha=ci_alpha)
    if marg is None:  # only possible when m is constant within every group
        out["reason"] = "the marker does not vary within groups: no within-group test"
        return out
    out.update(marginal_r=marg["r"], marginal_low=marg["low"], marginal_high=marg["high"],
               p=marg["p"], p_mcse=mcse(marg["p"]))
    if mode not in FIXED_EFFECTS:  # X0 = [1]: the marginal r is Pearson's r
        out.update(pearson_low=marg["low"], pearson_high=marg["high"])
    part = _coef_test(m, y, rs.X, rs, ci_alpha=ci_alpha)
    if part is None:
        out["reason"] = ("the marker is a linear function of the covariates"
                         + (" and groups" if mode in FIXED_EFFECTS else "")
                         + ": no partial correlation")
        out["partial_undefined"] = True
        return out
    out.update(partial_r=part["r"], partial_low=part["low"], partial_high=part["high"],
               partial_p=part["p"], partial_p_mcse=mcse(part["p"]), partial_t=part["t"],
               marker_residuals=tuple(part["em"].tolist()),
               outcome_residuals=tuple(part["ey"].tolist()),
               mde_partial_r=mde_partial_r(part["df"], mde_alpha))
    rank = _coef_test(sps.rankdata(m), sps.rankdata(y), rs.X, rs, ci_alpha=None)
    if rank is not None:
        out.update(partial_spearman=rank["r"], partial_spearman_p=rank["p"],
                   partial_spearman_p_mcse=mcse(rank["p"]))
    out.update(_oos(m, rs, part["ey"]))
    out["oos_p_mcse"] = mcse(out["oos_p"])
    return out


def _oos(m: np.ndarray, rs: RowSet, ey: np.ndarray) -> dict[str, float]:
    """Leave-one-group-out delta R^2 and its null under the partial test's resamples."""
    mode = rs.mode
    mz = _centre_within(m[:, None], rs.onehot)[:, 0] if mode in FIXED_EFFECTS else m
    L_full = logo_operator(np.column_stack([rs.Z, mz]), rs.g)
    r2_full = _r2(rs.yz, L_full @ rs.yz, mode)
    d = r2_full - rs.r2_cov
    Q = basis(rs.X)
    fit = Q @ (Q.T @ rs.y)
    Ystar = fit + rs.resample(ey)
    if mode in FIXED_EFFECTS:
        Ystar = _centre_within(Ystar.T, rs.onehot).T
    sst = _sst(Ystar, mode)
    ec = Ystar - Ystar @ rs.L_cov.T
    ef = Ystar - Ystar @ L_full.T
    with np.errstate(divide="ignore", invalid="ignore"):
        null = ((ec * ec).sum(1) - (ef * ef).sum(1)) / sst
    null = np.nan_to_num(null, nan=-np.inf)
    k = int(np.count_nonzero(null >= d - 1e-12 * max(1.0, abs(d))))
    p = k / null.size if rs.enumerated else (1 + k) / (1 + null.size)
    return {"r2_covariates": rs.r2_cov, "r2_full": r2_full, "delta_r2": d, "oos_p": p,
            "delta_r2_null95": float(np.quantile(null[np.isfinite(null)], 0.95))
            if np.isfinite(null).any() else math.nan}
