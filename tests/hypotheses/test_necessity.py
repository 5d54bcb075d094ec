"""Necessity of a substrate: a planted model whose answer is carried by one known direction."""

import numpy as np
import pytest
import torch

from probekit.hypotheses.necessity import (
    Substrate,
    necessity,
    probe_direction_substrate,
    unit_substrate,
)
from probekit.interventions import orthonormal_rows, random_subspace, subspace_ablation
from probekit.sites import Site
from tests.hypotheses.helpers import FakeContext, examples

D, N_INPUT = 64, 40
A, B = 0, 1  # answer tokens; A is index 0, so a tie in the logits reads as A


def planted_model(seed: int = 0):
    """One attention-only layer with zero output: ``resid_post@0`` is the token's embedding.

    Input token ``t`` (ids 2..41) embeds as ``s_t * u + noise_t`` with ``s_t = +1`` for the first
    half and ``-1`` for the second, the noise orthogonal to ``u``; the unembedding reads ``u``
    (``A`` gets ``+u``, ``B`` gets ``-u``), so the answer is carried by ``u`` alone.
    """
    from probekit.models.config import ModelConfig
    from probekit.models.native import build_model

    cfg = ModelConfig(n_layers=1, d_model=D, n_heads=2, d_head=D // 2, d_vocab=N_INPUT + 2, n_ctx=4,
                      attn_only=True, normalization_type=None)
    model = build_model(cfg)
    rng = np.random.default_rng(seed)
    u = np.zeros(D)
    u[0] = 1.0
    sign = np.where(np.arange(N_INPUT) < N_INPUT // 2, 1.0, -1.0)
    noise = rng.normal(scale=0.3, size=(N_INPUT, D))
    noise[:, 0] = 0.0
    emb = np.zeros((N_INPUT + 2, D))
    emb[2:] = sign[:, None] * u + noise
    params = dict(model.named_parameters())
    with torch.no_grad():
        for name, p in params.items():
            if name.startswith("tok_embed"):
                p.copy_(torch.as_tensor(emb, dtype=p.dtype))
            elif name.startswith("head"):
                w = torch.zeros_like(p)  # (vocab, d)
                w[A], w[B] = torch.as_tensor(u), -torch.as_tensor(u)
                p.copy_(w)
            elif name.startswith("pos") or ".o." in name:
                p.zero_()
    tokens = [[2 + t] for t in range(N_INPUT)]
    answers = [A if s > 0 else B for s in sign]
    return model, tokens, answers, u, emb[2:], sign


def test_planted_model_answers_everything_right():
    model, tokens, answers, *_ = planted_model()
    res = necessity(model, tokens, answers, _known(Site(0, "resid_post"), np.eye(D)[:1]), control=False)
    assert res.base.mean() == 1.0


def _known(site, basis, X=None):
    X = np.zeros((2, D)) if X is None else X
    mean, pool = (X @ basis.T).mean(0), X @ basis.T
    return Substrate(description="known", size=len(basis),
                     ops=[subspace_ablation(site, basis, method="mean", mean=mean, pool=pool)],
                     random_ops=lambda seed: [subspace_ablation(
                         site, random_subspace(D, len(basis), seed), method="zero")],
                     details={})


@pytest.mark.parametrize("method", ["zero", "mean", "resample"])
def test_ablating_the_known_direction_drops_to_chance_and_a_random_one_does_not(method):
    model, tokens, answers, u, X, _ = planted_model()
    site = Site(0, "resid_post")
    basis = u[None, :]
    coords = X @ basis.T
    sub = Substrate(description="u", size=1, details={},
                    ops=[subspace_ablation(site, basis, method=method, mean=coords.mean(0), pool=coords,
                                           seed=3)],
                    random_ops=lambda seed: [subspace_ablation(site, random_subspace(D, 1, seed),
                                                               method="mean", mean=np.zeros(1))])
    res = necessity(model, tokens, answers, sub, n_random=20, seed=0)
    assert res.base.mean() == 1.0
    if method == "resample":  # each row takes a random example's sign: right half the time
        assert 0.3 <= res.ablated.mean() <= 0.7
    else:  # the u-coordinate is 0 (the balanced mean is 0): every prompt reads as A
        assert res.ablated.mean() == pytest.approx(0.5)
    assert res.drop.mean() == pytest.approx(res.base.mean() - res.ablated.mean())
    assert res.random_accuracy >= 0.9  # a random direction of R^64 holds ~1/8 of u
    assert res.control.mean() <= 0.1


def test_probe_direction_substrate_inlp_removes_the_label():
    model, tokens, answers, u, X, sign = planted_model()
    site = Site(0, "resid_post")
    y = (sign > 0).astype(int)
    one = probe_direction_substrate(site, X, y, n_directions=1, C=1.0)
    assert one.size == 1
    cos = abs(float(one.basis[0] @ u))
    # 40 points in R^64 are separable along many directions: the first probe spreads its weight
    # (cos 0.32 with u) and removing it leaves the answer intact; INLP's further rounds are needed
    assert 0.1 < cos < 0.9
    assert necessity(model, tokens, answers, one, control=False).ablated.mean() >= 0.9
    np.testing.assert_allclose(np.abs(orthonormal_rows(np.vstack([u, 2 * u]))), u[None, :])  # one direction
    three = probe_direction_substrate(site, X, y, n_directions=3, C=1.0)
    assert three.size == 3 and three.details["dimension"] == 3
    res = necessity(model, tokens, answers, three, n_random=10, seed=1)
    assert res.ablated.mean() <= 0.6  # near chance (0.5)
    assert res.random_accuracy >= 0.9
    assert res.drop.mean() - res.control.mean() >= 0.35


def test_subspace_ablation_equals_the_projection_formula():
    model, tokens, _, _, X, _ = planted_model()
    from probekit.interventions import Read, run_with_interventions

    site = Site(0, "resid_post")
    basis = random_subspace(D, 3, seed=4)
    mean = np.array([0.5, -1.0, 2.0])
    out = run_with_interventions(model, tokens[:5], [subspace_ablation(site, basis, method="mean", mean=mean),
                                                    Read(site=site)], logits="none")
    got = out.reads[site][:, 0].double().numpy()
    v = X[:5]
    want = v - (v @ basis.T - mean) @ basis
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(got @ basis.T, np.tile(mean, (5, 1)), atol=1e-5)


def test_unit_substrate_random_sets_have_its_size_and_mean_ablation_uses_selection_means():
    X = np.arange(12.0).reshape(3, 4)
    sub = unit_substrate(Site(0, "resid_post"), [1, 3], X, method="mean")
    assert sub.size == 2 and sub.ops[0].features == (1, 3)
    np.testing.assert_allclose(sub.ops[0].mean.numpy(), X.mean(0))
    for seed in range(5):
        (op,) = sub.random_ops(seed)
        assert len(op.features) == 2 and len(set(op.features)) == 2
    with pytest.raises(Exception, match="distinct indices in 0..3"):
        unit_substrate(Site(0, "resid_post"), [4], X)


def test_necessity_kind_on_the_planted_model():
    from probekit.hypotheses.kinds.necessity import NecessitySpec
    from probekit.hypotheses.kinds.necessity import necessity as kind
    from probekit.suites.spec import StatsSpec

    model, tokens, answers, _, X, sign = planted_model()
    site = Site(0, "resid_post")
    idx = np.arange(N_INPUT)
    ex = examples(tokens, {"label": list((sign > 0).astype(int)), "answer": answers},
                  {"train": idx, "test": idx})
    ctx = FakeContext(model=model, examples=ex, acts={site: torch.as_tensor(X)},
                      stats=StatsSpec(seed=0))
    m = kind(NecessitySpec(site="resid_post@0", n_directions=3, n_random=5, also_split="train"),
             ctx, control=True)
    assert m.metric == "accuracy drop" and m.n == N_INPUT
    assert m.details["base_accuracy"] == 1.0 and m.details["ablated_accuracy"] <= 0.6
    assert m.details["random_accuracy"] >= 0.9 and m.values.mean() >= 0.4
    assert m.details["train_drop"] == pytest.approx(m.values.mean())
    units = kind(NecessitySpec(substrate="units", site="resid_post@0", units=(0,), method="zero",
                               n_random=5), ctx, control=True)
    assert units.details["ablated_accuracy"] == pytest.approx(0.5)  # unit 0 is u itself
    excess = kind(NecessitySpec(substrate="units", site="resid_post@0", units=(0,), method="zero",
                                n_random=5, excess=True), ctx, control=False)
    assert excess.control is None and excess.metric == "accuracy drop beyond random"
    np.testing.assert_allclose(excess.values, units.values - units.control)


def test_key_frequencies_of_the_grokked_checkpoint_are_necessary_and_random_ones_are_not():
    """Nanda et al.'s key frequencies: removing the 5 of the embedding leaves chance (1/53)."""
    from pathlib import Path

    import probekit
    from probekit.grokking.fourier import frequency_power
    from probekit.hypotheses.necessity import key_frequency_substrate

    model = probekit.load_checkpoint(Path(__file__).resolve().parents[2] / "probes" / "checkpoints" / "modadd-p53")
    p = 53
    sub = key_frequency_substrate(model, p, k=5)
    keys = sub.details["key_frequencies"]
    edited = sub.ops[0].table.double().numpy()
    power = frequency_power(edited[:p], p).sum(1)
    before = frequency_power(model.W_E.detach().double().numpy()[:p], p).sum(1)
    assert power[keys].max() < 1e-8 * before[keys].min()  # the key components are gone
    others = [f for f in range(1, 27) if f not in keys]
    np.testing.assert_allclose(power[others], before[others], rtol=1e-5)  # the rest untouched (float32)
    np.testing.assert_allclose(edited[p:], model.W_E.detach().double().numpy()[p:])  # "=" row kept
    pairs = np.random.default_rng(0).choice(p * p, 300, replace=False)
    toks = [[int(x // p), int(x % p), p] for x in pairs]
    res = necessity(model, toks, [(a + b) % p for a, b, _ in toks], sub, n_random=3, seed=0)
    assert res.base.mean() > 0.98 and res.ablated.mean() < 0.05 and res.random_accuracy > 0.9
    for seed in range(3):
        (op,) = sub.random_ops(seed)
        rp = frequency_power(op.table.double().numpy()[:p], p).sum(1)
        assert (rp[keys] > 0).all() and (rp[1:] < 1e-8 * before[1:].min()).sum() == 5  # 5 non-key frequencies removed
