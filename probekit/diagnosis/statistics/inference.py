"""Design-respecting tests of one regression coefficient, vectorised over resamples.

The model is ``y = X gamma + beta m + u`` (``X`` holds the intercept, the covariate terms and,
in the within-groups design, the group fixed effects). Every statistic here is the studentised
OLS coefficient of ``m``; by Frisch-Waugh-Lovell, with ``H`` the projection on ``X``'s columns,
``e_m = (I - H) m`` and ``e = (I - H) y``::

    beta = e_m . e / |e_m|^2,      r = e - e_m beta  (full-model residuals)

- **HC3** (Long & Ervin 2000): ``var = sum_i e_m,i^2 r_i^2 / (1 - h_i)^2 / |e_m|^4`` with
  ``h_i`` the leverages of ``[X, m]`` (``h_i = H_ii + e_m,i^2 / |e_m|^2``).
- **CR1** (cluster-robust by group, the Stata / statsmodels small-sample factor):
  ``var = G/(G-1) (n-1)/(n-k) sum_g (sum_{i in g} e_m,i r_i)^2 / |e_m|^4``,
  ``k = rank([X, m])``.

Nulls (``H0: beta = b0`` is tested on ``y - b0 m``, so every CI below is the inversion of the
very test that gives the p-value):

- **Freedman & Lane (1983)**: the reduced model's residuals ``e`` are permuted (within strata),
  ``y* = H y + e[pi]``, so ``(I - H) y* = (I - H) e[pi]``; the HC3 t is recomputed for every
  permutation at once. Two-sided ``p = (1 + #{|t*| >= |t|}) / (1 + B)``.
- **Wild cluster restricted bootstrap** (WCR; Cameron, Gelbach & Miller 2008; MacKinnon &
  Webb 2017, 2018): ``y* = H y + v_g e`` with one weight ``v_g`` per group (Webb's six-point
  weights when ``G < 12``, Rademacher otherwise, all ``2^G`` Rademacher sign vectors when
  ``2^G <= B``); the CR1 t is recomputed. ``p = #{|t*| >= |t|} / 2^G`` when enumerated (the
  identity vector is among them), ``(1 + #{...}) / (1 + B)`` otherwise.

Everything is a matrix product over a ``(B, n)`` array of resampled residuals.
"""

from __future__ import annotations

import functools
import itertools
import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from jaxtyping import Float, Int
from scipy import optimize
from scipy import stats as sps

__all__ = [
    "FixedNull",
    "basis",
    "ci_by_inversion",
    "cluster_weights",
    "coefficient_t",
    "logo_operator",
    "mde_partial_r",
    "r_of_beta",
    "stratified_permutations",
]

_TIE = 1e-9  # relative: a resampled |t| within this of the observed counts as "at least as extreme"
_SINGULAR = 1e-10


def basis(X: Float[np.ndarray, "n q"]) -> Float[np.ndarray, "n k"]:
    """Orthonormal basis of the column space of ``X`` (rank-revealing SVD)."""
    if X.shape[1] == 0:
        return np.zeros((X.shape[0], 0))
    u, s, _ = np.linalg.svd(X, full_matrices=False)
    keep = s > s[0] * 1e-10 if s.size and s[0] > 0 else np.zeros(s.size, dtype=bool)
    return u[:, keep]


def stratified_permutations(
    n: int, n_permutations: int, rng: np.random.Generator,
    strata: Int[np.ndarray, " n"] | None = None,
) -> Int[np.ndarray, "perm n"]:
    """``n_permutations`` uniform permutations of ``range(n)`` (one per row), within ``strata``."""
    out = np.tile(np.arange(n), (n_permutations, 1))
    if strata is None:
        return rng.permuted(out, axis=1)
    for k in np.unique(strata):
        idx = np.flatnonzero(strata == k)
        out[:, idx] = idx[rng.permuted(np.tile(np.arange(idx.size), (n_permutations, 1)), axis=1)]
    return out


