"""Recompute: a write computed from activations of the same forward pass."""

import pytest
import torch

from probekit.capture import LastToken, Site
from probekit.errors import ConfigError, DataError
from probekit.interventions import Add, Read, Recompute, run_with_interventions
from tests.conftest import random_sequences


@pytest.mark.parametrize("side", ["left", "right"])
def test_recompute_equals_a_two_pass_add(tiny_model, side):
    model = tiny_model
    toks = random_sequences(3, model.cfg.d_vocab, lo=3, hi=7, seed=5)
    src, dst = Site(0, "mlp_out"), Site(model.cfg.n_layers - 1, "resid_post")
    first = run_with_interventions(model, toks, [Read(site=src)], padding_side=side)
    want = run_with_interventions(model, toks, [Add(site=dst, vector=first[src], scale=-0.5)],
                                  padding_side=side).output

    def fn(value, inputs):
        return value - 0.5 * inputs[src]

    got = run_with_interventions(model, toks, [Recompute(site=dst, fn=fn, inputs=(src,))],
                                 padding_side=side).output
    torch.testing.assert_close(got, want, atol=1e-5, rtol=1e-5)
    # a position rule restricts the write: only the last token changes
    last = run_with_interventions(model, toks, [Recompute(site=dst, fn=fn, inputs=(src,), positions=LastToken())],
                                  padding_side=side).output
    plain = run_with_interventions(model, toks, padding_side=side).output
    lengths = torch.tensor([len(t) for t in toks])
    rows = torch.arange(3)
    torch.testing.assert_close(last[rows, lengths - 1], want[rows, lengths - 1], atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(last[rows, lengths - 2], plain[rows, lengths - 2])


def test_recompute_errors(small_model):
    toks = [[1, 2, 3]]
    late = Site(1, "mlp_out")
    with pytest.raises(ConfigError, match="had not reached"):
        run_with_interventions(small_model, toks, [Recompute(site=Site(0, "resid_post"), fn=lambda v, i: v,
                                                             inputs=(late,))])
    with pytest.raises(DataError, match="returned"):
        run_with_interventions(small_model, toks, [Recompute(site=Site(1, "resid_pre"), fn=lambda v, i: v[:, :1])])
