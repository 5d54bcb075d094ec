"""Batched activation patching vs transformer_lens.patching (one forward per cell) on the same bridge."""

from functools import partial
from pathlib import Path

import pytest
import torch
from transformer_lens import patching

import probekit
from probekit.circuits import activation_patching, answer_logprob, logit_diff
from probekit.errors import ConfigError, DataError
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
    with pytest.raises(ConfigError, match="layers \\[7\\] out of range; the model has 3 layers"):
        activation_patching(model, clean, corrupt, metric, layers=[7])
    with pytest.raises(DataError, match="answer holds a token id outside 0..12"):
        activation_patching(model, clean, corrupt, partial(answer_logprob, answer=torch.tensor([2, 99])))
