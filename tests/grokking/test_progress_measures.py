"""Nanda et al. (2023) progress measures: exact values on constructed grids, brute-force references."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from probekit.errors import ConfigError, DataError, NonFiniteError
from probekit.executor import InProcessExecutor
from probekit.grokking.fourier import fourier_basis
from probekit.grokking.progress_measures import (
    NeuronPath,
    ablated_logits,
    crossing_step,
    excluded_logits,
    fourier_component_norms,
    gini,
    logit_margin,
    modular_logit_grid,
    modular_pair_loss,
    neuron_excluded_logits,
    neuron_path,
    neuron_restricted_logits,
    progress_measures,
    restricted_logits,
    sum_direction_power,
    sum_directions,
    sum_squared_weights,
)

P = 11
SERIES = Path(__file__).resolve().parents[2] / "probes" / "checkpoints" / "modadd-p53-series"


def _grid(seed=0, p=P):
    return np.random.default_rng(seed).normal(size=(p, p, p))


def _sum_only(seed=0, p=P):
    """A grid whose logits depend on the inputs only through (a + b) mod p."""
    f = np.random.default_rng(seed).normal(size=(p, p))  # f[s, c]
    a, b = np.meshgrid(np.arange(p), np.arange(p), indexing="ij")
    return f[(a + b) % p]


def test_sum_directions_are_nandas_2d_fourier_terms():
    # notebook: cos(w(a+b)) = (cos_a cos_b - sin_a sin_b) / sqrt 2 in the 2-D Fourier basis
    basis = fourier_basis(P)
    d = sum_directions(P, [1, 3, 5])
    for i, k in enumerate([1, 3, 5]):
        cos, sin = basis[2 * k - 1], basis[2 * k]
        ref_cos = (np.outer(cos, cos) - np.outer(sin, sin)).ravel() / np.sqrt(2)
        ref_sin = (np.outer(sin, cos) + np.outer(cos, sin)).ravel() / np.sqrt(2)
        np.testing.assert_allclose(d[2 * i], ref_cos, atol=1e-9)
        np.testing.assert_allclose(d[2 * i + 1], ref_sin, atol=1e-9)
    np.testing.assert_allclose(d @ d.T, np.eye(6), atol=1e-9)


def test_restricted_with_every_frequency_is_the_average_over_equal_sums():
    # brute force: projecting on the constant + every sum direction = averaging L over the
    # pairs with the same (a + b) mod p
    x = _grid()
    full = restricted_logits(x, range(1, (P - 1) // 2 + 1))
    a, b = np.meshgrid(np.arange(P), np.arange(P), indexing="ij")
    s = (a + b) % P
    ref = np.stack([x[s == v].mean(0) for v in range(P)])[s]
    np.testing.assert_allclose(full, ref, atol=1e-9)


def test_restricted_loss_equals_full_loss_when_all_frequencies_are_kept():
    x = _sum_only()
    kept = restricted_logits(x, range(1, (P - 1) // 2 + 1))
    np.testing.assert_allclose(kept, x, atol=1e-9)
    np.testing.assert_allclose(modular_pair_loss(kept), modular_pair_loss(x), atol=1e-9)


def test_excluded_loss_equals_full_loss_when_none_are_removed():
    x = _grid(1)
    np.testing.assert_allclose(excluded_logits(x, []), x, atol=0)
    # restricted to no frequency: the constant over inputs only
    np.testing.assert_allclose(restricted_logits(x, []), np.broadcast_to(x.mean((0, 1)), x.shape))


def test_planted_key_frequencies_restricted_exact_excluded_at_chance():
    # L = sum_k 5 cos(w_k (a + b - c)): lies in the key sum directions only
    a, b, c = np.meshgrid(np.arange(P), np.arange(P), np.arange(P), indexing="ij")
    x = sum(5 * np.cos(2 * np.pi * k * (a + b - c) / P) for k in (2, 4))
    np.testing.assert_allclose(restricted_logits(x, [2, 4]), x, atol=1e-9)
    np.testing.assert_allclose(excluded_logits(x, [2, 4]), 0, atol=1e-9)
    assert modular_pair_loss(excluded_logits(x, [2, 4])).mean() == pytest.approx(np.log(P))
    power = sum_direction_power(x)
    assert set(np.argsort(-power)[:2]) == {2, 4} and power[[0, 1, 3, 5]].max() < 1e-20
    # the power of every sum direction plus the constant is the norm of the (a+b)-part
    y = _grid(2)
    np.testing.assert_allclose(sum_direction_power(y).sum(),
                               (restricted_logits(y, range(1, 6)) ** 2).sum(), rtol=1e-9)


def test_pair_loss_and_margin_match_torch_and_brute_force():
    x = _grid(3)
    a, b = np.meshgrid(np.arange(P), np.arange(P), indexing="ij")
    label = torch.tensor(((a + b) % P).ravel())
    ref = torch.nn.functional.cross_entropy(torch.tensor(x.reshape(-1, P)), label, reduction="none")
    np.testing.assert_allclose(modular_pair_loss(x).ravel(), ref.numpy(), atol=1e-9)
    m = logit_margin(x).ravel()
    flat = x.reshape(-1, P)
    for i in range(0, P * P, 7):
        y = int(label[i])
        assert m[i] == pytest.approx(flat[i, y] - np.delete(flat[i], y).max())


def test_gini_closed_forms_and_brute_force():
    for n in (1, 2, 7, 113):
        one_hot = np.zeros(n)
        one_hot[n // 2] = 3.0
        assert gini(one_hot) == pytest.approx(1 - 1 / n)
        assert gini(np.full(n, 2.5)) == pytest.approx(0.0, abs=1e-12)
    x = np.random.default_rng(4).exponential(size=40)
    ref = np.abs(x[:, None] - x[None, :]).sum() / (2 * x.size**2 * x.mean())  # mean abs difference
    assert gini(x) == pytest.approx(ref, rel=1e-9)
    assert gini(np.zeros(5)) == 0.0 and gini(x * 7.0) == pytest.approx(gini(x))
    with pytest.raises(DataError, match="non-negative"):
        gini(np.array([1.0, -1.0]))


def test_fourier_component_norms_parseval_and_planted_frequency():
    w = np.random.default_rng(5).normal(size=(P, 6))
    norms = fourier_component_norms(w)
    assert (norms**2).sum() == pytest.approx((w**2).sum(), rel=1e-9)
    np.testing.assert_allclose(norms, np.linalg.norm(fourier_basis(P) @ w, axis=1))
    a = np.arange(P)
    planted = np.stack([np.cos(2 * np.pi * 3 * a / P)] * 4, axis=1)  # one component: cos 3
    n3 = fourier_component_norms(planted)
    assert np.argmax(n3) == 5 and gini(n3) == pytest.approx(1 - 1 / P, abs=1e-9)


def test_sum_squared_weights_matches_torch():
    params = [torch.randn(3, 4, generator=torch.Generator().manual_seed(i)) for i in range(3)]
    assert sum_squared_weights(params) == pytest.approx(
        float(sum((t.double() ** 2).sum() for t in params)), rel=1e-9)


def test_crossing_step_interpolates():
    steps = [0, 100, 200, 300]
    assert crossing_step(steps, [4.0, 3.0, 1.0, 0.5], 2.0) == pytest.approx(150.0)
    assert crossing_step(steps, [1.0, 3.0, 1.0, 0.5], 2.0) == 0.0
    assert crossing_step(steps, [4.0, 3.0, 3.0, 2.5], 2.0) == float("inf")


def test_bad_keys_and_grids_are_refused():
    with pytest.raises(ConfigError, match=r"1\.\.5"):
        restricted_logits(_grid(), [6])
    with pytest.raises(ConfigError, match="distinct"):
        excluded_logits(_grid(), [2, 2])


def test_series_on_the_shipped_checkpoints_matches_their_training_logs():
    p = 53
    from probekit.testbeds import get_task

    train = get_task("modular_addition", p=p, train_fraction=0.6, seed=0).splits()["train"]
    mask = np.zeros((p, p), bool)
    mask[train.metadata["a"], train.metadata["b"]] = True
    steps = [1000, 100]
    keys = (2, 7, 12, 13, 20)  # the top-5 sum frequencies of step 1000 (keys=None finds them)
    series = progress_measures([(s, SERIES / f"step_{s:07d}") for s in steps], train_mask=mask,
                               keys=keys, executor=InProcessExecutor(check_picklable=True,
                                                                     progress=False))
    assert series.steps.tolist() == [100, 1000] and series.keys == keys
    for pt in series.points:
        logged = json.loads((SERIES / f"step_{pt.step:07d}" / "config.json").read_text())
        metrics = logged["extra"]["metrics"]
        assert pt.test_acc == pytest.approx(metrics["test_id/acc"], abs=1e-12)
        assert pt.test_loss == pytest.approx(metrics["test_id/loss"], abs=2e-3)  # '=' class dropped
    final = series.points[-1]
    assert final.key_power_share > 0.99  # the grokked logits live in 5 sum frequencies
    assert final.restricted_loss < final.test_loss < final.excluded_loss
    assert final.gini_embed > series.points[0].gini_embed


# --- the neuron path (Nanda et al.'s restricted / excluded loss) vs the full-logit projection ---


def _attention_carrier(p=31, keys=(3, 7), eps=0.05, amp=4.0):
    """A 1-layer model whose attention path writes ``amp * sum_k cos(w_k (a + b - c))`` into the
    logits and whose MLP does not depend on the input at all.

    Head pairs read score and value from ``cos(w a)`` / ``sin(w a)`` embedding dimensions with
    scores ``eps * cos`` (or ``sin``); '=' gets score -30 (no attention). To first order in
    ``eps`` the softmax over (a, b) is ``1/2 + (s(a) - s(b)) / 4``, whose cross terms are
    ``-(eps/2) cos a cos b``, ``-(eps/2) sin a sin b`` and ``-(eps/4) sin(a + b)``; the unembedding
    combines them into ``amp cos(w (a + b - c))`` (error O(eps^2), about 5e-3 here). The MLP
    reads nothing (ReLU(0 x + 1) = 1 on every input) and writes a constant into a dimension the
    unembedding maps to small random logits: its neuron activations hold no key frequency.
    """
    from probekit.models.config import ModelConfig
    from probekit.models.native import build_model

    K = len(keys)
    d = 1 + 2 * K + 3 * K  # '=' flag | cos, sin per key | three head outputs per key
    model = build_model(ModelConfig(n_layers=1, d_model=d, n_heads=3 * K, d_head=1,
                                    d_vocab=p + 1, n_ctx=3, d_mlp=4, normalization_type=None))
    params = {n.replace("._original_component", ""): v for n, v in model.named_parameters()}
    x = np.arange(p)
    with torch.no_grad():
        for v in params.values():
            v.zero_()
        E, U = params["tok_embed.weight"], params["head.weight"]
        q, k, v, o = (params[f"layers.0.attn.{n}.weight"] for n in "qkvo")
        E[p, 0] = 1.0
        for i, f in enumerate(keys):
            w = 2 * np.pi * f * x / p
            cd, sd = 1 + 2 * i, 2 + 2 * i
            E[:p, cd], E[:p, sd] = torch.tensor(np.cos(w)), torch.tensor(np.sin(w))
            for j, (score_dim, value_dim) in enumerate(((cd, cd), (sd, sd), (cd, sd))):
                h = 3 * i + j
                q[h, 0], k[h, score_dim], k[h, 0], v[h, value_dim] = 1.0, eps, -30.0, 1.0
                o[1 + 2 * K + h, h] = 1.0
            out = 1 + 2 * K + 3 * i
            U[:p, out] = torch.tensor(-2 * amp / eps * np.cos(w))
            U[:p, out + 1] = torch.tensor(2 * amp / eps * np.cos(w))
            U[:p, out + 2] = torch.tensor(-4 * amp / eps * np.sin(w))
        params["layers.0.mlp.fc_in.bias"][:] = 1.0
        params["layers.0.mlp.fc_out.weight"][0] = 1.0
        U[:p, 0] = 0.1 * torch.randn(p, generator=torch.Generator().manual_seed(0))
    return model.eval()


def test_attention_carried_key_signal_counts_only_on_the_logit_path():
    p, keys = 31, (3, 7)
    model = _attention_carrier(p, keys)
    logits = modular_logit_grid(model, p)
    neurons = neuron_path(model, p)
    np.testing.assert_allclose(neurons.acts, 1.0, atol=1e-6)  # the MLP ignores its input
    a, b, c = np.meshgrid(np.arange(p), np.arange(p), np.arange(p), indexing="ij")
    planted = sum(4.0 * np.cos(2 * np.pi * k * (a + b - c) / p) for k in keys)
    mean = logits.mean((0, 1))
    # the full-logit projection keeps the attention path's key components (O(eps^2) error) ...
    kept = restricted_logits(logits, keys) - mean
    assert np.abs(kept - planted).max() < 6e-3
    logit_path = modular_pair_loss(restricted_logits(logits, keys)).mean()
    assert logit_path == pytest.approx(modular_pair_loss(planted + mean).mean(), abs=2e-3)
    assert logit_path == pytest.approx(0.551, abs=0.01)
    # ... the paper's restricted loss keeps only the neuron path's: the constant logits remain,
    # whose loss is logsumexp(m) - mean(m) >= log p
    paper = modular_pair_loss(neuron_restricted_logits(logits, neurons, keys)).mean()
    const = float(np.log(np.exp(mean - mean.max()).sum()) + mean.max() - mean.mean())
    assert paper == pytest.approx(const, abs=1e-9)
    assert paper == pytest.approx(3.544, abs=0.01) and paper > np.log(p) > 6 * logit_path
    # excluded: removing the neuron path's key components changes nothing here
    np.testing.assert_allclose(neuron_excluded_logits(logits, neurons, keys), logits, atol=1e-9)
    assert modular_pair_loss(excluded_logits(logits, keys)).mean() > 100  # the logit path's does


def _notebook_losses(model, p, keys):
    """The authors' get_restricted_loss / get_excluded_loss (progress-measures-paper notebook),
    in torch on the model's cache; restricted on every pair here."""
    a, b = np.meshgrid(np.arange(p), np.arange(p), indexing="ij")
    tokens = torch.tensor(np.stack([a.ravel(), b.ravel(), np.full(p * p, p)], 1))
    with torch.no_grad():
        logits, cache = model.run_with_cache(tokens)
    logits = logits[:, -1, :p].double()
    acts = cache["blocks.0.mlp.hook_post"][:, -1].double()
    W_out, W_U = model.W_out[0].detach().double(), model.W_U[:, :p].detach().double()
    approx = torch.zeros_like(acts) + acts.mean(0)
    key_part = torch.zeros_like(acts)
    A, B = torch.arange(p)[:, None], torch.arange(p)[None, :]
    for f in keys:
        for fn in (torch.cos, torch.sin):
            vec = fn(f * 2 * torch.pi / p * (A + B)).double()
            vec = (vec / vec.norm()).reshape(-1, 1)
            key_part += (acts * vec).sum(0) * vec
    approx += key_part
    restricted = approx @ W_out @ W_U
    restricted += logits.mean(0, keepdim=True) - restricted.mean(0, keepdim=True)
    resid = (acts - key_part) @ W_out + cache["blocks.0.hook_resid_mid"][:, -1].double()
    excluded = resid @ W_U
    return restricted.numpy().reshape(p, p, p), excluded.numpy().reshape(p, p, p), W_out, W_U


