"""Every site kind captured in batches (left and right padding) equals unpadded run_with_cache."""

import pytest
import torch

from probekit.capture import AllTokens, LastToken, Site, capture_to_store, collect_activations
from probekit.errors import NonFiniteError
from probekit.models import build_model
from probekit.store import ActivationStore
from tests.conftest import TINY_CONFIGS, random_sequences

BLOCK_KINDS = ["resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out", "mlp_in", "mlp_pre", "mlp_post",
               "attn_z", "attn_q", "attn_k", "attn_v", "attn_pattern", "ln1_scale", "ln2_scale"]
GLOBAL_KINDS = ["embed", "pos_embed", "ln_final", "ln_final_scale"]


def _sites(model):
    sites = [Site(layer, k) for layer in range(model.cfg.n_layers) for k in BLOCK_KINDS]
    sites += [Site(None, k) for k in GLOBAL_KINDS]
    sites += [Site(0, "attn_z", head=1), Site(0, "attn_pattern", head=0)]
    return [s for s in sites if s.name in model.hook_dict]


@pytest.fixture(scope="module")
def reference(request):
    cache = {}

    def get(model, seqs):
        key = id(model)
        if key not in cache:
            model.set_use_hook_mlp_in(True)
            try:
                cache[key] = [model.run_with_cache(torch.tensor([s]))[1] for s in seqs]
            finally:
                model.set_use_hook_mlp_in(False)
        return cache[key]

    return get


@pytest.mark.parametrize("side", ["left", "right"])
def test_every_site_kind_matches_unpadded_run_with_cache(tiny_model, reference, side):
    model = tiny_model
    seqs = random_sequences(5, model.cfg.d_vocab, lo=2, hi=9, seed=3)
    sites = _sites(model)
    assert {s.kind for s in sites} >= {"attn_pattern", "attn_q", "attn_v", "mlp_pre", "mlp_in"}
    assert model.cfg.normalization_type is None or {"ln_final", "ln1_scale"} <= {s.kind for s in sites}
    assert model.cfg.positional_embedding_type != "standard" or "pos_embed" in {s.kind for s in sites}
    # batch_size 2: batches have different padded widths; patterns must still concatenate
    got = collect_activations(model, seqs, sites, positions=AllTokens(), padding_side=side, batch_size=2,
                              progress=False)
    width = max(len(s) for s in seqs)
    caches = reference(model, seqs)
    for site in sites:
        rows = []
        for i, seq in enumerate(seqs):
            act = caches[i][site.name][0]
            if site.kind == "attn_pattern":  # (head, q, k) -> (q, head, k), keys padded to width
                act = torch.nn.functional.pad(act.permute(1, 0, 2), (0, width - len(seq)))
            if site.head is not None:
                act = act[:, site.head]
            rows.append(act)
        torch.testing.assert_close(got[site], torch.cat(rows), atol=2e-5, rtol=1e-4, msg=site.short)
    assert not model.cfg.use_hook_mlp_in  # gated flag restored


def test_attn_pattern_store_has_one_width(small_model, tmp_path):
    seqs = random_sequences(7, small_model.cfg.d_vocab, lo=2, hi=10, seed=5)
    site = Site(1, "attn_pattern")
    store = capture_to_store(small_model, seqs, tmp_path / "s", [site], positions=LastToken(), batch_size=3,
                             examples_per_shard=3, padding_side="left", progress=False)
    pattern = ActivationStore(tmp_path / "s").load(site)
    width = max(len(s) for s in seqs)
    assert tuple(pattern.shape) == (7, small_model.cfg.n_heads, width)
    torch.testing.assert_close(pattern.sum(-1), torch.ones(7, small_model.cfg.n_heads))  # rows are distributions
    for i, seq in enumerate(seqs):  # mass only on real keys, in unpadded coordinates
        assert float(pattern[i, :, len(seq):].abs().sum()) == 0.0
        assert float(pattern[i, :, len(seq) - 1].min()) > 0.0
    assert store.manifest.n_examples == 7


def test_non_finite_activations_raise_naming_site_and_examples():
    model = build_model(TINY_CONFIGS["ln_mha"])
    with torch.no_grad():
        model.embed.W_E[7] = float("nan")
    seqs = [[1, 2, 3], [4, 7, 5], [1, 1], [7]]
    with pytest.raises(NonFiniteError, match=r"site resid_post@0: non-finite .* examples \[1\].*padding"):
        collect_activations(model, seqs, ["resid_post@0"], positions=LastToken(), batch_size=2, progress=False)
    with pytest.raises(NonFiniteError, match=r"examples \[3\]"):
        collect_activations(model, seqs, ["embed"], positions=LastToken(), batch_size=2, progress=False)
