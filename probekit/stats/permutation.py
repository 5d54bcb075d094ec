"""Permutation tests (labels shuffled, statistic recomputed; see probes.permutation for probes).

p-value (Phipson & Smyth 2010; probes.md): ``p = (1 + #{null >= observed}) / (1 + n_perm)``,
which is exact-level (never below the true p) for any number of permutations.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Literal

import numpy as np
from jaxtyping import Float

from probekit.errors import ConfigError, DataError, KeyedValueError, NonFiniteError

from .limits import MAX_PERMUTATIONS
from .result import StatTestResult

__all__ = [
    "MAX_PERMUTATIONS",
    "check_n_permutations",
    "check_seed",
    "mc_se",
    "n_permutations_for",
    "permutation_pvalue",
    "permutation_result",
    "permutation_test",
]

Alternative = Literal["greater", "less", "two-sided"]


def permutation_pvalue(
    observed: float, null: Float[np.ndarray, " n_perm"], alternative: Alternative = "greater"
) -> float:
    """``(1 + #{null at least as extreme}) / (1 + n_perm)``.

    ``"two-sided"`` measures extremeness as ``|s - mean(null)|``.
    """
    null = np.asarray(null, dtype=np.float64)
    if null.size == 0:
        raise DataError("null holds no permutation statistics; run at least one permutation")
    if not np.isfinite(observed) or not np.isfinite(null).all():
        raise NonFiniteError(f"observed={observed!r} or a null statistic is NaN/inf; a p-value of "
                             "a non-finite statistic is meaningless: fix the score function")
    if alternative == "greater":
        k = np.count_nonzero(null >= observed)
    elif alternative == "less":
        k = np.count_nonzero(null <= observed)
    elif alternative == "two-sided":
        c = null.mean()
        k = np.count_nonzero(np.abs(null - c) >= abs(observed - c))
    else:
        raise ConfigError(
            f"alternative must be 'greater', 'less' or 'two-sided', got {alternative!r}"
        )
    return float((1 + k) / (1 + null.size))


def permutation_result(
    observed: float,
    null: Float[np.ndarray, " n_perm"],
    n: int,
    method: str,
    alt: Alternative = "greater",
) -> StatTestResult:
    """A :class:`StatTestResult` for ``observed`` against the permutation ``null``.

    p-value by :func:`permutation_pvalue`; effect size ``(observed - mean(null)) / sd(null)``
    (``z_vs_null``, NaN for a degenerate null); ``n`` is the number of observations.
    """
    sd = null.std(ddof=1) if null.size > 1 else np.nan
    return StatTestResult(
        statistic=float(observed),
        p_value=permutation_pvalue(observed, null, alt),
        n=n,
        method=method,
        alternative=alt,
        effect_size=float((observed - null.mean()) / sd) if sd and sd > 0 else np.nan,
        effect_size_name="z_vs_null",
        null_distribution=null,
    )


def mc_se(p: float, n_permutations: int) -> float:
    """Monte-Carlo standard error of a permutation p-value: ``sqrt(p (1 - p) / B)``.

    The binomial standard error of a proportion estimated from ``B = n_permutations`` random
    permutations (e.g. Ernst 2004, "Permutation methods: a basis for exact inference",
    Statistical Science 19(4)): how far ``p`` may sit from the p of all permutations.

    Raises:
        ConfigError: ``p`` outside [0, 1] or ``n_permutations < 1``.
    """
    if not 0.0 <= p <= 1.0:
        raise ConfigError(f"p must be in [0, 1], got {p!r}")
    check_n_permutations(n_permutations)
    return math.sqrt(p * (1.0 - p) / n_permutations)


def check_n_permutations(n_permutations: object, *, name: str = "n_permutations",
                         minimum: int = 1, bound: int = MAX_PERMUTATIONS) -> None:
    """Raise ``ConfigError`` (a ``ValueError``) unless ``minimum <= n_permutations <= bound``, an integer.

    Also the check of every other count of null draws (``n_random`` control sets, ``n_shuffles``,
    ``max_permutations``; ``name`` says which), bounded by
    :data:`~probekit.stats.limits.MAX_PERMUTATIONS` (``bound``: another constant of
    :mod:`probekit.stats.limits`, e.g. ``MAX_SIMULATIONS``).
    """
    if isinstance(n_permutations, bool) or not isinstance(n_permutations, (int, np.integer)):
        whole = (max(minimum, int(n_permutations)) if isinstance(n_permutations, float)
                 and math.isfinite(n_permutations) else 1000)
        raise ConfigError(f"{name} must be a whole number >= {minimum}, got "
                          f"{type(n_permutations).__name__} {n_permutations!r}; pass an int, e.g. "
                          f"{name}={whole}")
    if n_permutations < minimum:
        raise ConfigError(f"{name} must be >= {minimum}, got {n_permutations}")
    if n_permutations > bound:
        why = "(p resolved to 1e-5; more only costs time)" if bound == MAX_PERMUTATIONS else \
            "(more only costs time)"
        raise KeyedValueError(name, f"{name} = {n_permutations} is above the bound {bound} {why}; give at "
                          "most that")


def check_seed(seed: object, *, name: str = "seed", allow_none: bool = False) -> None:
    """Raise ``ConfigError`` unless ``seed`` is an integer >= 0 (numpy's seeds), or None if allowed.

    numpy's ``default_rng(-1)`` fails deep inside with "expected non-negative integer"; this says
    which argument and the fix first.
    """
    if seed is None and allow_none:
        return
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ConfigError(f"{name} must be an integer >= 0{' or None' if allow_none else ''}, got "
                          f"{seed!r}; pass e.g. {name}=0")


def n_permutations_for(alpha: float, n_tests: int = 1) -> int:
    """Fewest permutations ``n`` for which Holm over ``n_tests`` tests can reach ``alpha``.

    The smallest permutation p is ``1 / (1 + n)`` and Holm multiplies the smallest p by
    ``n_tests``, so ``n_tests / (1 + n) <= alpha`` is needed: ``n = ceil(n_tests / alpha) - 1``
    (e.g. 19 for one test, 139 for 7 tests at alpha = 0.05).
    """
    if not 0.0 < alpha < 1.0 or n_tests < 1:
        raise ConfigError(
            f"need 0 < alpha < 1 and n_tests >= 1, got alpha={alpha}, n_tests={n_tests}"
        )
    n = max(1, math.ceil(round(n_tests / alpha, 9)) - 1)
    while n_tests * (1.0 / (1 + n)) > alpha:  # float rounding: never one short
        n += 1
    return n


def permutation_test(
    score_fn: Callable[[np.ndarray, np.ndarray], float],
    X: np.ndarray,
    y: np.ndarray,
    *,
    n_permutations: int = 1000,
    alternative: Alternative = "greater",
    random_state: int | np.random.Generator | None = 0,
) -> StatTestResult:
    """Generic permutation test of ``score_fn(X, y)`` against ``score_fn(X, permuted y)``.

    ``score_fn`` must do the whole pipeline (fit on a training part, score on a held-out part)
    so that every permutation refits the probe.
    """
    check_n_permutations(n_permutations)
    y = np.asarray(y)
    if len(X) != len(y):
        raise DataError(f"got {len(X)} activations but {len(y)} labels")
    rng = np.random.default_rng(random_state)
    observed = float(score_fn(X, y))
    null = np.array([float(score_fn(X, rng.permutation(y))) for _ in range(n_permutations)])
    return permutation_result(observed, null, len(y), "permutation test", alternative)
