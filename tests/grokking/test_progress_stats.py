"""Progress measures with their bootstrap: brute-force references on constructed grids and series."""

from dataclasses import dataclass

import numpy as np
import pytest
import torch

from probekit.errors import DataError, NotApplicableError
from probekit.grokking.fourier import fourier_basis
from probekit.grokking.progress_measures import (
    ProgressPoint,
    ProgressSeries,
    crossing_step,
    gini,
    logit_margin,
    modular_pair_loss,
    restricted_logits,
    sum_direction_power,
)
from probekit.grokking.progress_stats import (
    ablation_loss,
    circuit_efficiency,
    fourier_gini_resamples,
    pair_split,
    restricted_loss_lead,
    top_key_frequencies,
)
from probekit.stats.bootstrap import bootstrap_indices

P = 11


@dataclass
class Weights:
    """The weights the measures read (a stand-in model)."""

    W_E: torch.Tensor
    W_out: torch.Tensor
    W_U: torch.Tensor

    def parameters(self):
        return [self.W_E, self.W_out, self.W_U]


def _model(seed=0):
    g = torch.Generator().manual_seed(seed)
    return Weights(W_E=torch.randn(P + 1, 6, generator=g, dtype=torch.float64),
                   W_out=torch.randn(1, 9, 6, generator=g, dtype=torch.float64),
                   W_U=torch.randn(6, P + 1, generator=g, dtype=torch.float64))


def _mask(seed=0):
    return np.random.default_rng(seed).random((P, P)) < 0.5


def test_pair_split_and_top_keys():
    mask = _mask()
    assert pair_split("all", mask).all() and (pair_split("test", mask) == ~mask).all()
    logits = np.random.default_rng(1).normal(size=(P, P, P))
    power = sum_direction_power(logits)
    keys = top_key_frequencies(logits, None, 2)
    assert sorted(power[1:], reverse=True)[:2] == [power[k] for k in keys]
    assert top_key_frequencies(logits, (3, 1), 2) == (3, 1)


def test_full_logit_ablation_loss_on_a_split():
    logits, mask = np.random.default_rng(2).normal(size=(P, P, P)), _mask(2)
    res = ablation_loss(None, logits, mask, which="restricted", keys=(1, 4), split="train",
                        path="logits")
    want = modular_pair_loss(restricted_logits(logits, (1, 4)))[mask]
    np.testing.assert_allclose(res.loss, want, rtol=1e-9)
    assert res.full_loss == pytest.approx(modular_pair_loss(logits)[mask].mean(), rel=1e-9)


@pytest.mark.parametrize("source", ["embed", "neuron_logit"])
def test_fourier_gini_resamples_recompute_the_norms_on_resampled_dimensions(source):
    model = _model()
    res = fourier_gini_resamples(model, P, source=source, n_bootstrap=1000, seed=3)
    w = (model.W_E.numpy()[:P] if source == "embed"
         else (model.W_out[0] @ model.W_U[:, :P]).numpy().T)
    norms = lambda x: np.linalg.norm(fourier_basis(P) @ x, axis=1)  # noqa: E731
    assert res.estimate == pytest.approx(gini(norms(w)), rel=1e-9) and res.n == w.shape[1]
    b = bootstrap_indices(w.shape[1], 1000, 3)[7]
    assert res.resamples[7] == pytest.approx(gini(norms(w[:, b])), rel=1e-9)


def test_circuit_efficiency_is_norm_per_mean_margin():
    model, mask = _model(), _mask(4)
    logits = np.random.default_rng(4).normal(size=(P, P, P))
    a, b = np.meshgrid(np.arange(P), np.arange(P), indexing="ij")
    logits[a, b, (a + b) % P] += 5.0  # every pair fitted: positive margins
    res = circuit_efficiency(model, logits, mask, split="train", n_bootstrap=1000, seed=0)
    norm = np.sqrt(sum(float((t**2).sum()) for t in model.parameters()))
    margin = logit_margin(logits)[mask]
    assert res.estimate == pytest.approx(norm / margin.mean(), rel=1e-9)
    assert res.param_norm == pytest.approx(norm) and res.n == mask.sum()
    b = bootstrap_indices(margin.size, 1000, 0)[5]
    assert res.resamples[5] == pytest.approx(norm / margin[b].mean(), rel=1e-9)
    with pytest.raises(NotApplicableError, match="margin"):
        circuit_efficiency(model, -logits, mask, n_bootstrap=1000, seed=0)


def _series(restricted_split="all"):
    """Per-pair losses falling linearly to 0, the restricted ones faster; train half of the pairs."""
    mask = _mask(5)
    rng = np.random.default_rng(5)
    scale_r, scale_t = rng.uniform(1, 3, (P, P)), rng.uniform(1, 3, (P, P))
    steps = [0, 100, 200, 300, 400]
    points = []
    for s in steps:
        r, t = scale_r * max(0.0, 1 - s / 200), scale_t * max(0.0, 1 - s / 350)
        rows = pair_split(restricted_split, mask)
        points.append(ProgressPoint(
            step=s, train_loss=0.0, test_loss=float(t[~mask].mean()),
            restricted_loss=float(r[rows].mean()), excluded_loss=0.0, train_acc=1.0,
            test_acc=0.0, gini_embed=0.0, gini_neuron_logit=0.0, sum_sq_weights=1.0,
            train_margin=1.0, norm_per_margin=1.0, key_power_share=1.0, pair_loss=t,
            restricted_pair_loss=r, excluded_pair_loss=r))
    return ProgressSeries(p=P, keys=(1,), points=tuple(points), train_mask=mask,
                          restricted_split=restricted_split)


@pytest.mark.parametrize("split", ["all", "test"])
def test_restricted_loss_lead_matches_brute_force_crossings(split):
    series = _series(split)
    res = restricted_loss_lead(series, threshold=1.0, n_bootstrap=1000, seed=1)
    rc = crossing_step(series.steps, series.curve("restricted_loss"), 1.0)
    tc = crossing_step(series.steps, series.curve("test_loss"), 1.0)
    assert (res.restricted_step, res.test_step) == (rc, tc) and res.estimate == tc - rc > 0
    b = bootstrap_indices(P * P, 1000, 1)[3]
    rows, test = pair_split(split, series.train_mask).ravel()[b], ~series.train_mask.ravel()[b]
    R = [pt.restricted_pair_loss.ravel()[b][rows].mean() for pt in series.points]
    T = [pt.pair_loss.ravel()[b][test].mean() for pt in series.points]
    want = crossing_step(series.steps, T, 1.0) - crossing_step(series.steps, R, 1.0)
    assert res.resamples[3] == pytest.approx(want, rel=1e-9) and res.n == P * P
    with pytest.raises(DataError, match="never falls"):
        restricted_loss_lead(series, threshold=-1.0, n_bootstrap=1000, seed=0)
