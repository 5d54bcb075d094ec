"""Per-head Q/K/V inputs on TL-native bridges (emulated split-QKV): brute-force forward, gradients."""

import pytest
import torch

from probekit.capture import Site
from probekit.interventions import Grad, Read, Replace, run_with_interventions
from probekit.models import build_model
from tests.conftest import TINY_CONFIGS


@pytest.fixture(scope="module", params=["ln_mha", "gqa_rotary_rms"])
def model64(request):
    return build_model(TINY_CONFIGS[request.param]).to(torch.float64)


def _orig(module):
    return getattr(module, "original_component", None) or module


@torch.inference_mode()
def manual_forward(model, tokens, subs):
    """The native transformer written out by hand; ``subs[(layer, 'q'|'k'|'v')] = (head, x)``.

    Head ``head``'s projection reads ``ln1(x)`` instead of ``ln1(resid_pre)``.
    """
    cfg = model.cfg
    n_kv = cfg.n_key_value_heads or cfg.n_heads
    dh = cfg.d_head
    b, p = tokens.shape
    x = _orig(model.embed)(tokens)
    if getattr(model, "pos_embed", None) is not None:
        x = x + _orig(model.pos_embed)(torch.arange(p))[None]
    for layer, block in enumerate(model.blocks):
        attn = _orig(block.attn)
        ln1 = _orig(block.ln1)
        proj = {}
        for which, n in (("q", cfg.n_heads), ("k", n_kv), ("v", n_kv)):
            lin = _orig(getattr(attn, which))
            out = torch.nn.functional.linear(ln1(x), _orig(lin).weight, _orig(lin).bias).view(b, p, n, dh).clone()
            if (layer, which) in subs:
                h, xs = subs[(layer, which)]
                w = _orig(lin).weight.view(n, dh, -1)[h]
                bias = _orig(lin).bias.view(n, dh)[h]
                out[:, :, h] = ln1(xs) @ w.T + bias
            proj[which] = out.transpose(1, 2)
        q, k, v = proj["q"], proj["k"], proj["v"]
        if attn.rotary is not None:
            q, k = attn.rotary.apply_rope(q, k)
        k = k.repeat_interleave(cfg.n_heads // n_kv, 1)
        v = v.repeat_interleave(cfg.n_heads // n_kv, 1)
        scores = q @ k.transpose(-1, -2) / attn.scale
        scores = scores.masked_fill(torch.triu(torch.ones(p, p, dtype=torch.bool), 1), float("-inf"))
        z = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, p, -1)
        x = x + _orig(attn.o)(z)
        if hasattr(block, "ln2"):
            x = x + _orig(block.mlp)(_orig(block.ln2)(x))
    return _orig(model.unembed)(_orig(model.ln_final)(x))


@pytest.mark.parametrize("kind,which,head", [("q_input", "q", 1), ("k_input", "k", 1), ("v_input", "v", 0)])
def test_patching_one_heads_input_equals_brute_force(model64, kind, which, head):
    model = model64
    g = torch.Generator().manual_seed(3)
    toks = torch.randint(0, model.cfg.d_vocab, (2, 6), generator=g)
    other = torch.randint(0, model.cfg.d_vocab, (2, 6), generator=g)
    layer = 1
    src = run_with_interventions(model, other, [Read(site=Site(layer, "resid_pre"))])[Site(layer, "resid_pre")]
    site = Site(layer, kind, head)
    base = run_with_interventions(model, toks, [Read(site=site)])
    # without a write the copy is the residual entering the block, and the output is unchanged
    torch.testing.assert_close(base[site], run_with_interventions(
        model, toks, [Read(site=Site(layer, "resid_pre"))])[Site(layer, "resid_pre")])
    torch.testing.assert_close(base.output, manual_forward(model, toks, {}), atol=1e-10, rtol=1e-9)
    patched = run_with_interventions(model, toks, [Replace(site=site, values=src)]).output
    want = manual_forward(model, toks, {(layer, which): (head, src)})
    torch.testing.assert_close(patched, want, atol=1e-10, rtol=1e-9)
    assert (patched - base.output).abs().max() > 1e-3  # the patch matters


def test_head_input_gradients_sum_to_the_residual_gradient(model64):
    model = model64
    g = torch.Generator().manual_seed(4)
    toks = torch.randint(0, model.cfg.d_vocab, (3, 5), generator=g)
    layer = 1
    sites = [Site(layer, k) for k in ("resid_pre", "resid_mid", "q_input", "k_input", "v_input")]

    def objective(logits, batch):
        return logits[:, -1, 2] - logits[:, -1, 0]

    r = run_with_interventions(model, toks, [Grad(site=s) for s in sites], objective=objective)
    total = r.grads[sites[1]] + sum(r.grads[s].sum(2) for s in sites[2:])
    torch.testing.assert_close(r.grads[sites[0]], total, atol=1e-10, rtol=1e-8)
    n_kv = model.cfg.n_key_value_heads or model.cfg.n_heads
    assert r.grads[sites[3]].shape == (3, 5, n_kv, model.cfg.d_model)
    assert r.grads[sites[2]].shape == (3, 5, model.cfg.n_heads, model.cfg.d_model)


def test_testbed_checkpoint_has_per_head_inputs():
    """A saved testbed checkpoint (modadd, no LayerNorm) reads and patches per-head inputs."""
    from pathlib import Path

    import probekit

    model = probekit.load_checkpoint(Path(__file__).resolve().parents[2] / "probes" / "checkpoints" / "modadd-p53")
    toks = [[3, 5, 53], [7, 11, 53]]
    site = Site(0, "v_input", 2)
    r = run_with_interventions(model, toks, [Read(site=site), Read(site=Site(0, "resid_pre"))])
    torch.testing.assert_close(r[site], r[Site(0, "resid_pre")])
    torch.testing.assert_close(r.output, run_with_interventions(model, toks).output)
    zeroed = run_with_interventions(model, toks, [Replace(site=site, values=torch.zeros_like(r[site]))]).output
    assert (zeroed - r.output).abs().max() > 1e-4
