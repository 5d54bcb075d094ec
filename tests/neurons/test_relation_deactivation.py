"""A relation's deactivation drop against a zeroing hook, and its control against one-by-one sets."""

from pathlib import Path

import numpy as np
import pytest
import torch

from probekit.errors import DataError
from probekit.neurons.relation_deactivation import relation_deactivation
from probekit.sites import Site

CHECKPOINT = Path(__file__).resolve().parents[2] / "probes" / "checkpoints" / "modadd-p53"


@pytest.fixture(scope="module")
def model():
    from probekit.models import load_checkpoint

    return load_checkpoint(CHECKPOINT)


def _parity(seed):
    rng = np.random.default_rng(seed)
    a, b = rng.integers(0, 53, 60), rng.integers(0, 53, 60)
    answer = ((a + b) % 53).tolist()
    return [[int(x), int(y), 53] for x, y in zip(a, b)], answer, [f"r{c % 2}" for c in answer]


def test_zeroing_every_mlp_unit_equals_a_zeroing_hook(model):
    tokens, answer, rel = _parity(3)
    res = relation_deactivation(model, tokens, rel, answer, [Site.parse("mlp_post@0")],
                                relation="r0", select=np.arange(40), evaluate=np.arange(40, 60),
                                k=512, n_random=2, control=True)
    test = [i for i in range(40, 60) if rel[i] == "r0"]
    toks, want = torch.tensor([tokens[i] for i in test]), torch.tensor([answer[i] for i in test])
    with torch.no_grad():
        base = (model(toks)[:, -1].argmax(-1) == want).double()
        zeroed = model.run_with_hooks(toks, fwd_hooks=[("blocks.0.mlp.hook_post",
                                                        lambda x, hook: torch.zeros_like(x))])
    np.testing.assert_array_equal(res.base, base.numpy())
    np.testing.assert_array_equal(res.drop, (base - (zeroed[:, -1].argmax(-1) == want).double()).numpy())
    assert res.n_units == 512 and res.drop.mean() > 0.5
    np.testing.assert_array_equal(res.control, res.drop)  # a random set of all 512 units is the set


def test_without_a_control_and_with_too_few_facts(model):
    tokens, answer, rel = _parity(5)
    kw = dict(relation="r1", select=np.arange(40), k=8)
    site = [Site.parse("mlp_post@0")]
    as_ids = relation_deactivation(model, tokens, rel, answer, site, evaluate=np.arange(40, 60), **kw)
    assert as_ids.control is None and as_ids.base.mean() > 0.9
    with pytest.raises(DataError, match="need >= 2"):
        relation_deactivation(model, tokens, rel, answer, site, evaluate=[40], **kw)
