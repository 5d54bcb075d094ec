"""Attribution patching: first-order exactness (float64 finite differences), padding, correlation."""

from functools import partial
from pathlib import Path

import pytest
import torch

import probekit
from probekit.capture import Site
from probekit.circuits import (
    activation_patching,
    answer_logprob,
    attribution_patching,
    logit_diff,
    patching_correlation,
)
from probekit.interventions import Add, Read, run_with_interventions
from probekit.models import build_model
from tests.conftest import TINY_CONFIGS

CHECKPOINT = Path(__file__).resolve().parents[2] / "probes" / "checkpoints" / "modadd-p53"


@pytest.fixture(scope="module")
def model64():
    return build_model(TINY_CONFIGS["gqa_rotary_rms"]).to(torch.float64)


def _pairs(vocab, lengths, seed):
    g = torch.Generator().manual_seed(seed)
    clean = [torch.randint(0, vocab, (n,), generator=g).tolist() for n in lengths]
    corrupt = [torch.randint(0, vocab, (n,), generator=g).tolist() for n in lengths]
    return clean, corrupt


@pytest.mark.parametrize("kind,by", [("resid_pre", None), ("mlp_out", None), ("attn_z", ("layer", "pos", "head")),
                                     ("attn_v", ("layer", "head"))])
def test_attributions_are_the_first_order_change(model64, kind, by):
    model = model64
    clean, corrupt = _pairs(13, [5, 5], seed=1)
    answer = torch.tensor([3, 8])
    metric = partial(answer_logprob, answer=answer)
    res = attribution_patching(model, clean, corrupt, metric, kind=kind, by=by)
    layer = 1
    site = Site(layer, kind)
    src = run_with_interventions(model, clean, [Read(site=site)])[site]
    base = run_with_interventions(model, corrupt, [Read(site=site)])
    eps = 1e-3  # central difference: O(eps^2) error; the bridge keeps some ops in float32
    last = base.batch.lengths - 1

    def m(scale):
        out = run_with_interventions(model, corrupt, [Add(site=site, vector=src - base[site], scale=scale)]).output
        return metric(out[torch.arange(2), last], torch.arange(2))

    # patch the whole site (every position, every head): total first-order change
    fd = (m(eps) - m(-eps)) / (2 * eps)
    cells = res.per_pair[:, layer] - res.base.reshape(-1, *([1] * (res.per_pair.ndim - 2)))
    torch.testing.assert_close(cells.flatten(1).nansum(1).double(), fd, rtol=2e-3, atol=1e-5)


@pytest.mark.parametrize("kind,by", [("resid_pre", None), ("attn_z", ("layer", "head"))])
def test_attribution_padding_invariant(kind, by):
    model = build_model(TINY_CONFIGS["gqa_rotary_rms"])  # float32: float64 left padding runs right-padded
    clean, corrupt = _pairs(13, [3, 6, 4], seed=2)
    metric = partial(answer_logprob, answer=torch.tensor([1, 2, 3]))
    left = attribution_patching(model, clean, corrupt, metric, kind=kind, by=by, padding_side="left")
    right = attribution_patching(model, clean, corrupt, metric, kind=kind, by=by, padding_side="right")
    torch.testing.assert_close(left.per_pair, right.per_pair, equal_nan=True, atol=1e-5, rtol=1e-5)
    one = attribution_patching(model, clean[1:2], corrupt[1:2], partial(answer_logprob, answer=torch.tensor([2])),
                               kind=kind, by=by)
    torch.testing.assert_close(left.per_pair[1:2], one.per_pair, equal_nan=True, atol=1e-5, rtol=1e-5)


def test_attribution_correlates_with_exact_patching_on_modadd():
    model = probekit.load_checkpoint(CHECKPOINT)
    g = torch.Generator().manual_seed(0)
    a, b = torch.randint(0, 53, (2, 16), generator=g)
    clean = torch.stack([a, b, torch.full_like(a, 53)], 1)
    corrupt = clean.clone()
    corrupt[:, 0] = (a + 1) % 53
    metric = partial(logit_diff, answer=(a + b) % 53, foil=(a + 1 + b) % 53)
    exact = activation_patching(model, clean, corrupt, metric, kind="attn_z", by=("layer", "pos", "head"))
    approx = attribution_patching(model, clean, corrupt, metric, kind="attn_z", by=("layer", "pos", "head"))
    r = patching_correlation(approx, exact)
    assert r > 0.9, r  # measured 0.99 (attn_z per head and position on the grokked checkpoint)
