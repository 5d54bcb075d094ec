"""Power of the report's partial test on a design, simulated (the engine of the MDE and ``--plan``).

The partial test of :func:`~probekit.diagnosis.marker_analysis` is the OLS coefficient of a
marker ``m`` in ``y ~ X + m``, studentised with HC3 (Long & Ervin 2000), its p from Freedman &
Lane (1983) permutations of the reduced model's residuals (within the groups in the default
``within_groups`` design, where ``X = [1, C, group fixed effects]``; over all models without
groups, ``X = [1, C]``). The statistic and every permuted copy depend on ``y`` and ``m`` only
through their residuals ``(I - H) y`` and ``(I - H) m`` (``H``: the projection on ``X``), so a
population with a true partial correlation ``rho`` of ``m`` and ``y`` given ``X`` is simulated by
drawing the residual parts only::

    y = z_y,   m = rho z_y + sqrt(1 - rho^2) z_p,   z_y, z_p iid N(0, I_n)

(any design part ``X b`` of ``y`` or ``m``, and any seed random effect in the within-groups
design, is removed exactly by the projection and changes nothing). For each simulation ``s`` the
design is drawn (:func:`simulated_power`'s ``draw_covariates``: a measured covariate differs
between simulations; a pool of realisations is used in turn), ``B`` permutations within groups
are taken (from a pool of :data:`PERMUTATION_SETS` independent sets, used in turn: drawing
them costs as much as the test), and the test is run for every planted ``rho`` on the same draws (common random numbers: the power curve is smooth in ``rho``).
A marker counts as detected when its permutation p ``(1 + #{|t*| >= |t|}) / (1 + B)`` is at most
``level``; the report's level for one of ``K`` markers under Holm is ``alpha / K`` (the smallest
p must clear ``alpha / K`` before any marker is rejected).

Power at ``rho`` is the detection rate over ``S`` simulations, with Monte Carlo SE
``sqrt(p (1 - p) / S)``. The 80 %-power partial r (the minimum detectable effect, MDE) is read
off the curve ``(0, size), (rho_1, power_1), ...`` by linear interpolation at its first crossing of
0.8; its Monte Carlo SE is the power's SE at the crossing divided by the curve's slope there
(delta method). Linear interpolation on the concave top of a power curve lands at or above the
true crossing, so the reported MDE errs towards the conservative side.

Why not the classical formula (:func:`.inference.mde_partial_r`, a noncentral t with
``df = n - rank([X, m])``): HC3 and the permutation p at a small ``alpha / K`` lose power against
the exact t test in populations of tens of models; at the classical MDE the simulated test has
65-74 % power, not 80 %, on the shipped designs.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from jaxtyping import Float, Int

from probekit.errors import ConfigError

from .inference import basis, mde_partial_r, stratified_permutations

__all__ = ["PowerCurve", "auto_permutations", "effect_grid", "power_crossing", "simulated_power"]

_TIE = 1e-9  # as in inference.resample_pvalue
_SINGULAR = 1e-10
#: power the minimum detectable effect is read at
TARGET_POWER = 0.8
#: independent permutation sets drawn once and used in turn by the simulations (drawing them
#: costs as much as the test itself; a p-value is valid for any set of uniform permutations)
PERMUTATION_SETS = 16


@dataclass(frozen=True, kw_only=True)
class PowerCurve:
    """Simulated power of the partial test at a given level, per planted partial r.

    Attributes:
        effects: 0 and the planted partial correlations, increasing.
        power: detection rate per effect (the size at 0).
        power_se: Monte Carlo SE of each rate.
        mde: the 80 %-power partial r (NaN: not reached on the grid).
        mde_se: its Monte Carlo SE (delta method; NaN when ``mde`` is).
        classical_mde: the noncentral-t formula's value for the same df and level, for reference.
        level: the per-marker level tested at (``alpha / K``).
        n_models, n_groups, df: models, groups and residual df ``n - rank([X, m])``.
        n_simulations, n_permutations: Monte Carlo sizes.
        inference: ``"within_groups"`` or ``"models"``.
        seconds: wall time.
    """

    effects: tuple[float, ...]
    power: tuple[float, ...]
    power_se: tuple[float, ...]
    mde: float
    mde_se: float
    classical_mde: float
    level: float
    n_models: int
    n_groups: int
    df: int
    n_simulations: int
    n_permutations: int
    inference: str
    seconds: float = 0.0

    def power_at(self, effect: float) -> float:
        """Power at ``effect`` interpolated linearly on the simulated curve."""
        return float(np.interp(effect, self.effects, self.power))

    def to_dict(self) -> dict[str, object]:
        """Plain-JSON form (NaN -> None)."""
        def clean(v: object) -> object:
            if isinstance(v, float) and not math.isfinite(v):
                return None
            if isinstance(v, tuple):
                return [clean(x) for x in v]
            return v

        return {k: clean(getattr(self, k)) for k in self.__dataclass_fields__}


def power_crossing(effects: Sequence[float], power: Sequence[float],
                   target: float = TARGET_POWER) -> tuple[float, int]:
    """First ``effect`` where the piecewise-linear curve reaches ``target``, and its segment.

    Returns ``(nan, -1)`` when no point reaches ``target`` (or the first one already does: a
    size of ``target`` at 0 means the curve is not a power curve).
    """
    for i in range(1, len(effects)):
        p0, p1 = power[i - 1], power[i]
        if p1 >= target > p0:
            return float(effects[i - 1] + (target - p0) * (effects[i] - effects[i - 1])
                         / (p1 - p0)), i
    return math.nan, -1


def auto_permutations(level: float, tail: int = 10) -> int:
    """Permutations ``B`` with ``level (B + 1) >= tail`` (at least 199, of the form ``100 k - 1``).

    A permutation p resolves a threshold ``level`` to within about ``1 / tail`` of its value
    when ``tail`` permuted statistics lie beyond it; the report's own adaptive doubling resolves
    p near a Holm threshold at least as finely.
    """
    if not 0.0 < level < 1.0:
        raise ConfigError(f"level must be in (0, 1), got {level}")
    need = math.ceil(tail / level)
    return max(199, 100 * math.ceil(need / 100) - 1)


def effect_grid(df: int, level: float, n_points: int = 12) -> tuple[float, ...]:
    """Planted effects bracketing the crossing: the classical MDE ``r0`` times 0.55..1.65.

    The simulated MDE lies above ``r0`` (HC3 and permutations lose power), rarely by more than
    a third; effects are kept inside (0, 0.99].
    """
    r0 = mde_partial_r(df, level) if df >= 1 else 0.9
    if not math.isfinite(r0):
        r0 = 0.9
    raw = r0 * np.linspace(0.55, 1.65, n_points)
    eff = sorted({round(float(min(max(e, 0.01), 0.99)), 4) for e in raw})
    return tuple(eff)


def _group_basis(g: np.ndarray) -> np.ndarray:
    """Orthonormal basis of the group indicators (columns ``1_g / sqrt(n_g)``)."""
    _, codes, counts = np.unique(g, return_inverse=True, return_counts=True)
    out = np.zeros((g.size, counts.size))
    out[np.arange(g.size), codes] = 1.0 / np.sqrt(counts[codes])
    return out


def _split_basis(C: np.ndarray, QD: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(Qc, h0)``: a basis of ``[1, C, D]`` beyond the groups' span ``QD``, and its leverages.

    ``[1, C, D]``'s column space is ``span(QD) + span((I - P_D) C)`` (the intercept lies in the
    span of the group indicators), orthogonal pieces; ``h0 = diag(H)`` sums both parts.
    """
    Cc = C - QD @ (QD.T @ C) if C.shape[1] else C
    Qc = basis(Cc) if C.shape[1] else np.zeros((C.shape[0], 0))
    return Qc, (QD * QD).sum(1) + (Qc * Qc).sum(1)


