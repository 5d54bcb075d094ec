"""Simulated causal populations with a known first stage and known paths.

They calibrate the weak-instrument flag (:mod:`.iv`) and the mediation intervals
(:mod:`.mediation`).

A population of ``n_seeds x len(levels) x reps`` models: a grid knob ``z`` (set by the design,
so independent of everything else), a ``seed`` column, a marker ``m`` and an outcome ``y``.
With ``u_s``, ``w_s`` seed random effects, ``e``, ``v`` model noises (all independent standard
normal) and ``z~`` the knob's deviation from its mean::

    m = a z + u_s + v
    y = b m + c z + w_s + u_s + rho_uv v + sqrt(1 - rho_uv^2) e

- ``rho_uv = 0`` (default for :func:`simulate_mediation`): no confounder of ``m`` and ``y``
  beyond the seed (absorbed by the seed fixed effects), so every assumption of the mediation
  (sequential ignorability, linear models, no knob x marker interaction) holds: the indirect
  effect of moving the knob from its lowest to its highest level is ``a b d``, the direct
  ``c d`` (``d`` the range of ``z``).
- ``rho_uv != 0`` (:func:`simulate_instrument`): ``v`` confounds ``m`` and ``y`` (OLS of ``y``
  on ``m`` is biased), ``c = 0`` (exclusion holds) and ``b`` is the IV estimand.

The **concentration parameter** of the first stage given the seed fixed effects is
``mu^2 = a^2 |z~|^2`` (``Var v = 1``); :func:`simulate_instrument` sets ``a`` from the
concentration asked for, so ``mu^2 ~ 3`` is a weak instrument (Staiger & Stock 1997: the 2SLS
bias relative to OLS is about ``1 / mu^2``), ``mu^2 ~ 100`` a strong one.
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["simulate_instrument", "simulate_mediation"]


def _grid(n_seeds: int, levels: tuple[float, ...], reps: int) -> tuple[np.ndarray, np.ndarray]:
    seeds = np.repeat(np.arange(n_seeds), len(levels) * reps)
    z = np.tile(np.repeat(np.asarray(levels, dtype=float), reps), n_seeds)
    return seeds, z


def _population(seeds: np.ndarray, z: np.ndarray, a: float, b: float, c: float, rho_uv: float,
                rng: np.random.Generator) -> dict[str, list]:
    n, G = z.size, int(seeds.max()) + 1
    u, w = rng.normal(size=G)[seeds], rng.normal(size=G)[seeds]
    v, e = rng.normal(size=n), rng.normal(size=n)
    m = a * z + u + v
    y = b * m + c * z + w + u + rho_uv * v + math.sqrt(1.0 - rho_uv * rho_uv) * e
    return {"seed": seeds.tolist(), "z": z.tolist(), "m": m.tolist(), "y": y.tolist()}


def simulate_instrument(
    *, concentration: float, n_seeds: int = 5, levels: tuple[float, ...] = (0.0, 0.1, 0.2),
    reps: int = 2, beta: float = 0.5, rho_uv: float = 0.6, seed: int = 0,
) -> dict[str, list]:
    """One IV population (columns ``seed``, ``z``, ``m``, ``y``), first-stage ``mu^2`` given.

    ``concentration``: ``mu^2`` given the seed fixed effects (module docstring).
    """
    if not 0.0 <= rho_uv < 1.0:
        raise ValueError(f"rho_uv must be in [0, 1), got {rho_uv}")
    seeds, z = _grid(n_seeds, levels, reps)
    zt = z - np.array([z[seeds == s].mean() for s in range(n_seeds)])[seeds]
    a = math.sqrt(concentration / float(zt @ zt))
    return _population(seeds, z, a, beta, 0.0, rho_uv, np.random.default_rng(seed))


def simulate_mediation(
    *, a: float = 1.0, b: float = 0.5, c: float = 0.25, n_seeds: int = 5,
    levels: tuple[float, ...] = (0.0, 1.0, 2.0), reps: int = 2, seed: int = 0,
) -> dict[str, list]:
    """One mediation population (columns ``seed``, ``z``, ``m``, ``y``), every assumption held.

    Indirect effect ``a b d``, direct ``c d`` over the knob's range ``d``.
    """
    seeds, z = _grid(n_seeds, levels, reps)
    return _population(seeds, z, a, b, c, 0.0, np.random.default_rng(seed))