def cluster_weights(
    n_groups: int, n_draws: int, rng: np.random.Generator
) -> tuple[Float[np.ndarray, "draws G"], bool]:
    """Wild cluster bootstrap weights, one row per draw, and whether they are enumerated.

    Webb's six-point distribution (``+-sqrt(1/2), +-1, +-sqrt(3/2)``, equal mass; Webb 2013,
    MacKinnon & Webb 2018) when ``n_groups < 12``; Rademacher signs otherwise, all ``2^G`` sign
    vectors (in ``itertools.product([-1, 1], repeat=G)`` order) when ``2^G <= n_draws``.
    """
    if n_groups < 12:
        pts = np.sqrt(np.array([3.0, 2.0, 1.0]) / 2.0)
        return rng.choice(np.concatenate([-pts, pts[::-1]]), size=(n_draws, n_groups)), False
    if 2**n_groups <= n_draws:
        return np.array(list(itertools.product([-1.0, 1.0], repeat=n_groups))), True
    return rng.choice([-1.0, 1.0], size=(n_draws, n_groups)), False


@dataclass(frozen=True)
class FixedNull:
    """The parts of one coefficient test that do not depend on the resamples.

    Built by :meth:`build` from ``m``, ``X`` and (for CR1) the group codes; then
    :meth:`t_stats` gives the studentised coefficient of any ``(B, n)`` stack of outcome
    residual vectors already orthogonal to ``X``.
    """

    em: np.ndarray  # (I - H) m
    em2: float  # |e_m|^2
    Q: np.ndarray  # basis of X
    kind: str  # "hc3" or "cr1"
    lev_scale: np.ndarray  # HC3: 1 / (1 - h_i)^2 (0 where h_i = 1); CR1: unused
    onehot: np.ndarray | None  # CR1: (n, G) group indicators
    ssc: float  # CR1 small-sample factor

    @classmethod
    def build(cls, m: Float[np.ndarray, " n"], X: Float[np.ndarray, "n q"], kind: str,
              groups: Int[np.ndarray, " n"] | None = None) -> FixedNull:
        """Project ``m`` off ``X`` and precompute the HC3 leverages or the CR1 group sums."""
        Q = basis(X)
        em = m - Q @ (Q.T @ m)
        em2 = float(em @ em)
        n = m.size
        if kind == "hc3":
            h = (Q * Q).sum(1) + em * em / em2
            one_minus = 1.0 - h
            lev = np.where(one_minus > _SINGULAR, 1.0 / np.where(one_minus > _SINGULAR,
                                                                  one_minus, 1.0) ** 2, 0.0)
            return cls(em=em, em2=em2, Q=Q, kind=kind, lev_scale=lev, onehot=None, ssc=1.0)
        if kind != "cr1" or groups is None:
            raise ValueError(f"kind must be 'hc3' or 'cr1' (with groups), got {kind!r}")
        _, g = np.unique(groups, return_inverse=True)
        G = int(g.max()) + 1
        onehot = np.zeros((n, G))
        onehot[np.arange(n), g] = 1.0
        k = Q.shape[1] + 1
        ssc = G / (G - 1) * (n - 1) / (n - k)
        return cls(em=em, em2=em2, Q=Q, kind=kind, lev_scale=np.zeros(0), onehot=onehot, ssc=ssc)

    def project(self, E: Float[np.ndarray, "B n"]) -> Float[np.ndarray, "B n"]:
        """``(I - H)`` applied to every row of ``E``."""
        return E - (E @ self.Q) @ self.Q.T

    def t_stats(self, E: Float[np.ndarray, "B n"]) -> tuple[np.ndarray, np.ndarray]:
        """``(beta, t)`` of the coefficient of ``m`` for each outcome-residual row of ``E``.

        ``E`` rows must be orthogonal to ``X`` (``(I - H) y*``).
        """
        beta = (E @ self.em) / self.em2
        R = E - beta[:, None] * self.em
        if self.kind == "hc3":
            var = ((R * R) @ (self.em * self.em * self.lev_scale)) / self.em2**2
        else:
            S = (R * self.em) @ self.onehot
            var = self.ssc * (S * S).sum(1) / self.em2**2
        with np.errstate(divide="ignore", invalid="ignore"):
            t = beta / np.sqrt(var)
        return beta, t

    def rss(self, e: Float[np.ndarray, " n"]) -> float:
        """Residual sum of squares of the full model for outcome residuals ``e``."""
        beta = float(e @ self.em) / self.em2
        r = e - beta * self.em
        return float(r @ r)



    def shifted_null(
        self, Ey: Float[np.ndarray, "B n"], Em: Float[np.ndarray, "B n"]
    ) -> Callable[[float], np.ndarray]:
        """``b0 -> t`` of every resample of ``H0: beta = b0``, i.e. of the rows ``Ey - b0 Em``.

        ``Ey``, ``Em``: the resampled, projected residuals of ``y`` and of ``m``. The residual
        ``R = Ey - b0 Em - beta* e_m`` is linear in ``b0`` and ``beta*``, so the HC3 / CR1 sums
        are quadratic forms of per-resample sums computed once: each ``b0`` then costs
        ``O(B)`` (``O(B G)`` for CR1), which makes the CI bisection cheap.
        """
        em, em2 = self.em, self.em2
        by, bm = (Ey @ em) / em2, (Em @ em) / em2
        if self.kind == "hc3":
            w = em * em * self.lev_scale
            yy, mm, ym = (Ey * Ey) @ w, (Em * Em) @ w, (Ey * Em) @ w
            ye, me, ee = (Ey * em) @ w, (Em * em) @ w, float((em * em) @ w)

            def at(b0: float) -> np.ndarray:
                beta = by - b0 * bm
                ss = (yy + b0 * b0 * mm + beta * beta * ee - 2 * b0 * ym - 2 * beta * ye
                      + 2 * b0 * beta * me)
                with np.errstate(divide="ignore", invalid="ignore"):
                    return beta / np.sqrt(np.maximum(ss, 0.0) / em2**2)

            return at
        Ay, Am = (Ey * em) @ self.onehot, (Em * em) @ self.onehot
        Eg = (em * em) @ self.onehot

        def at_cr1(b0: float) -> np.ndarray:
            beta = by - b0 * bm
            S = Ay - b0 * Am - beta[:, None] * Eg
            with np.errstate(divide="ignore", invalid="ignore"):
                return beta / np.sqrt(self.ssc * (S * S).sum(1) / em2**2)

        return at_cr1


