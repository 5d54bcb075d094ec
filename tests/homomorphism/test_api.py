import numpy as np
import pytest
import torch

from probekit.errors import ConfigError, DataError
from probekit.homomorphism import (
    HEConfig,
    capture_states,
    modifier_he,
    modifier_pairs,
    pair_vectors,
    sequence_he,
    sequence_pairs,
)
from probekit.testbeds.base import TaskDataset

FAST = HEConfig(families=("affine", "bilinear"), solver="closed_form_ridge")


def test_modifier_pairs_are_adjacent_primitive_modifier_tokens(scan_task):
    ds = scan_task.splits()["train"]
    pairs = modifier_pairs(ds)
    vocab = scan_task.vocab
    words = [vocab.decode(t).split() for t in ds.tokens]
    brute = [
        (e, i) for e, w in enumerate(words) for i in range(len(w) - 1)
        if w[i] in ("walk", "jump", "look", "turn") and w[i + 1] in ("twice", "thrice")
    ]
    assert [(int(e), int(s)) for e, s in zip(pairs.example, pairs.a_span[:, 0])] == brute
    for e, (s, _), label in zip(pairs.example, pairs.b_span, pairs.label):
        assert words[e][s] == label


def test_sequence_pairs_cover_consecutive_parts(scan_task):
    ds = scan_task.splits()["train"]
    pairs = sequence_pairs(ds)
    n_parts = [len(p) for p in ds.metadata["part_spans"]]
    assert len(pairs) == sum(k - 1 for k in n_parts)
    assert (pairs.a_span[:, 1] == pairs.b_span[:, 0]).all()  # adjacent, no gap
    assert set(pairs.label) == {"then"}


def test_pair_vectors_equal_run_with_cache_span_means(scan_task, scan_model):
    ds = scan_task.splits()["train"].subset(range(12))
    pairs = modifier_pairs(ds)
    states = capture_states(scan_model, ds.tokens, batch_size=5)
    a, b = pair_vectors(states, pairs)
    seq = sequence_pairs(ds)
    sa, sb = pair_vectors(states, seq)
    for layer in states.layers:
        for k in range(len(pairs)):
            e = int(pairs.example[k])
            _, cache = scan_model.run_with_cache(torch.tensor([ds.tokens[e]]))
            h = cache[f"blocks.{layer}.hook_resid_post"][0].double()
            (s0, t0), (s1, t1) = pairs.a_span[k], pairs.b_span[k]
            torch.testing.assert_close(a[layer, k], h[s0:t0].mean(0), atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(b[layer, k], h[s1:t1].mean(0), atol=1e-5, rtol=1e-5)
        e = int(seq.example[0])
        _, cache = scan_model.run_with_cache(torch.tensor([ds.tokens[e]]))
        h = cache[f"blocks.{layer}.hook_resid_post"][0].double()
        (s0, t0), (s1, t1) = seq.a_span[0], seq.b_span[0]
        torch.testing.assert_close(sa[layer, 0], h[s0:t0].mean(0), atol=1e-5, rtol=1e-5)
        torch.testing.assert_close(sb[layer, 0], h[s1:t1].mean(0), atol=1e-5, rtol=1e-5)
    last_a, _ = pair_vectors(states, seq, pooling="last")
    e = int(seq.example[0])
    _, cache = scan_model.run_with_cache(torch.tensor([ds.tokens[e]]))
    torch.testing.assert_close(
        last_a[1, 0], cache["blocks.1.hook_resid_post"][0, seq.a_span[0, 1] - 1].double(),
        atol=1e-5, rtol=1e-5,
    )


def test_model_path_equals_states_path_and_single_layers(scan_task, scan_model):
    ds = scan_task.splits()["train"]
    res = modifier_he(scan_model, scan_task, config=FAST)
    states = capture_states(scan_model, ds.tokens)
    same = modifier_he(states=states, pairs=modifier_pairs(ds), config=FAST)
    np.testing.assert_allclose(res.mse, same.mse, rtol=1e-9)
    assert res.layers == (0, 1, 2) and res.headline_layer == 2
    assert res.headline == pytest.approx(float(res.he[-1]))
    assert set(res.groups) == {"twice", "thrice"}
    for layer in res.layers:
        one = modifier_he(states=states.select([layer]), pairs=modifier_pairs(ds), config=FAST)
        np.testing.assert_allclose(one.mse[0], res.mse[layer], rtol=1e-9)
        np.testing.assert_allclose(one.he_low[0], res.he_low[layer], rtol=1e-9)
    seq = sequence_he(scan_model, scan_task, config=FAST)
    assert seq.groups == ("then",) and seq.n_pairs == len(sequence_pairs(ds))
    assert np.isfinite(seq.he).all()
    assert "1-R^2 (ours)" in res.table() and res.to_dict()["headline"] == res.headline


def _no_modifier_dataset(ds: TaskDataset) -> TaskDataset:
    md = dict(ds.metadata)
    md["mod_positions"] = [[None] * len(m) for m in md["mod_positions"]]
    return TaskDataset(
        name="nomods", tokens=ds.tokens, targets=ds.targets,
        target_positions=ds.target_positions, metadata=md,
    )


def test_bad_inputs_name_counts_and_fix(scan_task, scan_model):
    ds = scan_task.splits()["train"]
    with pytest.raises(DataError, match=r"no primitive-modifier pairs: \d+ examples"):
        modifier_pairs(_no_modifier_dataset(ds))
    small = ds.subset(range(2))
    with pytest.raises(DataError, match=r"\d pairs split 0.8/0.2 leave"):
        modifier_he(scan_model, small, config=FAST)
    states = capture_states(scan_model, ds.tokens[:5])
    with pytest.raises(DataError, match="states hold 5 examples"):
        modifier_he(states=states, pairs=modifier_pairs(ds), config=FAST)
    shifted = capture_states(scan_model, [t[:2] for t in ds.tokens])
    with pytest.raises(DataError, match="reach past their example's captured tokens"):
        modifier_he(states=shifted, pairs=modifier_pairs(ds), config=FAST)
    with pytest.raises(DataError, match="lacks the parse column"):
        modifier_pairs(TaskDataset(name="x", tokens=[[1]], targets=[[1]], target_positions=[[0]]))
    with pytest.raises(ConfigError, match="not both or neither"):
        modifier_he(scan_model, scan_task, states=states)
    with pytest.raises(DataError, match="got sequence pairs"):
        modifier_he(states=states, pairs=sequence_pairs(ds))


def test_all_layer_he_equals_papers_per_layer_loop(scan_task, scan_model):
    from scripts.bench_homomorphism import paper_loop

    ds = scan_task.splits()["train"].subset(range(60))
    pairs = modifier_pairs(ds)
    ref = paper_loop(scan_model, ds.tokens, pairs)  # per layer, per-example forwards, Adam fits
    ours = modifier_he(scan_model, ds, config=HEConfig(solver="adam"))
    np.testing.assert_allclose(ours.mse, ref, rtol=1e-4, atol=1e-9)
