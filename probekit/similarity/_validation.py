"""Input checks shared by the similarity measures (CONTRIBUTING.md: name the value, the expectation, the fix)."""

from __future__ import annotations

import numpy as np
import torch
from torch import Tensor

from probekit.errors import ConfigError, DataError, NonFiniteError

ArrayLike = Tensor | np.ndarray


def as_rep(x: ArrayLike, *, name: str = "X", min_n: int = 3, dtype: torch.dtype = torch.float64) -> Tensor:
    """Return ``x`` as a 2-D float tensor ``(n, d)`` after checking shape, size and finiteness."""
    t = x.detach() if isinstance(x, Tensor) else torch.as_tensor(np.asarray(x))
    t = t.to(device="cpu", dtype=dtype) if t.device.type != "cpu" else t.to(dtype)
    if t.ndim != 2:
        raise DataError(
            f"{name} has shape {tuple(t.shape)}; expected a representation (n_stimuli, d). "
            "Flatten positions first, e.g. einops.rearrange(a, 'b p d -> (b p) d')"
        )
    if t.shape[0] < min_n:
        raise DataError(
            f"{name} has {t.shape[0]} stimuli (shape {tuple(t.shape)}); this measure needs n >= "
            f"{min_n}: pass more stimuli"
        )
    if t.shape[1] < 1:
        raise DataError(f"{name} has no features (shape {tuple(t.shape)}); expected d >= 1")
    check_finite(t, name=name)
    return t


def check_finite(t: Tensor, *, name: str) -> None:
    """Raise :class:`NonFiniteError` naming the first row of ``t`` with a NaN or inf."""
    bad = ~torch.isfinite(t)
    if bad.any():
        row = int(bad.reshape(t.shape[0], -1).any(1).nonzero()[0, 0])
        raise NonFiniteError(
            f"{name} (shape {tuple(t.shape)}) has {int(bad.sum())} NaN/inf values, first in row "
            f"{row}; expected finite activations: drop or impute those stimuli in both inputs"
        )


def as_pair(
    x: ArrayLike, y: ArrayLike, *, min_n: int = 3, dtype: torch.dtype = torch.float64
) -> tuple[Tensor, Tensor]:
    """Check two representations of the same ``n`` stimuli (rows aligned)."""
    X = as_rep(x, name="X", min_n=min_n, dtype=dtype)
    Y = as_rep(y, name="Y", min_n=min_n, dtype=dtype)
    if X.shape[0] != Y.shape[0]:
        raise DataError(
            f"X has shape {tuple(X.shape)} but Y has shape {tuple(Y.shape)}: the row counts "
            f"{X.shape[0]} != {Y.shape[0]}; pass the same stimuli, in the same order, to both"
        )
    return X, Y


def check_not_constant(X: Tensor, Xc: Tensor, *, name: str) -> None:
    """Raise when centred ``Xc`` is zero up to rounding (every feature of ``X`` is constant)."""
    scale = float(X.abs().max())
    if float(Xc.abs().max()) <= 1e-12 * scale or scale == 0.0:
        raise DataError(
            f"{name} (shape {tuple(Xc.shape)}) is constant: all {Xc.shape[1]} features take the "
            "same value on every stimulus, so its similarity to anything is undefined; check the "
            "site (e.g. a dead layer) or the stimuli"
        )


def check_choice(value: str, choices: tuple[str, ...], *, name: str) -> None:
    """Raise :class:`ConfigError` if ``value`` is not one of ``choices``."""
    if value not in choices:
        raise ConfigError(f"{name}={value!r} is not supported; choose one of {list(choices)}")
