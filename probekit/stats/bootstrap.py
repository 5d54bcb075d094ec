"""Percentile bootstrap confidence intervals (Efron & Tibshirani 1993, ch. 13)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from jaxtyping import Float, Int
from scipy import stats

from probekit.errors import ConfigError, DataError

from .limits import MAX_RESAMPLES
from .result import ConfidenceInterval

__all__ = ["MAX_RESAMPLES", "MIN_RESAMPLES", "bootstrap_ci", "bootstrap_indices", "check_n_resamples",
           "percentile_interval"]

MIN_RESAMPLES = 1000


def check_n_resamples(n_resamples: int, *, name: str = "n_resamples",
                      minimum: int = MIN_RESAMPLES) -> None:
    """Raise ``ConfigError`` unless ``minimum <= n_resamples <= MAX_RESAMPLES`` (any bootstrap's size).

    ``minimum``: 1000 for percentile intervals (the methods contract); a caller whose 0 means
    "no interval" checks a positive size only.
    """
    if isinstance(n_resamples, bool) or not isinstance(n_resamples, (int, np.integer)):
        raise ConfigError(f"{name} must be a whole number, got {type(n_resamples).__name__} "
                          f"{n_resamples!r}; pass an int, e.g. {name}=1000")
    if n_resamples < minimum:
        raise ConfigError(
            f"{name}={n_resamples} is below the {minimum} the methods contract "
            f"requires for percentile intervals; pass {name} >= {minimum}"
        )
    if n_resamples > MAX_RESAMPLES:
        raise ConfigError(
            f"{name}={n_resamples} is above the bound {MAX_RESAMPLES} (more only costs time); "
            "pass at most that"
        )


def _check_resamples(n_resamples: int) -> None:
    check_n_resamples(n_resamples)


def _check_level(confidence_level: float) -> None:
    if not 0.0 < confidence_level < 1.0:
        raise ConfigError(f"confidence_level must be in (0, 1), got {confidence_level}")


def bootstrap_indices(
    n: int, n_resamples: int = 1000, random_state: int | np.random.Generator | None = 0
) -> Int[np.ndarray, "resample n"]:
    """Row indices of ``n_resamples`` bootstrap samples (with replacement) of ``n`` items."""
    _check_resamples(n_resamples)
    if n < 1:
        raise DataError(f"cannot bootstrap an empty sample (n={n})")
    rng = np.random.default_rng(random_state)
    return rng.integers(0, n, size=(n_resamples, n))


def percentile_interval(
    samples: Float[np.ndarray, "*batch resample"], confidence_level: float = 0.95
) -> tuple[Float[np.ndarray, "*batch"] | float, Float[np.ndarray, "*batch"] | float]:
    """``(low, high)`` = the ``(1-level)/2`` and ``(1+level)/2`` quantiles over the last axis.

    Arrays of shape ``batch``; numpy float scalars when ``samples`` is 1-D.
    """
    _check_level(confidence_level)
    a = (1.0 - confidence_level) / 2.0
    lo, hi = np.nanquantile(samples, [a, 1.0 - a], axis=-1)
    return lo, hi


def bootstrap_ci(
    statistic: Callable[..., float | np.ndarray],
    *data: np.ndarray,
    n_resamples: int = 1000,
    confidence_level: float = 0.95,
    random_state: int | np.random.Generator | None = 0,
    vectorized: bool = False,
) -> ConfidenceInterval:
    """Percentile bootstrap CI of ``statistic(*data)``; samples are resampled jointly (paired).

    Wraps ``scipy.stats.bootstrap(method="percentile", paired=True)``. With
    ``vectorized=True`` the statistic must accept an ``axis`` keyword and reduce over it
    (e.g. ``np.mean``), which is much faster.

    Example: ``bootstrap_ci(lambda y, p: (y == p).mean(), y_true, y_pred)``.
    """
    _check_resamples(n_resamples)
    _check_level(confidence_level)
    if not data:
        raise DataError("bootstrap_ci needs at least one data array")
    arrays = [np.asarray(d) for d in data]
    n = len(arrays[0])
    for i, a in enumerate(arrays[1:], start=1):
        if len(a) != n:
            raise DataError(
                f"paired bootstrap needs equal lengths: array 0 has {n} items but array {i} "
                f"has {len(a)}"
            )
    estimate = float(statistic(*arrays))
    rng = np.random.default_rng(random_state)
    if len(arrays) == 1 and vectorized:
        res = stats.bootstrap(
            (arrays[0],),
            statistic,
            n_resamples=n_resamples,
            confidence_level=confidence_level,
            method="percentile",
            vectorized=True,
            rng=rng,
        )
    else:
        # Resample a shared index vector so multi-array statistics stay paired.
        idx = np.arange(n)

        def stat_idx(i: np.ndarray, axis: int = -1) -> np.ndarray:
            i = np.asarray(i)
            if i.ndim == 1:
                return np.asarray(statistic(*[a[i] for a in arrays]))
            return np.array([statistic(*[a[j] for a in arrays]) for j in i.astype(int)])

        res = stats.bootstrap(
            (idx,),
            stat_idx,
            n_resamples=n_resamples,
            confidence_level=confidence_level,
            method="percentile",
            vectorized=True,
            rng=rng,
        )
    return ConfidenceInterval(
        estimate=estimate,
        low=float(res.confidence_interval.low),
        high=float(res.confidence_interval.high),
        confidence_level=confidence_level,
        n_resamples=n_resamples,
        n=n,
    )
