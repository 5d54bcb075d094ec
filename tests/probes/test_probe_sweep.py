import numpy as np
import pytest
import torch
from sklearn.linear_model import LogisticRegression, Ridge
from sklearn.metrics import roc_auc_score

from probekit.errors import DeviceError
from probekit.probes import SweepConfig, sweep_layers
from probekit.probes._validation import check_layer_acts


def layered(L=5, n=1200, d=24, k=3, planted=3, seed=0, strength=0.5):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, k, n)
    acts = rng.normal(size=(L, n, d)).astype(np.float32) * rng.uniform(0.5, 2, (L, 1, d)).astype(np.float32)
    for ell in range(L):
        s = strength if ell == planted else strength * 0.25 * (ell % 2)
        acts[ell] += (rng.normal(size=(k, d)) * s)[y].astype(np.float32)
    return torch.from_numpy(acts), y


SPLIT = dict(train_idx=np.arange(800), test_idx=np.arange(800, 1000), ood_idx={"shifted": np.arange(1000, 1200)})


def test_logistic_sweep_recovers_planted_layer_and_matches_sklearn():
    acts, y = layered()
    acts[:, 1000:] += 0.7  # OOD: a mean shift
    res = sweep_layers(acts, y, config=SweepConfig(Cs=5, cv=3), **SPLIT)
    assert res.best_layer == 3
    assert res.test[3] > 0.8 and res.test[0] < 0.5
    assert res.test_ci_low[3] <= res.test[3] <= res.test_ci_high[3]
    assert res.ood_gap["shifted"][3] == pytest.approx(res.test[3] - res.ood["shifted"][3])
    tr, te = SPLIT["train_idx"], SPLIT["test_idx"]
    for ell in range(acts.shape[0]):
        X = acts[ell].double().numpy()
        m, s = X[tr].mean(0), X[tr].std(0)
        ref = LogisticRegression(C=res.hyperparameter[ell], tol=1e-8, max_iter=3000).fit((X[tr] - m) / s, y[tr])
        pred = ref.predict((X[te] - m) / s)
        assert (pred == res.test_predictions[ell]).mean() >= 0.99
        assert abs((pred == y[te]).mean() - res.test[ell]) <= 0.005 + 1e-12
    table = res.table()
    assert "3*" in table and "shifted" in table
    assert res.to_dict()["best"]["layer"] == 3


def test_null_labels_give_chance():
    acts, _ = layered(strength=0.0, seed=1)
    y = np.random.default_rng(5).integers(0, 2, 1200)
    res = sweep_layers(acts, y, config=SweepConfig(Cs=4, cv=3), **SPLIT)
    assert np.all(np.abs(res.test - 0.5) < 0.1)
    inside = (res.test_ci_low <= 0.5) & (res.test_ci_high >= 0.5)
    assert inside.mean() >= 0.6  # 95% CIs cover chance on (nearly) every layer


def test_diffmeans_sweep_auroc_matches_sklearn():
    acts, y = layered(k=2, planted=1, seed=2)
    res = sweep_layers(acts, y, config=SweepConfig(probe="diffmeans", cv=3), **SPLIT)
    assert res.best_layer == 1
    for ell in range(acts.shape[0]):
        assert res.test[ell] == pytest.approx(roc_auc_score(y[800:1000], res.test_predictions[ell]), abs=1e-12)
    X = acts[1].double().numpy()[:800]
    w = X[y[:800] == 1].mean(0) - X[y[:800] == 0].mean(0)
    mu = (X[y[:800] == 1].mean(0) + X[y[:800] == 0].mean(0)) / 2
    expected = (acts[1].double().numpy()[800:1000] - mu) @ w / np.linalg.norm(w)
    np.testing.assert_allclose(res.test_predictions[1], expected, atol=1e-5)


def test_ridge_sweep_matches_sklearn_and_finds_layer():
    rng = np.random.default_rng(3)
    acts = torch.from_numpy(rng.normal(size=(4, 1200, 10)))
    target = acts[2, :, 0].numpy() * 2 + rng.normal(size=1200) * 0.5
    res = sweep_layers(acts, target, config=SweepConfig(probe="ridge", alphas=[0.1, 10.0, 1000.0], cv=3), **SPLIT)
    assert res.best_layer == 2 and res.test[2] > 0.9
    X = acts[2].numpy()
    m, s = X[:800].mean(0), X[:800].std(0)
    ref = Ridge(alpha=res.hyperparameter[2]).fit((X[:800] - m) / s, target[:800])
    np.testing.assert_allclose(res.test_predictions[2], ref.predict((X[800:1000] - m) / s), atol=1e-6)


