"""Intervention ops vs hand-written TransformerLens hooks on tiny random bridges (MHA, GQA, no LN)."""

import einops
import pytest
import torch

from probekit.capture import AllTokens, LastToken, Site, SpanMean, TokenIndex, count_hooks
from probekit.errors import ConfigError, DataError
from probekit.interventions import (
    Ablate,
    Add,
    Grad,
    Read,
    Replace,
    ReplaceFromRows,
    intervene,
    run_with_interventions,
)
from probekit.models import build_model
from tests.conftest import TINY_CONFIGS, random_sequences

ATOL = 1e-5


def _tokens(model, n=3, length=6, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, model.cfg.d_vocab, (n, length), generator=g)


def _ref_logits(model, toks, name, fn):
    with model.hooks(fwd_hooks=[(name, lambda act, hook: fn(act))]):
        return model(toks)


@pytest.fixture(scope="module")
def gqa_model():
    return build_model(TINY_CONFIGS["gqa_rotary_rms"])


def _write_cases(model):
    """(op, reference in-place edit of TL's activation) pairs on equal-length (unpadded) batches."""
    d = model.cfg.d_model
    g = torch.Generator().manual_seed(1)
    vals = torch.randn(3, 6, d, generator=g)
    vec = torch.randn(d, generator=g)
    kv = Site(model.cfg.n_layers - 1, "attn_v", head=(model.cfg.n_key_value_heads or model.cfg.n_heads) - 1)
    zsite = Site(0, "attn_z", head=1)
    zvals = torch.randn(3, 6, model.cfg.d_head, generator=g)
    last = model.cfg.n_layers - 1
    mean = torch.randn(model.cfg.d_mlp, generator=g)

    def set_(act, idx, v):
        act = act.clone()
        act[idx] = v
        return act

    return {
        "replace_all": (Replace(site=Site(0, "resid_post"), values=vals), "blocks.0.hook_resid_post",
                        lambda a: vals.clone()),
        "replace_last_row1": (Replace(site=Site(0, "resid_mid"), values=vals, positions=LastToken(), rows=(1,)),
                              "blocks.0.hook_resid_mid", lambda a: set_(a, (1, 5), vals[1, 5])),
        "replace_head_z": (Replace(site=zsite, values=zvals, positions=TokenIndex([2, 3, 4])),
                           "blocks.0.attn.hook_z",
                           lambda a: set_(set_(set_(a, (0, 2, 1), zvals[0, 2]), (1, 3, 1), zvals[1, 3]), (2, 4, 1), zvals[2, 4])),
        "from_rows": (ReplaceFromRows(site=Site(last, "resid_pre"), source_rows=(2, -1, 0)),
                      f"blocks.{last}.hook_resid_pre", lambda a: torch.stack([a[2], a[1], a[0]])),
        "zero_kv_head": (Ablate(site=kv, method="zero"), kv.name, lambda a: set_(a, (slice(None), slice(None), kv.head), 0.0)),
        "zero_neurons": (Ablate(site=Site(0, "mlp_post"), features=(0, 3), positions=SpanMean([(1, 3)] * 3)),
                         "blocks.0.mlp.hook_post", lambda a: set_(a, (slice(None), slice(1, 3), [0, 3]), 0.0)),
        "mean_given": (Ablate(site=Site(0, "mlp_pre"), method="mean", mean=mean, positions=LastToken()),
                       "blocks.0.mlp.hook_pre", lambda a: set_(a, (slice(None), 5), mean)),
        "mean_batch": (Ablate(site=Site(0, "attn_out"), method="mean"), "blocks.0.hook_attn_out",
                       lambda a: a.mean((0, 1)).expand_as(a).clone()),
        "steer": (Add(site=Site(0, "resid_pre"), vector=vec, scale=2.5, positions=TokenIndex([0, 1, 2])),
                  "blocks.0.hook_resid_pre",
                  lambda a: set_(set_(set_(a, (0, 0), a[0, 0] + 2.5 * vec), (1, 1), a[1, 1] + 2.5 * vec), (2, 2), a[2, 2] + 2.5 * vec)),
        "resample_batch": (Ablate(site=Site(0, "mlp_out"), method="resample", seed=3),
                           "blocks.0.hook_mlp_out", None),
    }


@pytest.mark.parametrize("case", ["replace_all", "replace_last_row1", "replace_head_z", "from_rows",
                                  "zero_kv_head", "zero_neurons", "mean_given", "mean_batch", "steer"])