def _abs_t(
    Qc: Float[np.ndarray, "n k"], QD: Float[np.ndarray, "n G"], h0: Float[np.ndarray, " n"],
    zy: np.ndarray, zp: np.ndarray, perms: Int[np.ndarray, "B n"], rho: Float[np.ndarray, " J"],
) -> Float[np.ndarray, "B1 J"]:
    """``|t|`` of every planted effect (columns) on the observed (row 0) and permuted residuals.

    The HC3 t of :class:`.inference.FixedNull` for every ``rho`` and every permutation at once:
    with ``W_j = e_m,j^2 / (1 - h_j)^2`` (``h_j``: leverages of ``[X, m_j]``) the HC3 variance of a
    residual row ``E`` is ``((E^2) W_j - 2 b (E (e_m,j W_j)) + b^2 sum(e_m,j^2 W_j)) / |e_m,j|^4``
    with ``b = E e_m,j / |e_m,j|^2``: three matrix products for all effects. A permutation within
    groups keeps the group sums of ``e_y`` (all 0), so the permuted rows need projecting off
    ``Qc`` only (the covariates' part beyond the groups).
    """
    def project(v: np.ndarray) -> np.ndarray:
        v = v - QD @ (QD.T @ v)
        return v - Qc @ (Qc.T @ v)

    ey, ep = project(zy), project(zp)
    E = ey[perms]
    if Qc.shape[1]:
        E -= (E @ Qc) @ Qc.T
    E = np.vstack([ey[None, :], E])  # row 0: the observed residuals
    EM = rho[:, None] * ey[None, :] + np.sqrt(1.0 - rho * rho)[:, None] * ep[None, :]  # (J, n)
    em2 = (EM * EM).sum(1)
    one_minus = 1.0 - (h0[None, :] + EM * EM / em2[:, None])
    safe = np.where(one_minus > _SINGULAR, one_minus, 1.0)
    W = EM * EM * np.where(one_minus > _SINGULAR, 1.0 / safe**2, 0.0)  # (J, n)
    beta = (E @ EM.T) / em2  # (B+1, J)
    ss = (E * E) @ W.T - 2.0 * beta * (E @ (EM * W).T) + beta * beta * (EM * EM * W).sum(1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = np.abs(beta / np.sqrt(np.maximum(ss, 0.0) / em2**2))
    return np.nan_to_num(t, nan=0.0)


def _detections(
    Qc: np.ndarray, QD: np.ndarray, h0: np.ndarray, zy: np.ndarray, zp: np.ndarray,
    perms: np.ndarray, rho: np.ndarray, level: float,
) -> np.ndarray:
    """Whether each planted effect's permutation p ``(1 + #{|t*| >= |t|}) / (1 + B)`` <= ``level``."""
    t = _abs_t(Qc, QD, h0, zy, zp, perms, rho)
    k = (t[1:] >= t[0] * (1.0 - _TIE)).sum(0)
    return (1.0 + k) / (1.0 + perms.shape[0]) <= level


def simulated_power(
    draw_covariates: Callable[[np.random.Generator], Float[np.ndarray, "n p"]] | np.ndarray,
    groups: Int[np.ndarray, " n"] | None,
    *,
    level: float,
    effects: Sequence[float] | None = None,
    n_simulations: int = 400,
    n_permutations: int | None = None,
    n_designs: int = 20,
    seed: int = 0,
) -> PowerCurve:
    """Power of the report's partial test on a design, per planted partial r (module docstring).

    Args:
        draw_covariates: the coded covariate terms (no intercept, no group columns), as
            :meth:`MarkerTable.design` codes them: a fixed ``(n, p)`` matrix, or ``rng -> C`` for
            a design with measured covariates (a different realisation per simulated
            population; ``n_designs`` realisations are drawn and used in turn).
        groups: group code per model (the within-groups design: fixed effects and permutations
            within groups); None: the models are the unit.
        level: the per-marker level (``alpha / K``).
        effects: planted partial correlations in (0, 1); None: :func:`effect_grid` around the
            classical MDE.
        n_simulations: simulated populations (Monte Carlo SE of 80 % power: 2 points at 400).
        n_permutations: Freedman-Lane permutations per test; None: :func:`auto_permutations`.
        n_designs: realisations of a drawn design (each costs a spline basis; ignored for a
            fixed matrix).
        seed: seeds every draw.

    Raises:
        ConfigError: a level outside (0, 1), effects outside (0, 1), too few simulations, no
            residual degree of freedom.
    """
    from threadpoolctl import threadpool_limits

    from probekit.stats.limits import MAX_SIMULATIONS
    from probekit.stats.permutation import check_n_permutations

    if not 0.0 < level < 1.0:
        raise ConfigError(f"level must be in (0, 1), got {level}")
    check_n_permutations(n_simulations, name="n_simulations", bound=MAX_SIMULATIONS)
    B = auto_permutations(level) if n_permutations is None else int(n_permutations)
    check_n_permutations(B)
    start = time.perf_counter()
    rng = np.random.default_rng([seed, 0x9A7])
    if callable(draw_covariates):
        draws = [np.asarray(draw_covariates(rng), dtype=np.float64)
                 for _ in range(max(1, min(int(n_designs), int(n_simulations))))]
    else:
        draws = [np.asarray(draw_covariates, dtype=np.float64)]
    n = draws[0].shape[0]
    draws = [C.reshape(n, -1) for C in draws]
    QD = _group_basis(groups if groups is not None else np.zeros(n, dtype=np.int64))
    splits = [_split_basis(C, QD) for C in draws]
    rank = QD.shape[1] + max(Qc.shape[1] for Qc, _ in splits)
    df = n - rank - 1
    if df < 2:
        raise ConfigError(f"{n} models leave {df} residual degrees of freedom for {rank} "
                          "regression terms; add models (seeds) or drop covariates")
    eff = effect_grid(df, level) if effects is None else tuple(sorted(float(e) for e in effects))
    bad = [e for e in eff if not 0.0 < e < 1.0]
    if bad or not eff:
        raise ConfigError(f"effect {bad[0] if bad else None!r}: planted partial correlations "
                          "must lie in (0, 1)")
    rho = np.array((0.0, *eff))
    hits = np.zeros(rho.size)
    S = int(n_simulations)
    with threadpool_limits(limits=1, user_api="blas"):  # small matrices: one thread is fastest
        pool = [stratified_permutations(n, B, rng, groups)
                for _ in range(min(PERMUTATION_SETS, S))]
        for k in range(S):
            Qc, h0 = splits[k % len(splits)]
            zy, zp = rng.standard_normal((2, n))
            hits += _detections(Qc, QD, h0, zy, zp, pool[k % len(pool)], rho, level)
    power = hits / S
    se = np.sqrt(power * (1.0 - power) / S)
    mde, seg = power_crossing(rho.tolist(), power.tolist())
    mde_se = math.nan
    if seg > 0:
        slope = (power[seg] - power[seg - 1]) / (rho[seg] - rho[seg - 1])
        mde_se = math.sqrt(TARGET_POWER * (1 - TARGET_POWER) / S) / slope if slope > 0 else math.nan
    return PowerCurve(
        effects=tuple(float(r) for r in rho), power=tuple(float(p) for p in power),
        power_se=tuple(float(s) for s in se), mde=mde, mde_se=float(mde_se),
        classical_mde=mde_partial_r(df, level), level=float(level), n_models=n,
        n_groups=QD.shape[1] if groups is not None else n, df=int(df),
        n_simulations=S, n_permutations=B, inference="within_groups" if groups is not None
        else "models", seconds=round(time.perf_counter() - start, 3))
