"""Batched activation patching vs transformer_lens.patching (one forward per cell) on the same bridge."""

from functools import partial
from pathlib import Path

import pytest
import torch
from transformer_lens import patching

import probekit
from probekit.capture import Site
from probekit.circuits import activation_patching, answer_logprob, logit_diff
from probekit.errors import ConfigError, DataError
from probekit.interventions import Read, Replace, run_with_interventions
from probekit.models import build_model
from tests.conftest import TINY_CONFIGS

CHECKPOINT = Path(__file__).resolve().parents[2] / "probes" / "checkpoints" / "modadd-p53"
TL = {
    ("resid_pre", None): patching.get_act_patch_resid_pre,
    ("resid_mid", None): patching.get_act_patch_resid_mid,
    ("attn_out", None): patching.get_act_patch_attn_out,
    ("mlp_out", None): patching.get_act_patch_mlp_out,
    ("attn_z", ("layer", "head")): patching.get_act_patch_attn_head_out_all_pos,
    ("attn_z", ("layer", "pos", "head")): patching.get_act_patch_attn_head_out_by_pos,
    ("attn_v", ("layer", "head")): patching.get_act_patch_attn_head_v_all_pos,
    ("attn_k", ("layer", "pos", "head")): patching.get_act_patch_attn_head_k_by_pos,
    ("attn_q", ("layer", "head")): patching.get_act_patch_attn_head_q_all_pos,
}


@pytest.fixture(scope="module")
def modadd():
    model = probekit.load_checkpoint(CHECKPOINT)
    clean = torch.tensor([[3, 5, 53], [10, 20, 53], [7, 7, 53]])
    corrupt = torch.tensor([[4, 5, 53], [11, 20, 53], [7, 9, 53]])
    answer = (clean[:, 0] + clean[:, 1]) % 53
    foil = (corrupt[:, 0] + corrupt[:, 1]) % 53
    return model, clean, corrupt, partial(logit_diff, answer=answer, foil=foil)


@pytest.fixture(scope="module")
def gqa():
    model = build_model(TINY_CONFIGS["gqa_rotary_rms"])
    g = torch.Generator().manual_seed(0)
    clean = torch.randint(0, 13, (2, 5), generator=g)
    corrupt = clean.clone()
    corrupt[:, 1] = (clean[:, 1] + 3) % 13
    metric = partial(answer_logprob, answer=torch.tensor([2, 7]))
    return model, clean, corrupt, metric


def _tl(model, clean, corrupt, metric, kind, by, direction="denoise"):
    base, source = (corrupt, clean) if direction == "denoise" else (clean, corrupt)
    _, cache = model.run_with_cache(source)
    return TL[(kind, by)](model, base, cache, lambda logits: metric(logits[:, -1], torch.arange(base.shape[0])).mean())


@pytest.mark.parametrize("kind,by", list(TL))
@pytest.mark.parametrize("which", ["modadd", "gqa"])
def test_equals_transformer_lens_patching(kind, by, which, request):
    model, clean, corrupt, metric = request.getfixturevalue(which)
    got = activation_patching(model, clean, corrupt, metric, kind=kind, by=by, batch_size=5)
    want = _tl(model, clean, corrupt, metric, kind, by)
    assert got.values.shape == want.shape
    assert float((got.values - want.cpu()).abs().max()) <= 1e-4
    assert got.axes == (by or ("layer", "pos"))


def test_noising_equals_transformer_lens_with_roles_swapped(gqa):
    model, clean, corrupt, metric = gqa
    got = activation_patching(model, clean, corrupt, metric, kind="resid_pre", direction="noise")
    want = _tl(model, clean, corrupt, metric, "resid_pre", None, direction="noise")
    assert float((got.values - want).abs().max()) <= 1e-4
    torch.testing.assert_close(got.clean, metric(model(clean)[:, -1], torch.arange(2)).detach())


