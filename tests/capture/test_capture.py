import pytest
import torch

from probekit.capture import (
    AllTokens,
    LastToken,
    Site,
    SpanMean,
    TokenIndex,
    all_layers,
    capture,
    collect_activations,
    count_hooks,
)
from probekit.errors import ConfigError
from tests.conftest import random_sequences

SITE_KINDS_TO_CHECK = ["resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out", "mlp_post", "attn_z", "attn_k"]


def test_capture_scope_matches_run_with_cache(tiny_model):
    toks = torch.randint(0, tiny_model.cfg.d_vocab, (3, 8), generator=torch.Generator().manual_seed(0))
    sites = [Site(layer, kind) for layer in range(tiny_model.cfg.n_layers) for kind in SITE_KINDS_TO_CHECK]
    sites += [Site(None, "embed")]
    with capture(tiny_model, sites) as got:
        tiny_model(toks)
    _, ref = tiny_model.run_with_cache(toks)
    for site in sites:
        torch.testing.assert_close(got[site], ref[site.name], rtol=0, atol=0)


_SINGLE_RUNS: dict[int, list] = {}


@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize(
    "rule_name", ["last", "index", "neg_index", "span", "all"]
)
def test_positions_match_unpadded_single_runs(tiny_model, side, rule_name):
    seqs = random_sequences(9, tiny_model.cfg.d_vocab, lo=3, hi=12, seed=1)
    sites = all_layers(tiny_model, "resid_post") + (Site(0, "attn_z"),)
    key = id(tiny_model)
    if key not in _SINGLE_RUNS:  # unpadded reference runs, once per model
        names = {s.name for s in sites}
        _SINGLE_RUNS[key] = [
            tiny_model.run_with_cache(torch.tensor([seq]), names_filter=lambda n: n in names)[1]
            for seq in seqs
        ]
    caches = _SINGLE_RUNS[key]
    rules = {
        "last": LastToken(),
        "index": TokenIndex([1] * len(seqs)),
        "neg_index": TokenIndex([-2] * len(seqs)),
        "span": SpanMean([(1, len(s)) for s in seqs]),
        "all": AllTokens(),
    }
    rule = rules[rule_name]
    got = collect_activations(tiny_model, seqs, sites, positions=rule, padding_side=side, batch_size=4, progress=False)
    for site in sites:
        expected, ex_ids, pos_ids = [], [], []
        for i, seq in enumerate(seqs):
            act = caches[i][site.name][0]
            n = len(seq)
            kept = {"last": [n - 1], "index": [1], "neg_index": [n - 2], "span": [1], "all": list(range(n))}[rule_name]
            if rule_name == "span":
                expected.append(act[1:n].mean(0))
            else:
                expected.extend(act[t] for t in kept)
            ex_ids.extend([i] * len(kept))
            pos_ids.extend(kept)
        torch.testing.assert_close(got[site], torch.stack(expected), atol=2e-5, rtol=1e-4)
        assert got.example.tolist() == ex_ids
        assert got.position.tolist() == pos_ids


def test_batch_size_does_not_change_results(small_model):
    seqs = random_sequences(10, small_model.cfg.d_vocab, seed=2)
    a = collect_activations(small_model, seqs, ["resid_post@1"], batch_size=1, progress=False)
    b = collect_activations(small_model, seqs, ["resid_post@1"], batch_size=7, progress=False)
    torch.testing.assert_close(a["resid_post@1"], b["resid_post@1"], atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype,torch_dtype", [("float16", torch.float16), ("bfloat16", torch.bfloat16)])
def test_storage_dtype(small_model, dtype, torch_dtype):
    seqs = random_sequences(4, small_model.cfg.d_vocab, seed=3)
    full = collect_activations(small_model, seqs, ["resid_post@0"], progress=False)
    half = collect_activations(small_model, seqs, ["resid_post@0"], dtype=dtype, progress=False)
    assert half["resid_post@0"].dtype == torch_dtype
    torch.testing.assert_close(half["resid_post@0"].float(), full["resid_post@0"], atol=0.05, rtol=0.02)


def test_no_hooks_left_after_exception(small_model):
    assert count_hooks(small_model) == 0
    with pytest.raises(RuntimeError, match="boom"), capture(small_model, all_layers(small_model)):
        assert count_hooks(small_model) == small_model.cfg.n_layers
        raise RuntimeError("boom")
    assert count_hooks(small_model) == 0
    # an error raised inside a hook's forward pass also cleans up
    with pytest.raises(IndexError), capture(small_model, ["resid_post@0"]):
        small_model(torch.tensor([[99]]))
    assert count_hooks(small_model) == 0


def test_unknown_site_lists_valid_kinds_and_layers(small_model):
    with pytest.raises(ValueError, match="valid kinds are .*resid_post"):
        Site(0, "resid_pots")
    with pytest.raises(ValueError, match="did you mean \\['resid_post'"):
        Site(0, "resid_pots")
    with pytest.raises(ConfigError, match="out of range, model has 2 layers"):
        collect_activations(small_model, [[1, 2]], [Site(5, "resid_post")], progress=False)
    assert count_hooks(small_model) == 0


def test_site_parse_roundtrip():
    for site in [Site(3, "resid_post"), Site(0, "mlp_post"), Site(2, "attn_z"), Site(None, "embed")]:
        assert Site.parse(site.name) == site
    assert Site.parse("resid_post@4") == Site(4, "resid_post")
    assert Site.parse("4.mlp_out") == Site(4, "mlp_out")
    with pytest.raises(ValueError, match="layer 'x' is not an integer"):
        Site.parse("resid_post@x")


def test_bad_position_inputs(small_model):
    seqs = [[1, 2, 3], [4, 5]]
    with pytest.raises(ValueError, match="TokenIndex has 1 entries but the dataset has 2"):
        collect_activations(small_model, seqs, ["resid_post@0"], positions=TokenIndex([0]), progress=False)
    with pytest.raises(IndexError, match="example 1 has 2 tokens but index 5"):
        collect_activations(small_model, seqs, ["resid_post@0"], positions=TokenIndex([0, 5]), progress=False)
    with pytest.raises(IndexError, match="span"):
        collect_activations(small_model, seqs, ["resid_post@0"], positions=SpanMean([(0, 3), (1, 1)]), progress=False)
    with pytest.raises(ValueError, match="context is 12"):
        collect_activations(small_model, [[1] * 20], ["resid_post@0"], progress=False)
