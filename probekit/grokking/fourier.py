"""Fourier analysis of modular-addition circuits (Nanda et al. 2023, "Progress measures for grokking").

A function ``x[a]`` of a residue ``a in 0..p-1`` (odd ``p``) is expanded in the real orthonormal
Fourier basis ``{1/sqrt(p), sqrt(2/p) cos(w_k a), sqrt(2/p) sin(w_k a)}``, ``w_k = 2 pi k / p``,
``k = 1..(p-1)/2``. The power of frequency ``k`` is the squared norm of its cos and sin
coefficients (summed over any trailing axes, e.g. embedding dimensions); by Parseval the powers
sum to ``||x||^2``. A grokked model's embedding and logits concentrate their power on a few key
frequencies; the *key-frequency share* is the fraction of non-constant power they hold.
"""

from __future__ import annotations

import numpy as np
from jaxtyping import Float, Int

from ..errors import ConfigError, DataError, NonFiniteError
from ..shapes import shape_checked
from ..util.list_option import check_top_k

__all__ = ["fourier_basis", "frequency_power", "key_frequencies", "key_frequency_share"]


def fourier_basis(p: int) -> Float[np.ndarray, "p p"]:
    """Rows: the constant, then ``cos(w_k a)``, ``sin(w_k a)`` for ``k = 1..(p-1)/2`` (orthonormal)."""
    if p < 3 or p % 2 == 0:
        raise ConfigError(f"p={p}: the Fourier basis here needs an odd modulus >= 3")
    a = np.arange(p)
    rows = [np.full(p, 1.0 / np.sqrt(p))]
    for k in range(1, (p - 1) // 2 + 1):
        w = 2 * np.pi * k * a / p
        rows += [np.sqrt(2.0 / p) * np.cos(w), np.sqrt(2.0 / p) * np.sin(w)]
    return np.stack(rows)


@shape_checked
def frequency_power(
    x: Float[np.ndarray, " p *rest"], p: int | None = None
) -> Float[np.ndarray, " freq *rest"]:
    """Power per frequency ``k = 0..(p-1)/2`` of ``x`` along its first axis, per trailing index.

    ``power[0]`` is the constant term; ``power.sum(0) == (x ** 2).sum(0)`` (Parseval).
    """
    x = np.asarray(x, dtype=np.float64)
    p = x.shape[0] if p is None else p
    if x.shape[0] != p:
        raise DataError(f"x has {x.shape[0]} rows along the residue axis but p={p}")
    if not np.isfinite(x).all():
        raise NonFiniteError("x holds NaN or inf; Fourier power needs finite values")
    sq = np.tensordot(fourier_basis(p), x, axes=(1, 0)) ** 2
    return np.concatenate([sq[:1], sq[1::2] + sq[2::2]])


def check_key_count(k: int, n_freq: int) -> int:
    """The one rule on a number of key frequencies: ``1 <= k <= n_freq`` (the non-constant ones).

    ``n_freq = (p - 1) // 2`` for residues mod ``p``. Checked where ``p`` is first known (a
    claim's or marker's keys, when the file loads) and by :func:`key_frequencies`.

    Raises:
        ConfigError: ``k=0: choose 1 <= k <= 26 (the non-constant frequencies)``.
    """
    return check_top_k(k, n_freq, what="the non-constant frequencies")


@shape_checked
def key_frequencies(power: Float[np.ndarray, " freq"], k: int) -> Int[np.ndarray, " k"]:
    """The ``k`` non-constant frequencies of largest ``power`` (``(freq,)``), strongest first."""
    check_key_count(k, power.shape[0] - 1)
    order = np.argsort(-power[1:], kind="stable") + 1
    return order[:k]


@shape_checked
def key_frequency_share(power: Float[np.ndarray, "*batch freq"], keys: Int[np.ndarray, " k"]) -> Float[np.ndarray, "*batch"] | float:
    """``sum(power[keys]) / sum(power[1:])``: the key frequencies' share of the non-constant power.

    A float for one spectrum (``power`` 1-D), else an array over the batch axes.
    """
    n_freq = power.shape[-1]
    bad = [int(k) for k in np.asarray(keys).ravel() if not 1 <= int(k) < n_freq]
    if bad:
        raise ConfigError(f"key frequency {bad[0]} out of range; power has {n_freq} frequencies, "
                          f"so keys must lie in 1..{n_freq - 1} (0 is the constant term)")
    total = power[..., 1:].sum(-1)
    if np.any(total <= 0):
        raise DataError("the signal has no non-constant power; the key-frequency share is undefined")
    return power[..., keys].sum(-1) / total
