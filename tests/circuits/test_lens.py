"""Logit lens vs the model's own output and run_with_cache; DLA terms sum to the logit difference."""

from pathlib import Path

import pytest
import torch

import probekit
from probekit.circuits import direct_logit_attribution, logit_lens
from tests.conftest import random_sequences

CHECKPOINT = Path(__file__).resolve().parents[2] / "probes" / "checkpoints" / "modadd-p53"


@pytest.mark.parametrize("side", ["left", "right"])
def test_logit_lens_last_layer_is_the_model_output(tiny_model, side):
    model = tiny_model
    seqs = random_sequences(3, model.cfg.d_vocab, lo=2, hi=7, seed=2)
    targets = torch.tensor([[1, 2], [3, 4], [5, 6]])
    res = logit_lens(model, seqs, targets, padding_side=side)
    for i, s in enumerate(seqs):
        logits, cache = model.run_with_cache(torch.tensor([s]))
        probs = torch.softmax(logits[0], -1)
        torch.testing.assert_close(res.prob[i, -1, : len(s)], probs[:, targets[i]], atol=1e-5, rtol=1e-4)
        want_rank = (logits[0][:, None, :] > logits[0][:, targets[i], None]).sum(-1)
        assert torch.equal(res.rank[i, -1, : len(s)], want_rank)
        assert torch.equal(res.top[i, -1, : len(s)], logits[0].argmax(-1))
        # an intermediate layer: ln_final + unembed of that block's output
        mid = model.unembed(model.ln_final(cache["blocks.0.hook_resid_post"]))[0]
        torch.testing.assert_close(res.prob[i, 0, : len(s)], torch.softmax(mid, -1)[:, targets[i]], atol=1e-5, rtol=1e-4)
        assert bool(res.prob[i, :, len(s):].isnan().all())
    assert res.processing["compatibility_mode"] is False


@pytest.mark.parametrize("side", ["left", "right"])
def test_dla_terms_sum_to_the_logit_difference(tiny_model, side):
    model = tiny_model
    seqs = random_sequences(4, model.cfg.d_vocab, lo=2, hi=7, seed=3)
    answer, foil = torch.tensor([1, 2, 3, 4]), torch.tensor([5, 6, 7, 8])
    dla = direct_logit_attribution(model, seqs, answer, foil, padding_side=side)
    parts = dla.heads.sum((1, 2)) + dla.mlps.sum(1) + dla.attn_bias.sum(1) + dla.embed + dla.constant
    torch.testing.assert_close(parts, dla.total, atol=1e-4, rtol=1e-4)
    for i, s in enumerate(seqs):
        logits = model(torch.tensor([s]))[0, -1].detach()
        assert abs(float(dla.total[i]) - float(logits[answer[i]] - logits[foil[i]])) < 1e-4
    assert dla.heads.shape == (4, model.cfg.n_layers, model.cfg.n_heads)


def test_modadd_answer_is_formed_at_equals_after_the_mlp():
    """Grokked modular addition: the answer is decodable at '=' only after the MLP, and DLA credits the MLP."""
    model = probekit.load_checkpoint(CHECKPOINT)
    g = torch.Generator().manual_seed(0)
    a, b = torch.randint(0, 53, (2, 32), generator=g)
    toks = torch.stack([a, b, torch.full_like(a, 53)], 1)
    answer = (a + b) % 53
    lens = logit_lens(model, toks, answer)
    assert float((lens.rank[:, 0, 2, 0] == 0).float().mean()) >= 0.95  # after block 0 (attn+MLP): top-1
    dla = direct_logit_attribution(model, toks, answer, (answer + 1) % 53)
    assert float(dla.mlps[:, 0].mean()) > float(dla.heads[:, 0].sum(-1).mean())
    assert float(dla.total.mean()) > 5.0
