"""Key-frequency share with its unit bootstrap, and the residue logits, against direct references."""

from pathlib import Path

import numpy as np
import pytest
import torch

from probekit.grokking.fourier import frequency_power
from probekit.grokking.fourier_share import key_share_plot, key_share_resamples, residue_logits
from probekit.stats.bootstrap import bootstrap_indices

CHECKPOINT = Path(__file__).resolve().parents[2] / "probes" / "checkpoints" / "modadd-p53"


def test_a_planted_frequency_holds_the_share_and_resamples_are_unit_resamples():
    p, rng = 11, np.random.default_rng(0)
    a = np.arange(p)
    x = 5 * np.cos(2 * np.pi * 3 * a / p)[:, None] * rng.uniform(1, 2, 40) + 0.1 * rng.normal(size=(p, 40))
    units = frequency_power(x, p).T  # (40 units, freq)
    res = key_share_resamples(units, 1, n_bootstrap=1000, seed=2)
    assert res.keys.tolist() == [3] and res.share > 0.99 and res.n == 40
    b = bootstrap_indices(40, 1000, 2)[9]
    s = units[b].sum(0)
    assert res.resamples[9] == pytest.approx(s[3] / s[1:].sum(), rel=1e-9)
    np.testing.assert_allclose(res.power_share.sum(), 1.0)
    plot = key_share_plot(res, source="logits")
    assert plot.x_labels == tuple(str(f) for f in range(1, (p - 1) // 2 + 1))


def test_residue_logits_are_the_last_token_logits():
    from probekit.models import load_checkpoint

    model = load_checkpoint(CHECKPOINT)
    tokens = [[1, 2, 53], [5, 7, 53], [52, 0, 53]]
    got = residue_logits(model, tokens, 53, batch_size=2)
    with torch.no_grad():
        want = model(torch.tensor(tokens))[:, -1, :53].double().numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)  # float32, other batching
