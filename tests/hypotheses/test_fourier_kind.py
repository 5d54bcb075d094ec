"""The fourier_key_share kind on a constructed embedding (planted key frequencies vs pure noise)."""

import numpy as np
import pytest
import torch

from probekit.grokking.fourier import frequency_power
from probekit.hypotheses.kinds.fourier_key_share import FourierKeyShareSpec, fourier_key_share
from tests.grokking.test_fourier import P, _planted_embedding
from tests.hypotheses.helpers import FakeContext


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