def coefficient_t(
    m: Float[np.ndarray, " n"], y: Float[np.ndarray, " n"], X: Float[np.ndarray, "n q"],
    kind: str = "hc3", groups: Int[np.ndarray, " n"] | None = None,
) -> tuple[float, float]:
    """``(beta, t)`` of ``m`` in the OLS fit ``y ~ X + m`` with the HC3 or CR1 standard error."""
    f = FixedNull.build(m, X, kind, groups)
    beta, t = f.t_stats(f.project(y[None, :]))
    return float(beta[0]), float(t[0])


def resample_pvalue(t_obs: float, t_null: np.ndarray, enumerated: bool = False) -> float:
    """Two-sided p of ``t_obs`` against resampled statistics (see the module docstring)."""
    a = np.nan_to_num(np.abs(t_null), nan=0.0)
    k = int(np.count_nonzero(a >= abs(t_obs) * (1.0 - _TIE)))
    if enumerated:
        return k / t_null.size
    return (1 + k) / (1 + t_null.size)


def ci_by_inversion(
    pvalue_at: Callable[[float], float], beta_hat: float, se: float, alpha: float, *, tol: float = 1e-5,
) -> tuple[float, float]:
    """``{b0 : p(b0) > alpha}`` as an interval, by bracketing and bisection on each side.

    ``pvalue_at(b0)`` is the p-value of the same test run for ``H0: beta = b0``. The bound on
    each side is the point where ``p`` crosses ``alpha`` nearest to ``beta_hat`` (the test
    accepts ``beta_hat`` itself); an unbounded side (``p`` above ``alpha`` as far as 1e6
    standard errors) is ``-inf`` / ``+inf``.
    """
    if not (math.isfinite(beta_hat) and math.isfinite(se) and se > 0):
        return math.nan, math.nan
    out = []
    for sign in (-1.0, 1.0):
        inner, step = 0.0, 1.0
        outer = None
        while step <= 1e6:
            if pvalue_at(beta_hat + sign * step * se) <= alpha:
                outer = step
                break
            inner, step = step, step * 2.0
        if outer is None:
            out.append(sign * math.inf)
            continue
        while (outer - inner) > tol * max(1.0, outer):
            mid = 0.5 * (inner + outer)
            if pvalue_at(beta_hat + sign * mid * se) <= alpha:
                outer = mid
            else:
                inner = mid
        out.append(beta_hat + sign * 0.5 * (inner + outer) * se)
    return out[0], out[1]


