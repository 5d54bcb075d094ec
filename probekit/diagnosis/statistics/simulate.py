"""Simulated marker tables with a known partial effect, to calibrate :func:`marker_analysis`.

A population of ``n_seeds x n_levels x reps`` models: a few-level design knob (given as a text
column ``knob`` so that it is one-hot coded), a ``seed`` column, an outcome ``y`` and one
marker ``m``. With ``z_m``, ``z_e`` independent noises, ``u_s`` a seed random effect and ``k``
the knob's level in ``[0, 1]``::

    m = f(k) + a u_s + z_m
    y = g(k) + b u_s + rho z_m + sqrt(1 - rho^2) z_e

so the population partial correlation of ``m`` and ``y`` given the knob and the seed is
``rho`` (``rho = 0``: the null), while the marginal correlation is driven by the knob and the
shared seed effects. Scenarios:

- ``"seed_effects"``: a strong shared seed random effect (``a = b = 1.5``), linear knob;
- ``"nonlinear_knob"``: ``f``, ``g`` monotone nonlinear (``exp(3k)``, ``-k^3``), no seed effect;
- ``"heteroscedastic"``: noise SD ``1 + 3k`` for both, linear knob, seed effects;
- ``"heavy_tails"``: ``z_m``, ``z_e`` Student t with 3 degrees of freedom (scaled to unit
  variance), seed effects;
- ``"no_design"``: no knob or seed effect at all (the plain-OLS reference for power).
"""

from __future__ import annotations

import math

import numpy as np

__all__ = ["SCENARIOS", "simulate_population"]

SCENARIOS = ("seed_effects", "nonlinear_knob", "heteroscedastic", "heavy_tails", "no_design")


def _noise(rng: np.random.Generator, n: int, heavy: bool) -> np.ndarray:
    if heavy:
        return rng.standard_t(3, size=n) / math.sqrt(3.0)  # Var(t3) = 3
    return rng.normal(size=n)


def simulate_population(
    scenario: str, *, n: int = 20, n_seeds: int = 5, n_levels: int = 4, rho: float = 0.0,
    seed: int = 0,
) -> dict[str, list]:
    """One simulated marker table (columns ``seed``, ``knob``, ``y``, ``m``).

    Args:
        scenario: one of :data:`SCENARIOS`.
        n: models; a multiple of ``n_seeds * n_levels`` (each seed x level cell equally often).
        n_seeds: groups (seeds).
        n_levels: knob levels.
        rho: the planted partial correlation of ``m`` and ``y`` given knob and seed.
        seed: random seed.
    """
    if scenario not in SCENARIOS:
        raise ValueError(f"scenario must be one of {SCENARIOS}, got {scenario!r}")
    cell = n_seeds * n_levels
    if n % cell:
        raise ValueError(f"n={n} is not a multiple of n_seeds * n_levels = {cell}")
    rng = np.random.default_rng(seed)
    seeds = np.tile(np.repeat(np.arange(n_seeds), n_levels), n // cell)
    level = np.tile(np.arange(n_levels), n // n_levels)
    k = level / max(n_levels - 1, 1)
    heavy = scenario == "heavy_tails"
    zm, ze = _noise(rng, n, heavy), _noise(rng, n, heavy)
    sd = 1.0 + 3.0 * k if scenario == "heteroscedastic" else np.ones(n)
    u = rng.normal(size=n_seeds)[seeds]
    a = b = {"seed_effects": 1.5, "nonlinear_knob": 0.0, "no_design": 0.0}.get(scenario, 1.0)
    if scenario == "nonlinear_knob":
        f, g = np.exp(3.0 * k), -3.0 * k**3
    elif scenario == "no_design":
        f = g = np.zeros(n)
    else:
        f, g = 2.0 * k, -2.0 * k
    m = f + a * u + sd * zm
    y = g + b * u + sd * (rho * zm + math.sqrt(1.0 - rho * rho) * ze)
    return {"seed": seeds.tolist(), "knob": [f"L{v}" for v in level], "y": y.tolist(),
            "m": m.tolist()}