def test_write_ops_match_hand_written_hooks(tiny_model, case):
    model = tiny_model
    op, name, ref_fn = _write_cases(model)[case]
    toks = _tokens(model)
    got = run_with_interventions(model, toks, [op])
    want = _ref_logits(model, toks, name, ref_fn)
    torch.testing.assert_close(got.output, want, atol=ATOL, rtol=1e-5)
    assert not torch.allclose(want, model(toks))  # the op really changes the output
    assert count_hooks(model) == 0


def test_resample_ablation_is_a_derangement_of_rows(small_model):
    toks = _tokens(small_model)
    op, name, _ = _write_cases(small_model)["resample_batch"]
    got = run_with_interventions(small_model, toks, [Read(site=Site(0, "mlp_out")), op, ])
    clean = got.reads[Site(0, "mlp_out")]
    after = run_with_interventions(small_model, toks, [op, Read(site=Site(0, "mlp_out"))]).reads[Site(0, "mlp_out")]
    perm = [int(torch.cdist(after[i].flatten()[None], clean.flatten(1)).argmin()) for i in range(3)]
    assert sorted(perm) == [0, 1, 2] and all(p != i for i, p in enumerate(perm))
    pool = torch.randn(5, 6, small_model.cfg.d_model)
    pooled = run_with_interventions(small_model, toks, [Ablate(site=Site(0, "mlp_out"), method="resample", pool=pool),
                                                         Read(site=Site(0, "mlp_out"))])
    for i in range(3):
        assert min(float((pooled.reads[Site(0, "mlp_out")][i] - p).abs().max()) for p in pool) == 0.0


def test_reads_match_run_with_cache_every_kind(tiny_model):
    model = tiny_model
    toks = _tokens(model, n=2, length=5)
    sites = []
    for kind in ["resid_pre", "resid_mid", "resid_post", "attn_out", "mlp_out", "mlp_pre", "mlp_post", "attn_z",
                 "attn_q", "attn_k", "attn_v", "attn_pattern", "ln1_scale", "ln2_scale"]:
        sites += [Site(layer, kind) for layer in range(model.cfg.n_layers)]
    sites += [Site(None, k) for k in ["embed", "pos_embed", "ln_final", "ln_final_scale"]]
    sites = [s for s in sites if s.name in model.hook_dict]
    got = run_with_interventions(model, toks, [Read(site=s) for s in sites])
    logits, ref = model.run_with_cache(toks)
    torch.testing.assert_close(got.output, logits, atol=0, rtol=0)
    for s in sites:
        want = ref[s.name]
        if s.kind == "attn_pattern":
            want = einops.rearrange(want, "b h q k -> b q h k")
        torch.testing.assert_close(got[s], want, atol=0, rtol=0, msg=s.short)
    # head sites are slices of the head axis; K/V heads index KV heads under GQA
    h = model.cfg.n_key_value_heads or model.cfg.n_heads
    heads = run_with_interventions(model, toks, [Read(site=Site(0, "attn_k", head=h - 1)), Read(site=Site(0, "attn_q", head=1))])
    torch.testing.assert_close(heads[Site(0, "attn_k", head=h - 1)], ref["blocks.0.attn.hook_k"][:, :, h - 1])
    torch.testing.assert_close(heads[Site(0, "attn_q", head=1)], ref["blocks.0.attn.hook_q"][:, :, 1])


def test_patching_one_row_from_clean_cache_reproduces_clean_logits(tiny_model):
    model = tiny_model
    clean, corrupt = _tokens(model, n=2, seed=1), _tokens(model, n=2, seed=2)
    site = Site(model.cfg.n_layers - 1, "resid_post")
    cache = run_with_interventions(model, clean, [Read(site=site)])
    patched = run_with_interventions(model, corrupt, [Replace(site=site, values=cache[site], rows=(0,))])
    torch.testing.assert_close(patched.output[0], cache.output[0], atol=ATOL, rtol=1e-5)
    torch.testing.assert_close(patched.output[1], model(corrupt)[1], atol=ATOL, rtol=1e-5)
    # at resid_pre of block 0, all positions: the whole downstream run becomes clean
    site0 = Site(0, "resid_pre")
    cache0 = run_with_interventions(model, clean, [Read(site=site0)])
    patched0 = run_with_interventions(model, corrupt, [Replace(site=site0, values=cache0[site0])])
    torch.testing.assert_close(patched0.output, cache0.output, atol=ATOL, rtol=1e-5)


