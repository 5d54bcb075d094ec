"""Fit/score split of the pairs (An & Du 2026 [C]: first 80% fit, last 20% scored)."""

from __future__ import annotations

import numpy as np
from jaxtyping import Int

from ..errors import ConfigError, DataError

MIN_SIDE = 2


def split_pairs(
    n: int, *, train_fraction: float = 0.8, shuffle: bool = False, seed: int = 0
) -> tuple[Int[np.ndarray, " fit"], Int[np.ndarray, " score"]]:
    """Indices of the fit and score pairs.

    ``n_fit = int(train_fraction * n)`` in collection order [C]; with ``shuffle=True`` a seeded
    permutation (``numpy.random.default_rng(seed)``) is split instead [O].
    """
    if not 0.0 < train_fraction < 1.0:
        raise ConfigError(f"train_fraction must be in (0, 1), got {train_fraction!r}; [C] uses 0.8")
    n_fit = int(train_fraction * n)
    if n_fit < MIN_SIDE or n - n_fit < MIN_SIDE:
        need = int(np.ceil(MIN_SIDE / min(train_fraction, 1 - train_fraction)))
        raise DataError(
            f"{n} pairs split {train_fraction:g}/{1 - train_fraction:g} leave {n_fit} to fit and "
            f"{n - n_fit} to score; need >= {MIN_SIDE} on each side (about {need} pairs): use "
            "more examples (a larger split) or fewer noise tokens"
        )
    order = np.random.default_rng(seed).permutation(n) if shuffle else np.arange(n)
    return order[:n_fit], order[n_fit:]