def r_of_beta(b: float, em2: float, rss_full: float) -> float:
    """The partial-r scale of a coefficient: ``r(b) = b |e_m| / sqrt(b^2 |e_m|^2 + RSS_full)``.

    ``RSS_full`` is the observed full model's residual sum of squares. Since
    ``|e_y|^2 = beta_hat^2 |e_m|^2 + RSS_full``, ``r(beta_hat) = e_m . e_y / (|e_m| |e_y|)``,
    the observed partial r; ``r`` increases with ``b``, so it maps a CI of ``beta`` to one of r.
    """
    if math.isinf(b):
        return math.copysign(1.0, b)
    if not math.isfinite(b):
        return math.nan
    num = b * math.sqrt(em2)
    den = math.sqrt(b * b * em2 + rss_full)
    return num / den if den > 0 else math.copysign(1.0, b)


@functools.lru_cache(maxsize=256)
def mde_partial_r(df: int, alpha: float, power: float = 0.8) -> float:
    """Smallest |partial r| a two-sided t test at level ``alpha`` detects with ``power``.

    Under normal errors the OLS t of the coefficient is noncentral t with ``df = n - rank([X,
    m])`` and noncentrality ``lambda = sqrt(df) r / sqrt(1 - r^2)``; solve
    ``P(|T'| > t_{1 - alpha/2}) = power`` for ``lambda`` and return
    ``r = lambda / sqrt(lambda^2 + df)``.
    """
    if df < 1:
        return math.nan
    crit = sps.t.ppf(1.0 - alpha / 2.0, df)

    def gap(lam: float) -> float:
        val = sps.nct.sf(crit, df, lam) + sps.nct.cdf(-crit, df, lam)
        if not math.isfinite(val):  # scipy's nct fails for some (df, lambda): normal approx.
            val = sps.norm.sf(crit - lam) + sps.norm.cdf(-crit - lam)
        return val - power

    hi = 1.0
    while gap(hi) < 0 and hi < 1e4:
        hi *= 2.0
    lam = optimize.brentq(gap, 0.0, hi, xtol=1e-10)
    return float(lam / math.sqrt(lam * lam + df))


def logo_operator(
    Z: Float[np.ndarray, "n p"], groups: Int[np.ndarray, " n"]
) -> Float[np.ndarray, "n n"]:
    """``L`` with ``pred = L y`` the leave-one-group-out OLS predictions of ``y`` from ``Z``.

    Row block ``g``: ``I_g - (I - H_gg)^{-1} (I - H)_g`` from the full fit's hat matrix ``H``
    (zero on the group's own columns); when the other groups do not span ``Z``, ``Z_g
    pinv(Z_{-g})`` on the other groups' columns (minimum-norm least squares).
    """
    n = Z.shape[0]
    L = np.zeros((n, n))
    if Z.shape[1] == 0:
        return L
    Q = basis(Z)
    full_rank = Q.shape[1] == Z.shape[1]
    M = np.eye(n) - Q @ Q.T  # I - H: residual maker of the full fit
    for k in np.unique(groups):
        test = np.flatnonzero(groups == k)
        A = M[np.ix_(test, test)]  # I - H_gg
        if full_rank and np.linalg.svd(A, compute_uv=False).min() > 1e-8:
            # held-out residuals (I - H_gg)^{-1} e_g (exact for OLS; Hastie et al. 2009, 7.10)
            L[test] = -np.linalg.solve(A, M[test])
            L[test, test] += 1.0
        else:  # the other groups do not span Z: minimum-norm least squares on them
            train = groups != k
            L[np.ix_(test, train)] = Z[test] @ np.linalg.pinv(Z[train], rcond=1e-10)
    return L
