"""Nanda et al. (2023) progress measures: exact values on constructed grids, brute-force references."""

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from probekit.circuits.fourier import fourier_basis
from probekit.circuits.progress_measures import (
    crossing_step,
    excluded_logits,
    fourier_component_norms,
    gini,
    logit_margin,
    modular_pair_loss,
    progress_measures,
    restricted_logits,
    sum_direction_power,
    sum_directions,
    sum_squared_weights,
)
from probekit.errors import ConfigError, DataError  # noqa: F401
from probekit.executor import InProcessExecutor

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
        np.testing.assert_allclose(d[2 * i], ref_cos, atol=1e-12)
        np.testing.assert_allclose(d[2 * i + 1], ref_sin, atol=1e-12)
    np.testing.assert_allclose(d @ d.T, np.eye(6), atol=1e-12)


def test_restricted_with_every_frequency_is_the_average_over_equal_sums():
    # brute force: projecting on the constant + every sum direction = averaging L over the
    # pairs with the same (a + b) mod p
    x = _grid()
    full = restricted_logits(x, range(1, (P - 1) // 2 + 1))
    a, b = np.meshgrid(np.arange(P), np.arange(P), indexing="ij")
    s = (a + b) % P
    ref = np.stack([x[s == v].mean(0) for v in range(P)])[s]
    np.testing.assert_allclose(full, ref, atol=1e-12)


def test_restricted_loss_equals_full_loss_when_all_frequencies_are_kept():
    x = _sum_only()
    kept = restricted_logits(x, range(1, (P - 1) // 2 + 1))
    np.testing.assert_allclose(kept, x, atol=1e-12)
    np.testing.assert_allclose(modular_pair_loss(kept), modular_pair_loss(x), atol=1e-12)


def test_excluded_loss_equals_full_loss_when_none_are_removed():
    x = _grid(1)
    np.testing.assert_allclose(excluded_logits(x, []), x, atol=0)
    # restricted to no frequency: the constant over inputs only
    np.testing.assert_allclose(restricted_logits(x, []), np.broadcast_to(x.mean((0, 1)), x.shape))


def test_planted_key_frequencies_restricted_exact_excluded_at_chance():
    # L = sum_k 5 cos(w_k (a + b - c)): lies in the key sum directions only
    a, b, c = np.meshgrid(np.arange(P), np.arange(P), np.arange(P), indexing="ij")
    x = sum(5 * np.cos(2 * np.pi * k * (a + b - c) / P) for k in (2, 4))
    np.testing.assert_allclose(restricted_logits(x, [2, 4]), x, atol=1e-12)
    np.testing.assert_allclose(excluded_logits(x, [2, 4]), 0, atol=1e-12)
    assert modular_pair_loss(excluded_logits(x, [2, 4])).mean() == pytest.approx(np.log(P))
    power = sum_direction_power(x)
    assert set(np.argsort(-power)[:2]) == {2, 4} and power[[0, 1, 3, 5]].max() < 1e-20
    # the power of every sum direction plus the constant is the norm of the (a+b)-part
    y = _grid(2)
    np.testing.assert_allclose(sum_direction_power(y).sum(),
                               (restricted_logits(y, range(1, 6)) ** 2).sum(), rtol=1e-12)


def test_pair_loss_and_margin_match_torch_and_brute_force():
    x = _grid(3)
    a, b = np.meshgrid(np.arange(P), np.arange(P), indexing="ij")
    label = torch.tensor(((a + b) % P).ravel())
    ref = torch.nn.functional.cross_entropy(torch.tensor(x.reshape(-1, P)), label, reduction="none")
    np.testing.assert_allclose(modular_pair_loss(x).ravel(), ref.numpy(), atol=1e-12)
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
    assert gini(x) == pytest.approx(ref, rel=1e-12)
    assert gini(np.zeros(5)) == 0.0 and gini(x * 7.0) == pytest.approx(gini(x))
    with pytest.raises(DataError, match="non-negative"):
        gini(np.array([1.0, -1.0]))


def test_fourier_component_norms_parseval_and_planted_frequency():
    w = np.random.default_rng(5).normal(size=(P, 6))
    norms = fourier_component_norms(w)
    assert (norms**2).sum() == pytest.approx((w**2).sum(), rel=1e-12)
    np.testing.assert_allclose(norms, np.linalg.norm(fourier_basis(P) @ w, axis=1))
    a = np.arange(P)
    planted = np.stack([np.cos(2 * np.pi * 3 * a / P)] * 4, axis=1)  # one component: cos 3
    n3 = fourier_component_norms(planted)
    assert np.argmax(n3) == 5 and gini(n3) == pytest.approx(1 - 1 / P, abs=1e-9)


def test_sum_squared_weights_matches_torch():
    params = [torch.randn(3, 4, generator=torch.Generator().manual_seed(i)) for i in range(3)]
    assert sum_squared_weights(params) == pytest.approx(
        float(sum((t.double() ** 2).sum() for t in params)), rel=1e-12)


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
