"""Fourier power (Nanda et al. 2023) vs numpy's FFT; key-frequency share on a constructed embedding."""

import numpy as np
import pytest
import torch

from probekit.errors import ConfigError
from probekit.grokking.fourier import (
    fourier_basis,
    frequency_power,
    key_frequencies,
    key_frequency_share,
)
from probekit.hypotheses.kinds.fourier_key_share import FourierKeyShareSpec, fourier_key_share
from tests.hypotheses.helpers import FakeContext

P = 53


def test_basis_is_orthonormal_and_power_matches_rfft():
    b = fourier_basis(P)
    np.testing.assert_allclose(b @ b.T, np.eye(P), atol=1e-12)
    x = np.random.default_rng(0).normal(size=(P, 7))
    power = frequency_power(x)
    f = np.fft.rfft(x, axis=0)
    want = np.abs(f) ** 2 * 2 / P
    want[0] /= 2
    np.testing.assert_allclose(power, want, rtol=1e-10)
    np.testing.assert_allclose(power.sum(0), (x ** 2).sum(0), rtol=1e-10)  # Parseval


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


def test_kind_on_a_constructed_embedding():
    w = _planted_embedding({4: 3.0, 11: 2.0, 17: 1.0}, d=64, noise=0.05)
    vocab = np.concatenate([w, np.zeros((1, 64))])  # the '=' row is not a residue
    ctx = FakeContext(model=type("M", (), {"W_E": torch.tensor(vocab)})())
    m = fourier_key_share(FourierKeyShareSpec(p=P, k=3, source="embedding"), ctx)
    power = frequency_power(w).sum(-1)
    assert m.details["key_frequencies"] == [4, 11, 17]
    assert m.estimate == pytest.approx(power[[4, 11, 17]].sum() / power[1:].sum())
    assert 0.95 < m.estimate < 1.0 and m.n == 64
    low, high = np.percentile(m.resamples, [2.5, 97.5])
    assert low <= m.estimate <= high
    # pure noise: 3 of 26 frequencies hold about 3/26 of the power, nowhere near 0.5
    noise = fourier_key_share(FourierKeyShareSpec(p=P, k=3, source="embedding"), FakeContext(
        model=type("M", (), {"W_E": torch.tensor(_planted_embedding({}, d=64, noise=1.0))})()))
    assert noise.estimate < 0.25