def test_dict_of_sites_batched_and_labelled():
    acts, y = layered(L=3, planted=2)
    sites = {"blocks.resid_post": acts, "hook_embed": acts[0], "mlp": acts[:, :, :8]}
    res = sweep_layers(sites, y, config=SweepConfig(Cs=3, cv=3, n_bootstrap=1000), **SPLIT)
    assert res.sites == ("blocks.resid_post",) * 3 + ("hook_embed", "mlp", "mlp", "mlp")
    assert res.layers == (0, 1, 2, None, 0, 1, 2)  # a 2-D string site has no layer, not 0
    assert res.best_site == "blocks.resid_post" and res.best_layer == 2
    assert res.test[3] == pytest.approx(res.test[0])  # same activations, same probe


def test_sweep_input_errors():
    acts, y = layered(L=2)
    with pytest.raises(ValueError, match="got 1200 activations but 1100 labels"):
        sweep_layers(acts, y[:1100], **SPLIT)
    with pytest.raises(ValueError, match="share 10 examples"):
        sweep_layers(acts, y, train_idx=np.arange(800), test_idx=np.arange(790, 900))
    with pytest.raises(ValueError, match=r"indices in \[800, 5800\].*only 1200"):
        sweep_layers(acts, y, train_idx=np.arange(800), test_idx=np.array([0, 5000]) + 800)
    with pytest.raises(ValueError, match=r"unknown probe kind 'svm'; registered probe kinds are "
                       r"\['diffmeans', 'logistic', 'ridge'\]; a new kind subclasses probekit\.probes\.ProbeKind"):
        sweep_layers(acts, y, config=SweepConfig(probe="svm"), **SPLIT)
    with pytest.raises(ValueError, match="diffmeans.*3 classes"):
        sweep_layers(acts, y, config=SweepConfig(probe="diffmeans"), **SPLIT)
    with pytest.raises(ValueError, match=r"shape \(layer, n, d\) or \(n, d\), got shape \(1, 2, 1200, 24\)"):
        check_layer_acts(acts.unsqueeze(0))  # sweep_layers' shape check (jaxtyping also flags it)


@pytest.mark.parametrize("probe", ["logistic", "ridge", "diffmeans"])
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_cuda_sweep_matches_cpu(probe):
    acts, y = layered(k=2 if probe == "diffmeans" else 3)
    target = acts[:, :, 0].numpy().mean(0) + 0.1 * y if probe == "ridge" else y
    cpu = sweep_layers(acts, target, config=SweepConfig(probe=probe, Cs=5, cv=3), **SPLIT)
    gpu = sweep_layers(acts, target, config=SweepConfig(probe=probe, Cs=5, cv=3, device="cuda"), **SPLIT)
    assert gpu.best_layer == cpu.best_layer
    np.testing.assert_allclose(gpu.test, cpu.test, atol=0.01)
    np.testing.assert_allclose(gpu.ood["shifted"], cpu.ood["shifted"], atol=0.01)


def test_device_argument_moves_activations():
    acts, y = layered(L=2, n=1200, d=8)
    res = sweep_layers(acts, y, config=SweepConfig(Cs=2, cv=2, device="cpu"), **SPLIT)
    same = sweep_layers(acts, y, config=SweepConfig(Cs=2, cv=2), **SPLIT)
    np.testing.assert_array_equal(res.test_predictions, same.test_predictions)
    auto = sweep_layers(acts, y, config=SweepConfig(Cs=2, cv=2, device="auto"), **SPLIT)
    np.testing.assert_allclose(auto.test, same.test, atol=0.01)
    with pytest.raises(ValueError, match="unknown device 'no-such-device'.*'auto', 'cpu'"):
        sweep_layers(acts, y, config=SweepConfig(Cs=2, cv=2, device="no-such-device"), **SPLIT)
    if not torch.cuda.is_available():
        with pytest.raises(DeviceError, match="no CUDA device; use 'auto' or 'cpu'"):
            sweep_layers(acts, y, config=SweepConfig(Cs=2, cv=2, device="cuda"), **SPLIT)
