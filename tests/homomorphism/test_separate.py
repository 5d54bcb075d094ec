"""Separate-pass homomorphism ([O], HEConfig(parts="separate")): states, exact and known errors."""

import numpy as np
import pytest
import torch

from probekit.errors import ConfigError
from probekit.homomorphism import (
    HEConfig,
    composition_he,
    deleted_part_inputs,
    modifier_he,
    modifier_pairs,
    separate_pass_vectors,
    sequence_he,
    sequence_pairs,
)
from probekit.models import build_model

SEP = HEConfig(parts="separate", families=("affine",), solver="closed_form_ridge", alpha=1e-10)


def test_deleted_part_inputs_drop_part_a(scan_task):
    ds = scan_task.splits()["train"]
    for pairs in (modifier_pairs(ds), sequence_pairs(ds)):
        inputs, idx = deleted_part_inputs(ds.tokens, pairs)
        for k in range(0, len(pairs), 7):
            x = ds.tokens[int(pairs.example[k])]
            (s_a, _), (s_b, t_b) = pairs.a_span[k], pairs.b_span[k]
            assert inputs[k] == list(x[:s_a]) + list(x[s_b:t_b])
            assert tuple(idx.b_span[k]) == (s_a, s_a + t_b - s_b)


def test_separate_states_equal_run_with_cache_on_the_edited_inputs(scan_task, scan_model):
    ds = scan_task.splits()["train"].subset(range(15))
    pairs = modifier_pairs(ds)
    a, b, c, layers = separate_pass_vectors(scan_model, ds.tokens, pairs, batch_size=4,
                                            pad_id=scan_task.vocab.pad_id)
    assert layers == (0, 1, 2) and a.shape == b.shape == c.shape
    for k in range(len(pairs)):
        x = ds.tokens[int(pairs.example[k])]
        (s_a, t_a), (s_b, t_b) = pairs.a_span[k], pairs.b_span[k]
        _, own = scan_model.run_with_cache(torch.tensor([list(x[:t_b])]))  # composite's own pass
        _, cut = scan_model.run_with_cache(torch.tensor([list(x[:s_a]) + list(x[s_b:t_b])]))
        for layer in layers:
            h = own[f"blocks.{layer}.hook_resid_post"][0].double()
            g = cut[f"blocks.{layer}.hook_resid_post"][0].double()
            torch.testing.assert_close(a[layer, k], h[s_a:t_a].mean(0), atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(c[layer, k], h[s_a:t_b].mean(0), atol=1e-5, rtol=1e-5)
            torch.testing.assert_close(b[layer, k], g[s_a:].mean(0), atol=1e-5, rtol=1e-5)


def _token_only_model(task):
    """1 block, attention output and positions zeroed, no MLP or LayerNorm: h_t = E[x_t]."""
    cfg = task.model_config(n_layers=1, d_model=16, n_heads=2, d_head=8, attn_only=True,
                            normalization_type=None, seed=3)
    model = build_model(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if ".o." in name or name.startswith("pos."):
                p.zero_()
    return model


def test_exact_linear_composite_of_separate_parts_gives_zero(scan_task):
    # h_t = E[x_t]: the composite's mean state is (E[prim] + E[mod]) / 2 exactly, and the
    # separately encoded parts are E[prim] and E[mod]: a homomorphism, HE (1 - R^2) = 0
    model = _token_only_model(scan_task)
    res = modifier_he(model, scan_task, config=SEP)
    assert set(res.groups) == {"twice", "thrice"} and res.n_scored > 10
    assert res.he_normalised.max() < 1e-12 and res.he.max() < 1e-18
    # sequence parts differ in length, so the composite's span mean weighs them unequally: with
    # last-token pooling the composite's state is the second part's, again exactly linear
    last = HEConfig(parts="separate", families=("affine",), solver="closed_form_ridge",
                    alpha=1e-10, pooling="last")
    seq = sequence_he(model, scan_task, config=last)
    assert seq.n_pairs > 0 and seq.he_normalised.max() < 1e-12


def test_one_operator_per_group_and_the_known_noise_error():
    # two groups composed by different affine maps: one operator per group fits exactly, the
    # shared one ([C]'s) cannot
    g = torch.Generator().manual_seed(0)
    n, d = 20000, 4
    a = torch.randn(1, n, d, generator=g, dtype=torch.float64)
    b = torch.randn(1, n, d, generator=g, dtype=torch.float64)
    W = torch.randn(2, 2 * d, d, generator=g, dtype=torch.float64)
    labels = np.array(["twice", "thrice"] * (n // 2))
    X = torch.cat([a, b], -1)[0]
    clean = torch.where(torch.as_tensor(labels == "twice")[:, None], X @ W[0], X @ W[1])[None]
    same = HEConfig(families=("affine",), solver="closed_form_ridge", alpha=1e-10)
    assert composition_he(a, b, clean, labels=list(labels), config=SEP).he_normalised[0] < 1e-12
    assert composition_he(a, b, clean, labels=list(labels), config=same).he_normalised[0] > 0.3
    # with noise of std s the held-out 1 - R^2 is s^2 d / sum_g-averaged signal + noise variance
    s = 2.0
    noisy = clean + s * torch.randn(1, n, d, generator=g, dtype=torch.float64)
    res = composition_he(a, b, noisy, labels=list(labels), config=SEP)
    signal = 0.5 * float((W**2).sum())  # per group, sum over outputs of the target variance
    known = s**2 * d / (signal + s**2 * d)
    assert res.he_normalised[0] == pytest.approx(known, rel=0.03)  # 0.3855 vs 0.3789


def test_separate_needs_the_model(scan_task, scan_model):
    from probekit.homomorphism import capture_states

    ds = scan_task.splits()["train"]
    states = capture_states(scan_model, ds.tokens)
    with pytest.raises(ConfigError, match="need the model"):
        modifier_he(states=states, pairs=modifier_pairs(ds), config=SEP)
