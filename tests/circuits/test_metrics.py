"""Patching metrics: TransformerLens' one-argument ``metric(logits) -> scalar`` is adapted."""

from functools import partial

import pytest
import torch
from transformer_lens import patching

from probekit.circuits import activation_patching, attribution_patching, logit_diff
from probekit.circuits.eap import edge_attribution
from probekit.circuits.metrics import PerPromptMetric, as_pair_metric
from probekit.errors import ConfigError, DataError
from probekit.models import build_model
from tests.conftest import TINY_CONFIGS

ANSWER, FOIL = 2, 7


def tl_logit_diff(logits):
    """TransformerLens' convention: full (batch, pos, vocab) logits -> one number."""
    return (logits[:, -1, ANSWER] - logits[:, -1, FOIL]).mean()


@pytest.fixture(scope="module")
def gqa():
    model = build_model(TINY_CONFIGS["gqa_rotary_rms"])
    g = torch.Generator().manual_seed(3)
    clean = torch.randint(0, 13, (3, 5), generator=g)
    corrupt = clean.clone()
    corrupt[:, 2] = (clean[:, 2] + 4) % 13
    two_arg = partial(logit_diff, answer=torch.full((3,), ANSWER), foil=torch.full((3,), FOIL))
    return model, clean, corrupt, two_arg


def test_signature_decides_the_form():
    assert isinstance(as_pair_metric(tl_logit_diff), PerPromptMetric)
    assert isinstance(as_pair_metric(lambda logits: logits.sum()), PerPromptMetric)
    two = partial(logit_diff, answer=torch.tensor([1]), foil=torch.tensor([2]))
    assert as_pair_metric(two) is two
    assert as_pair_metric(logit_diff) is logit_diff  # keyword-only answers are not positional

    def three(logits, pair, extra):
        return logits

    with pytest.raises(ConfigError, match=r"takes 3 required positional argument\(s\); expected "
                       r"metric\(logits: \(row, d_vocab\), pair: \(row,\)\) -> \(row,\), or "
                       r"TransformerLens' metric\(logits\) -> scalar"):
        as_pair_metric(three)


def test_one_argument_metric_gives_identical_grids(gqa):
    model, clean, corrupt, two_arg = gqa
    for kind, by in (("resid_pre", None), ("attn_z", ("layer", "head"))):
        want = activation_patching(model, clean, corrupt, two_arg, kind=kind, by=by, batch_size=4)
        got = activation_patching(model, clean, corrupt, tl_logit_diff, kind=kind, by=by, batch_size=4)
        assert torch.equal(got.values, want.values) and torch.equal(got.per_pair, want.per_pair)
        assert torch.equal(got.clean, want.clean) and torch.equal(got.corrupt, want.corrupt)
    want = attribution_patching(model, clean, corrupt, two_arg)
    got = attribution_patching(model, clean, corrupt, tl_logit_diff)
    torch.testing.assert_close(got.values, want.values, rtol=0, atol=1e-6)


def test_one_argument_metric_equals_transformer_lens_with_the_same_function(gqa):
    """The very function TransformerLens takes: probekit's pair-averaged grid equals TL's."""
    model, clean, corrupt, _ = gqa
    _, cache = model.run_with_cache(clean)
    want = patching.get_act_patch_resid_pre(model, corrupt, cache, tl_logit_diff)
    got = activation_patching(model, clean, corrupt, tl_logit_diff, kind="resid_pre")
    assert float((got.values - want).abs().max()) <= 1e-4


def test_one_argument_metric_in_eap(gqa):
    _, clean, corrupt, two_arg = gqa
    model64 = build_model(TINY_CONFIGS["gqa_rotary_rms"]).to(torch.float64)
    want = edge_attribution(model64, clean.tolist(), corrupt.tolist(), two_arg)
    got = edge_attribution(model64, clean.tolist(), corrupt.tolist(), tl_logit_diff)
    torch.testing.assert_close(got.scores, want.scores, rtol=1e-9, atol=1e-12)


def test_one_argument_metric_must_return_one_number(gqa):
    model, clean, corrupt, _ = gqa
    with pytest.raises(DataError, match=r"returned \(1, 13\) for one prompt's logits \(1, 1, d_vocab\); "
                       r"it must return one number"):
        activation_patching(model, clean, corrupt, lambda logits: logits[:, -1], kind="resid_pre")