def test_grads_equal_torch_autograd(tiny_model):
    model = tiny_model
    toks = _tokens(model)
    sites = [Site(0, "resid_pre"), Site(model.cfg.n_layers - 1, "attn_z"), Site(0, "attn_v", head=0), Site(0, "mlp_post")]
    answer = torch.tensor([1, 2, 3])

    def objective(logits, batch):
        last = logits[torch.arange(logits.shape[0]), batch.lengths - 1]
        return torch.log_softmax(last, -1)[torch.arange(last.shape[0]), answer[: last.shape[0]]]

    got = run_with_interventions(model, toks, [Grad(site=s) for s in sites], objective=objective)
    saved = {}

    def keep(name):
        def fn(act, hook):
            saved[name] = act
            return act  # returned, so the tensor we differentiate by is the one used downstream
        return fn

    names = sorted({s.name for s in sites})
    with torch.enable_grad(), model.hooks(fwd_hooks=[(n, keep(n)) for n in names]):
        logits = model(toks)
        value = torch.log_softmax(logits[:, -1], -1)[torch.arange(3), answer].sum()
        grads = dict(zip(names, torch.autograd.grad(value, [saved[n] for n in names])))
    for s in sites:
        want = grads[s.name] if s.head is None else grads[s.name][:, :, s.head]
        torch.testing.assert_close(got.grads[s], want, atol=1e-6, rtol=1e-5, msg=s.short)
    assert all(p.grad is None for p in model.parameters())  # no side effect on parameters
    # per-row objective: row i's gradient is the gradient of objective[i] alone
    one = run_with_interventions(model, toks[:1], [Grad(site=sites[0])], objective=objective)
    torch.testing.assert_close(one.grads[sites[0]][0], got.grads[sites[0]][0], atol=1e-6, rtol=1e-5)


@pytest.mark.parametrize("positions", ["last", "index", "span", "mask"])
def test_padding_invariance_left_vs_right_vs_single(tiny_model, positions):
    model = tiny_model
    seqs = random_sequences(4, model.cfg.d_vocab, lo=3, hi=9, seed=4)
    site = Site(0, "attn_z", head=1)
    vals = torch.randn(4, 9, model.cfg.d_head, generator=torch.Generator().manual_seed(0))
    mask = torch.zeros(4, 9, dtype=torch.bool)
    for i, s in enumerate(seqs):
        mask[i, len(s) - 2] = True
    rule = {"last": LastToken(), "index": TokenIndex([1, 2, 0, 1]), "span": SpanMean([(1, 3)] * 4), "mask": mask}[positions]
    other = Site(model.cfg.n_layers - 1, "resid_mid")
    grad_site = Site(0, "resid_pre")

    def run(tokens, side, rows=None):
        ops = [Replace(site=site, values=vals if rows is None else vals[rows], positions=rule if rows is None or isinstance(rule, (LastToken,)) else _sub(rule, rows)),
               Read(site=other), Grad(site=grad_site)]
        return run_with_interventions(model, tokens, ops, padding_side=side,
                                      objective=lambda lo, b: lo[torch.arange(lo.shape[0]), b.lengths - 1].logsumexp(-1))

    left, right = run(seqs, "left"), run(seqs, "right")
    for a, b in [(left.output, right.output), (left[other], right[other]), (left.grads[grad_site], right.grads[grad_site])]:
        torch.testing.assert_close(a, b, atol=ATOL, rtol=1e-4)
    for i, s in enumerate(seqs):
        single = run([s], "right", rows=[i])
        n = len(s)
        torch.testing.assert_close(left.output[i, :n], single.output[0], atol=ATOL, rtol=1e-4)
        torch.testing.assert_close(left.grads[grad_site][i, :n], single.grads[grad_site][0], atol=1e-6, rtol=1e-4)
        assert float(left.output[i, n:].abs().sum()) == 0.0  # aligned: pad entries are 0


def _sub(rule, rows):
    if isinstance(rule, TokenIndex):
        return TokenIndex([rule.indices[r] for r in rows])
    if isinstance(rule, SpanMean):
        return SpanMean([rule.spans[r] for r in rows])
    return rule[rows]