def test_normalized_effect_is_zero_to_one_at_the_ends(modadd):
    model, clean, corrupt, metric = modadd
    res = activation_patching(model, clean, corrupt, metric, kind="resid_pre")
    # patching the whole residual at the layer-0 operand positions... the last position holds '='
    # which is identical in both runs, so patching it alone changes nothing
    assert abs(float(res.normalized[0, 2])) < 1e-5
    resid_post = activation_patching(model, clean, corrupt, metric, kind="resid_post")
    # after the last block, the last position carries everything: full recovery
    assert abs(float(resid_post.normalized[0, 2]) - 1.0) < 1e-4
    torch.testing.assert_close(res.clean, metric(model(clean)[:, -1], torch.arange(3)).detach())


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("kind,by", [("resid_pre", None), ("attn_z", ("layer", "head")), ("mlp_out", None)])
def test_pairs_of_different_length_equal_one_at_a_time(gqa, side, kind, by):
    model, _, _, _ = gqa
    g = torch.Generator().manual_seed(3)
    clean = [torch.randint(0, 13, (n,), generator=g).tolist() for n in (3, 6, 4)]
    corrupt = [[(t + 1) % 13 if i == 0 else t for i, t in enumerate(s)] for s in clean]
    answer = torch.tensor([1, 5, 9])
    metric = partial(answer_logprob, answer=answer)
    together = activation_patching(model, clean, corrupt, metric, kind=kind, by=by, padding_side=side, batch_size=7)
    for i in range(3):
        one = activation_patching(model, [clean[i]], [corrupt[i]], partial(answer_logprob, answer=answer[i : i + 1]),
                                  kind=kind, by=by)
        n = one.per_pair.shape[-1] if by is None else None
        got = together.per_pair[i][..., :n] if by is None else together.per_pair[i]
        torch.testing.assert_close(got, one.per_pair[0], atol=1e-5, rtol=1e-5)
        if by is None:
            assert bool(together.per_pair[i][..., len(clean[i]):].isnan().all())  # cells the pair lacks
    assert not bool(together.values.isnan().any())


def test_bad_inputs(gqa):
    model, clean, corrupt, metric = gqa
    with pytest.raises(DataError, match="pair 0: clean prompt has 5 tokens but corrupted has 4"):
        activation_patching(model, clean, corrupt[:, :4], metric)
    with pytest.raises(DataError, match="2 clean prompts but 1 corrupted"):
        activation_patching(model, clean, corrupt[:1], metric)
    with pytest.raises(DataError, match="metric returned \\(\\), expected one value per prompt"):
        activation_patching(model, clean, corrupt, lambda logits, pair: logits.sum())
    with pytest.raises(ConfigError, match="patching kind 'resid_pots' not supported"):
        activation_patching(model, clean, corrupt, metric, kind="resid_pots")
    with pytest.raises(ConfigError, match="by=\\['layer', 'head'\\] does not fit kind 'resid_pre'"):
        activation_patching(model, clean, corrupt, metric, kind="resid_pre", by=("layer", "head"))
    with pytest.raises(ConfigError, match=r"layers \[7\]: block index 7 is outside 0..2 \(the model has 3 blocks\)"):
        activation_patching(model, clean, corrupt, metric, layers=[7])
    with pytest.raises(DataError, match="answer holds a token id outside 0..12"):
        activation_patching(model, clean, corrupt, partial(answer_logprob, answer=torch.tensor([2, 99])))


def _cell_masks(by, n_pairs, n_pos, n_heads):
    """(cell index, aligned position mask) for every cell of a by-grid at one layer."""
    if by == ("layer", "pos"):
        for t in range(n_pos):
            mask = torch.zeros(n_pairs, n_pos, dtype=torch.bool)
            mask[:, t] = True
            yield (t,), mask
    elif by == ("layer", "head"):
        for h in range(n_heads):
            mask = torch.zeros(n_pairs, n_pos, n_heads, dtype=torch.bool)
            mask[:, :, h] = True
            yield (h,), mask
    else:
        for t in range(n_pos):
            for h in range(n_heads):
                mask = torch.zeros(n_pairs, n_pos, n_heads, dtype=torch.bool)
                mask[:, t, h] = True
                yield (t, h), mask


@pytest.mark.parametrize("kind,by", [("resid_pre", ("layer", "pos")), ("mlp_out", ("layer", "pos")),
                                     ("attn_z", ("layer", "head")), ("attn_v", ("layer", "pos", "head"))])
def test_window_equals_hand_set_replace_ops(gqa, kind, by):
    """A window cell = one full run (from the embeddings) with a Replace at every block of the window."""
    model, clean, corrupt, metric = gqa
    got = activation_patching(model, clean, corrupt, metric, kind=kind, by=by, window=2, batch_size=7)
    sites = [Site(b, kind) for b in range(3)]
    src = run_with_interventions(model, clean, [Read(site=s) for s in sites])
    n_heads = sites[0].n_heads(model)
    pairs = torch.arange(2)
    for layer in range(3):
        blocks = range(layer, min(layer + 2, 3))
        for cell, mask in _cell_masks(by, 2, 5, n_heads):
            ops = [Replace(site=sites[b], values=src[sites[b]], positions=mask) for b in blocks]
            out = run_with_interventions(model, corrupt, ops, logits="last")
            want = float(metric(out.output, pairs).mean())
            assert abs(float(got.values[(layer, *cell)]) - want) <= 1e-5, (layer, cell)
    assert got.labels["layer"] == ["0-1", "1-2", "2"]
    # window=1 is the single-block grid (which equals transformer_lens, above); the last block's
    # window is clipped to that block
    one = activation_patching(model, clean, corrupt, metric, kind=kind, by=by, window=1)
    assert float((got.values[2] - one.values[2]).abs().max()) <= 1e-5
    assert float((got.values[0] - one.values[0]).abs().max()) > 1e-4  # two blocks differ from one
    with pytest.raises(ConfigError, match=r"window must be >= 1 \(blocks patched per cell\)"):
        activation_patching(model, clean, corrupt, metric, kind=kind, by=by, window=0)


