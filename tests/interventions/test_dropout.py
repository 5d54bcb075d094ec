"""Training-time dropout at sites vs a hand-written TL hook; eval mode untouched; masks seeded."""

import pytest
import torch

from probekit.capture import Site, capture, count_hooks
from probekit.errors import ConfigError
from probekit.interventions import dropout, dropout_sites
from probekit.models import build_model
from tests.conftest import TINY_CONFIGS


@pytest.fixture()
def model():
    m = build_model(TINY_CONFIGS["ln_mha"])
    yield m
    m.eval()


def _toks(n=4, length=12):
    return torch.randint(0, 11, (n, length), generator=torch.Generator().manual_seed(1))


def _gen(seed):
    return torch.Generator().manual_seed(seed)


def test_matches_a_hand_written_hook(model):
    toks, site = _toks(), Site(0, "attn_out")
    model.train()
    with dropout(model, p=0.25, sites=[site], generator=_gen(3)):
        got = model(toks)
    ref_gen = _gen(3)

    def ref(act, hook):
        keep = torch.rand(act.shape, generator=ref_gen) < 0.75
        return act * keep / 0.75

    with model.hooks(fwd_hooks=[(site.name, ref)]):
        want = model(toks)
    torch.testing.assert_close(got, want, atol=0, rtol=0)
    assert count_hooks(model) == 0


def test_drops_about_p_of_the_cells_and_rescales_the_rest(model):
    toks, site = _toks(n=64), Site(1, "mlp_out")
    model.eval()
    with capture(model, [site]) as clean:
        model(toks)
    x = clean[site].clone()
    # blocks 0 and 1 upstream unchanged: drop only at the read site
    model.train()
    with dropout(model, p=0.1, sites=[site], generator=_gen(0)), capture(model, [site]) as rec:
        model(toks)
    y = rec[site]
    dropped = y == 0
    assert abs(dropped.float().mean().item() - 0.1) < 0.01  # 64 x 12 x 16 cells
    torch.testing.assert_close(y[~dropped], x[~dropped] / 0.9, atol=1e-6, rtol=1e-6)


def test_train_mode_draws_masks_eval_mode_is_the_plain_model(model):
    toks = _toks()
    sites = dropout_sites(2)
    assert [s.name for s in sites[:3]] == [
        "blocks.0.attn.hook_pattern", "blocks.0.hook_attn_out", "blocks.0.hook_mlp_out"]
    model.eval()
    with torch.no_grad():
        plain = model(toks)
    model.train()
    outs = []
    for seed in (0, 1, 0):
        with dropout(model, p=0.1, sites=sites, generator=_gen(seed)), torch.no_grad():
            outs.append(model(toks))
    assert not torch.allclose(outs[0], outs[1])  # different masks
    torch.testing.assert_close(outs[0], outs[2], atol=0, rtol=0)  # same seed, same masks
    assert not torch.allclose(outs[0], plain)
    model.eval()
    with dropout(model, p=0.1, sites=sites, generator=_gen(0)), torch.no_grad():
        torch.testing.assert_close(model(toks), plain, atol=0, rtol=0)
    model.train()
    with dropout(model, p=0.0, sites=sites, generator=_gen(0)), torch.no_grad():
        torch.testing.assert_close(model(toks), plain, atol=0, rtol=0)
    assert count_hooks(model) == 0


def test_pattern_dropout_reweights_the_attention_output(model):
    """Dropping attention weights changes attn_out (the native attention applies hook_pattern
    before the value product) but not the attention scores."""
    toks, site = _toks(), Site(0, "attn_pattern")
    model.train()
    with capture(model, [Site(0, "attn_out")]) as plain:
        model(toks)
    with dropout(model, p=0.5, sites=[site], generator=_gen(0)), \
            capture(model, [Site(0, "attn_out")]) as dropped:
        model(toks)
    assert not torch.allclose(plain[Site(0, "attn_out")], dropped[Site(0, "attn_out")])


def test_bad_rate_is_refused(model):
    with pytest.raises(ConfigError, match=r"dropout p must be in \[0, 1\), got 1.0"), \
            dropout(model, p=1.0, sites=dropout_sites(1), generator=_gen(0)):
        pass