def test_gqa_per_head_patching_equals_reference_loop(gqa_model):
    model = gqa_model
    clean, corrupt = _tokens(model, n=2, seed=5), _tokens(model, n=2, seed=6)
    cache = run_with_interventions(model, clean, [Read(site=Site(1, "attn_k")), Read(site=Site(1, "attn_z"))])
    _, ref_cache = model.run_with_cache(clean)
    for kind, n_heads in [("attn_k", model.cfg.n_key_value_heads), ("attn_z", model.cfg.n_heads)]:
        name = Site(1, kind).name
        for h in range(n_heads):
            site = Site(1, kind, head=h)
            got = run_with_interventions(model, corrupt, [Replace(site=site, values=cache[Site(1, kind)][:, :, h])])

            def ref(act, h=h, name=name):
                act = act.clone()
                act[:, :, h] = ref_cache[name][:, :, h]
                return act

            torch.testing.assert_close(got.output, _ref_logits(model, corrupt, name, ref), atol=ATOL, rtol=1e-5)
    with pytest.raises(ConfigError, match="head 3 out of range, this model has 2 key/value heads .*grouped-query"):
        run_with_interventions(model, corrupt, [Read(site=Site(0, "attn_v", head=3))])
    # a (batch, pos, head) mask patches different heads in different rows, like per-row head sites
    mask = torch.zeros(2, 6, model.cfg.n_heads, dtype=torch.bool)
    mask[0, :, 4] = True
    mask[1, 2, 1] = True
    got = run_with_interventions(model, corrupt, [Replace(site=Site(1, "attn_z"), values=cache[Site(1, "attn_z")], positions=mask)])
    a = run_with_interventions(model, corrupt, [Replace(site=Site(1, "attn_z", head=4), values=cache[Site(1, "attn_z")][:, :, 4], rows=(0,))])
    b = run_with_interventions(model, corrupt, [Replace(site=Site(1, "attn_z", head=1), values=cache[Site(1, "attn_z")][:, :, 1], rows=(1,), positions=TokenIndex([2, 2]))])
    torch.testing.assert_close(got.output, torch.stack([a.output[0], b.output[1]]), atol=ATOL, rtol=1e-5)


def test_attn_pattern_patch_uses_unpadded_keys(gqa_model):
    model = gqa_model
    seqs = random_sequences(3, model.cfg.d_vocab, lo=3, hi=7, seed=8)
    site = Site(0, "attn_pattern", head=2)
    outs = {}
    for side in ["left", "right"]:
        cache = run_with_interventions(model, seqs[::-1], [Read(site=site)], padding_side="right")
        flipped = torch.flip(cache[site], [0])  # rows in seqs order (cache was read in reverse order)
        res = run_with_interventions(model, seqs, [Replace(site=site, values=flipped), Read(site=Site(1, "resid_pre"))], padding_side=side)
        outs[side] = res
    torch.testing.assert_close(outs["left"].output, outs["right"].output, atol=ATOL, rtol=1e-4)
    # patching a pattern with itself changes nothing
    same = run_with_interventions(model, seqs, [Replace(site=site, values=flipped)], padding_side="left")
    plain = run_with_interventions(model, seqs, [], padding_side="left")
    torch.testing.assert_close(same.output, plain.output, atol=ATOL, rtol=1e-5)


def test_hooks_removed_and_flags_restored_on_error(tiny_model):
    model = tiny_model
    toks = _tokens(model)
    assert count_hooks(model) == 0
    with pytest.raises(DataError, match="Replace.values for site resid_post@0 has shape \\(3, 6, 5\\)"):
        run_with_interventions(model, toks, [Read(site=Site(0, "resid_pre")), Replace(site=Site(0, "resid_post"), values=torch.zeros(3, 6, 5))])
    assert count_hooks(model) == 0
    with pytest.raises(RuntimeError, match="boom"), intervene(model, _as_batch(model, toks), [Read(site=Site(0, "mlp_in")), Read(site=Site(0, "resid_post"))]):
        assert count_hooks(model) == 2 and model.cfg.use_hook_mlp_in
        raise RuntimeError("boom")
    assert count_hooks(model) == 0 and not model.cfg.use_hook_mlp_in


def _as_batch(model, toks):
    from probekit.interventions import as_batch

    return as_batch(model, toks)


