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


def test_grad_at_mlp_in_is_the_mlp_branch_gradient(tiny_model):
    """d/d attn_out (the total gradient of resid_mid) = d/d resid_post (skip) + d/d mlp_in (branch)."""
    model = tiny_model
    if getattr(model.cfg, "attn_only", False):
        pytest.skip("no MLP")
    from probekit.interventions import Grad

    kinds = ("mlp_in", "attn_out", "resid_post")
    r = run_with_interventions(model, [[1, 2, 3, 4], [3, 1, 2]], [Grad(site=Site(0, k)) for k in kinds],
                               objective=lambda out, batch: out[:, 1, 1])
    g = {k: r.grads[Site(0, k)] for k in kinds}
    torch.testing.assert_close(g["attn_out"], g["resid_post"] + g["mlp_in"], atol=1e-6, rtol=1e-5)
    assert (g["mlp_in"] - g["attn_out"]).abs().max() > 1e-3