def test_neuron_path_equals_the_authors_notebook_on_a_shipped_checkpoint():
    from probekit.models import load_checkpoint

    p, keys = 53, (2, 7, 12, 13, 20)
    model = load_checkpoint(SERIES / "step_0000050")  # mid-circuit: the paths differ most
    logits = modular_logit_grid(model, p)
    neurons = neuron_path(model, p)
    restricted, excluded, W_out, W_U = _notebook_losses(model, p, keys)
    # float32 forwards (ours batched through probekit, theirs one run_with_cache): logits of
    # size ~30 agree to 1e-3
    np.testing.assert_allclose(neuron_restricted_logits(logits, neurons, keys), restricted,
                               atol=1e-3)
    # ours keeps the input-constant biases the notebook drops: b_out W_U (+ b_U)
    bias = (model.b_out[0].detach().double() @ W_U).numpy() + model.b_U[:p].detach().double().numpy()
    np.testing.assert_allclose(neuron_excluded_logits(logits, neurons, keys), excluded + bias,
                               atol=1e-3)
    # the two paths differ by the attention path's key components: 0.056 nats at step 50 (and
    # 0.0033 / 0.0004 at steps 100 / 200, 1e-8 at 1000)
    paper = modular_pair_loss(ablated_logits(logits, keys, which="restricted",
                                             neurons=neurons)).mean()
    full = modular_pair_loss(ablated_logits(logits, keys, which="restricted", path="logits")).mean()
    assert paper == pytest.approx(2.148, abs=2e-3) and full == pytest.approx(2.092, abs=2e-3)


def test_neuron_path_is_refused_where_it_is_undefined():
    from probekit.models.config import ModelConfig
    from probekit.models.native import build_model

    two = build_model(ModelConfig(n_layers=2, d_model=8, n_heads=2, d_head=4, d_vocab=12, n_ctx=3,
                                  normalization_type=None))
    with pytest.raises(ConfigError, match="path='logits'"):
        neuron_path(two, 11)
    with pytest.raises(ConfigError, match="neurons=neuron_path"):
        ablated_logits(_grid(), [1], which="restricted", path="neuron")
    with pytest.raises(NonFiniteError, match="NeuronPath"):
        NeuronPath(acts=np.full((P, P, 4), np.nan), w_logit=np.zeros((4, P)))
    neurons = NeuronPath(acts=np.zeros((P + 2, P + 2, 4)), w_logit=np.zeros((4, P + 2)))
    with pytest.raises(DataError, match="same model"):
        neuron_restricted_logits(_grid(), neurons, [1])