def test_bad_inputs_raise_one_clear_error(small_model):
    toks = _tokens(small_model)
    with pytest.raises(ConfigError, match="unknown site kind 'resid_pots'"):
        Read(site=Site(0, "resid_pots"))
    with pytest.raises(ConfigError, match="out of range, model has 2 layers"):
        run_with_interventions(small_model, toks, [Read(site=Site(4, "resid_pre"))])
    with pytest.raises(ConfigError, match="Grad ops need grad=True"):
        run_with_interventions(small_model, toks, [Grad(site=Site(0, "resid_pre"))], grad=False)
    with pytest.raises(DataError, match="objective returned shape \\(\\)"):
        run_with_interventions(small_model, toks, [Grad(site=Site(0, "resid_pre"))], objective=lambda lo, b: lo.sum())
    with pytest.raises(ConfigError, match="has no head axis"):
        Site(0, "resid_pre", head=1)
    with pytest.raises(DataError, match="row 0 writes position 3 but its source row has only 3"):
        run_with_interventions(small_model, [[1, 2, 3, 4, 5, 6], [1, 2, 3]], [ReplaceFromRows(site=Site(0, "resid_pre"), source_rows=(1, -1))])
    with pytest.raises(ConfigError, match=r"Ablate.method must be one of \['zero', 'mean', 'resample'\] \(the ablation method\), got 'median'"):
        Ablate(site=Site(0, "resid_pre"), method="median")
    assert count_hooks(small_model) == 0


def test_stop_early_skips_later_blocks(small_model):
    toks = _tokens(small_model)
    res = run_with_interventions(small_model, toks, [Read(site=Site(0, "resid_post"))], logits="none")
    _, ref = small_model.run_with_cache(toks)
    assert res.output.shape[-1] == small_model.cfg.d_model  # residual, not logits
    torch.testing.assert_close(res[Site(0, "resid_post")], ref["blocks.0.hook_resid_post"])


def test_all_tokens_read_rows(small_model):
    seqs = [[1, 2, 3], [4, 5]]
    res = run_with_interventions(small_model, seqs, [Read(site=Site(0, "resid_post"), positions=AllTokens())], padding_side="left")
    single = [small_model.run_with_cache(torch.tensor([s]))[1]["blocks.0.hook_resid_post"][0] for s in seqs]
    torch.testing.assert_close(res[Site(0, "resid_post")], torch.cat(single), atol=ATOL, rtol=1e-5)


def test_last_logits_and_start_layer_match_full_run(tiny_model):
    model = tiny_model
    k = model.cfg.n_layers - 1
    seqs = random_sequences(4, model.cfg.d_vocab, lo=2, hi=8, seed=9)
    for side in ["left", "right"]:
        full = run_with_interventions(model, seqs, [Read(site=Site(k, "resid_pre"))], padding_side=side)
        lengths = full.batch.lengths
        last = run_with_interventions(model, seqs, [], padding_side=side, logits="last")
        torch.testing.assert_close(last.output, full.output[torch.arange(4), lengths - 1], atol=ATOL, rtol=1e-5)
        # starting at block 1 from the cached residual, with a patch at block 1, equals the full patched run
        op = Ablate(site=Site(k, "attn_out"), positions=LastToken())
        want = run_with_interventions(model, seqs, [op], padding_side=side)
        got = run_with_interventions(model, seqs, [op], padding_side=side, start=(k, full[Site(k, "resid_pre")]))
        torch.testing.assert_close(got.output, want.output, atol=ATOL, rtol=1e-5)
    with pytest.raises(ConfigError, match=f"lie before start layer {k}"):
        run_with_interventions(model, seqs, [Read(site=Site(None, "embed"))], start=(k, full[Site(k, "resid_pre")]))


def test_start_layer_skips_the_blocks_before_it(tiny_model):
    """With start=(k, resid) blocks 0..k-1 do not run (the bridge alone would run and discard them)."""
    model = tiny_model
    k = model.cfg.n_layers - 1
    seqs = random_sequences(3, model.cfg.d_vocab, lo=2, hi=6, seed=4)
    full = run_with_interventions(model, seqs, [Read(site=Site(k, "resid_pre"))])
    calls = [0] * model.cfg.n_layers
    handles = [b.original_component.register_forward_hook(lambda *a, i=i: calls.__setitem__(i, calls[i] + 1))
               for i, b in enumerate(model.blocks)]
    try:
        run_with_interventions(model, seqs, [], start=(k, full[Site(k, "resid_pre")]))
        run_with_interventions(model, seqs, [], start=(k, full[Site(k, "resid_pre")]))
    finally:
        for h in handles:
            h.remove()
    # the first skipped call of a block class may run once to learn its return convention
    assert calls[k] == 2 and sum(calls[:k]) <= 1
    assert all("forward" not in b.__dict__ for b in model.blocks)  # restored
