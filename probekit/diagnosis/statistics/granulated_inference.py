"""Permutation nulls and bootstrap intervals of granulated Kendall tau and the CMI score.

Vectorised recomputation of :mod:`probekit.diagnosis.statistics.granulated`'s statistics for many
permuted markers (rows of ``M``) or many bootstrap weightings of the models (rows of ``W``).

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

import numpy as np
from jaxtyping import Float, Int

__all__ = ["PairSet", "cmi_scores", "group_weights", "pair_set", "permute_within", "tau_stat"]

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


def _entropy(c: np.ndarray, axis: tuple[int, ...] | int) -> np.ndarray:
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
        hm, hy = _entropy(J.sum(3), 2), _entropy(J.sum(2), 2)
        hj = _entropy(J.reshape(r, n_u, 9), 2)
        info = np.maximum((pk * (hm + hy - hj)).sum(1), 0.0)
        h = (pk * hy).sum(1)
        with np.errstate(invalid="ignore", divide="ignore"):
            score = np.where(h > 1e-12, np.minimum(info / h, 1.0), np.inf)
        best = np.minimum(best, score)
    return np.where(np.isfinite(best), best, np.nan)