def test_identity_cells_are_not_run_and_rows_start_at_their_block(gqa, monkeypatch):
    """Cells whose source equals the base (the shared position 0) need no forward; rows skip early blocks."""
    import probekit.circuits.patching as patching_module

    model, clean, corrupt, metric = gqa
    calls = []
    real = patching_module.run_with_interventions

    def counting(model, tokens, ops=(), **kw):
        calls.append((len(tokens), kw.get("start")))
        return real(model, tokens, ops, **kw)

    monkeypatch.setattr(patching_module, "run_with_interventions", counting)
    res = activation_patching(model, clean, corrupt, metric, kind="resid_pre", batch_size=1000)
    # 2 pairs x 3 layers x 5 positions; position 0 is shared at every layer, positions 2-4 at
    # layer 0 (same tokens): 2 x (3 + 3) identity cells; one patched forward of the other 18 rows
    assert [n for n, _ in calls] == [2, 2, 18]
    torch.testing.assert_close(res.per_pair[:, :, 0], res.base[:, None].expand(2, 3))
    starts = []
    monkeypatch.setattr(patching_module, "run_with_interventions",
                        lambda model, tokens, ops=(), **kw: starts.append(kw.get("start")) or real(model, tokens, ops, **kw))
    activation_patching(model, clean, corrupt, metric, kind="resid_pre", batch_size=4)
    firsts = [s[0] if s else 0 for s in starts[2:]]
    assert firsts == sorted(firsts, reverse=True) and firsts[0] == 2  # last block first, from its residual


@pytest.fixture(scope="module")
def hf(tiny_hf_model):
    model = tiny_hf_model
    g = torch.Generator().manual_seed(2)
    clean = torch.randint(0, 20, (3, 6), generator=g)
    corrupt = clean.clone()
    corrupt[:, 2] = (clean[:, 2] + 7) % 20
    metric = partial(logit_diff, answer=torch.tensor([1, 4, 9]), foil=torch.tensor([3, 3, 0]))
    return model, clean, corrupt, metric


@pytest.mark.parametrize("kind,by", [("resid_pre", None), ("mlp_out", None), ("attn_z", ("layer", "pos", "head")),
                                     ("attn_k", ("layer", "pos", "head")), ("attn_v", ("layer", "head"))])
def test_hugging_face_model_with_kv_prefix_equals_transformer_lens(hf, kind, by, monkeypatch):
    """On an HF model a cell at position t runs only tokens >= t (earlier keys/values from the base run's cache)."""
    import probekit.circuits.patching as patching_module

    model, clean, corrupt, metric = hf
    caches = []
    real = patching_module.kv_prefix
    monkeypatch.setattr(patching_module, "kv_prefix", lambda *a: caches.append(a[2]) or real(*a))
    got = activation_patching(model, clean, corrupt, metric, kind=kind, by=by, batch_size=8)
    want = _tl(model, clean, corrupt, metric, kind, by)
    assert float((got.values - want.cpu()).abs().max()) <= 1e-4
    assert (max(caches, default=0) > 0) == (by != ("layer", "head"))  # (layer, head) patches every position


@pytest.mark.parametrize("side", ["left", "right"])
def test_hugging_face_padded_pairs_and_windows_equal_one_at_a_time(hf, side):
    model, _, _, _ = hf
    g = torch.Generator().manual_seed(4)
    clean = [torch.randint(0, 20, (n,), generator=g).tolist() for n in (4, 7, 5)]
    corrupt = [[(t + 3) % 20 if i == 1 else t for i, t in enumerate(s)] for s in clean]
    answer = torch.tensor([2, 6, 11])
    together = activation_patching(model, clean, corrupt, partial(answer_logprob, answer=answer), kind="resid_mid",
                                   window=2, padding_side=side, batch_size=5)
    for i in range(3):
        one = activation_patching(model, [clean[i]], [corrupt[i]], partial(answer_logprob, answer=answer[i : i + 1]),
                                  kind="resid_mid", window=2)
        n = len(clean[i])
        torch.testing.assert_close(together.per_pair[i][:, :n], one.per_pair[0], atol=1e-5, rtol=1e-5)
