"""Fourier power (Nanda et al. 2023) vs numpy's FFT; key-frequency share on a constructed embedding."""

import numpy as np
import pytest

from probekit.errors import ConfigError
from probekit.grokking.fourier import (
    fourier_basis,
    frequency_power,
    key_frequencies,
    key_frequency_share,
)

P = 53


def test_basis_is_orthonormal_and_power_matches_rfft():
    b = fourier_basis(P)
    np.testing.assert_allclose(b @ b.T, np.eye(P), atol=1e-9)
    x = np.random.default_rng(0).normal(size=(P, 7))
    power = frequency_power(x)
    f = np.fft.rfft(x, axis=0)
    want = np.abs(f) ** 2 * 2 / P
    want[0] /= 2
    np.testing.assert_allclose(power, want, rtol=1e-9)
    np.testing.assert_allclose(power.sum(0), (x ** 2).sum(0), rtol=1e-9)  # Parseval


def _planted_embedding(amps: dict[int, float], d: int = 32, noise: float = 0.0, seed: int = 0):
    rng = np.random.default_rng(seed)
    a = np.arange(P)[:, None]
    w = noise * rng.normal(size=(P, d))
    for k, amp in amps.items():
        u, v = rng.normal(size=(2, d)) / np.sqrt(d)
        w += amp * (np.cos(2 * np.pi * k * a / P) * u + np.sin(2 * np.pi * k * a / P) * v)
    return w


def test_key_frequencies_and_share_on_a_constructed_embedding():
    w = _planted_embedding({4: 3.0, 11: 2.0, 17: 1.0})
    power = frequency_power(w).sum(-1)
    assert key_frequencies(power, 3).tolist() == [4, 11, 17]
    assert float(key_frequency_share(power, key_frequencies(power, 3))) == pytest.approx(1.0)
    share2 = float(key_frequency_share(power, key_frequencies(power, 2)))
    assert share2 == pytest.approx(power[[4, 11]].sum() / power[[4, 11, 17]].sum())
    with pytest.raises(ConfigError, match="odd modulus"):
        fourier_basis(52)
