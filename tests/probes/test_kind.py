"""Probe kinds are a registry of strategy objects: a new kind needs no edit outside its module."""

import subprocess
import sys

import numpy as np
import pytest
import torch

from probekit.errors import ConfigError
from probekit.probes import (
    GroupFit,
    ProbeKind,
    SweepConfig,
    probe_kind,
    register_probe_kind,
    registered_probe_kinds,
    sweep_layers,
)
from probekit.probes.kind import PROBE_KINDS


@pytest.fixture
def nearest_mean():
    """A toy classifier kind (nearest class mean, accuracy), registered for one test."""

    class NearestMean(ProbeKind):
        name = "toy_nearest_mean"
        metric = "accuracy"
        chance_text = "majority-class rate of the test split"

        def fit_batched(self, X, labels, train_idx, splits, config):
            Xn = X.double().cpu().numpy()
            ytr = labels[train_idx]
            classes = np.unique(ytr)
            means = np.stack([Xn[:, train_idx[ytr == c]].mean(1) for c in classes], 1)  # (G, k, d)

            def predict(idx):
                d2 = ((Xn[:, idx, None, :] - means[:, None]) ** 2).sum(-1)  # (G, m, k)
                return classes[d2.argmin(-1)]

            G = X.shape[0]
            return GroupFit(train=self.score(predict(train_idx), ytr),
                            val=self.score(predict(train_idx), ytr),  # no CV: the toy has no grid
                            hyperparameter=np.full(G, np.nan),
                            predictions={k: predict(idx) for k, idx in splits.items()})

        def score(self, predictions, y):
            return (predictions == y).mean(-1)

        def chance(self, y_test):
            _, counts = np.unique(y_test, return_counts=True)
            return float(counts.max() / counts.sum())

    with PROBE_KINDS.temporary():
        register_probe_kind(NearestMean)
        yield NearestMean


def planted(L=3, n=300, d=8, layer=1, seed=0):
    """Two classes separated by a mean shift at ``layer`` only."""
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 2, n)
    acts = rng.normal(size=(L, n, d))
    acts[layer] += 3.0 * y[:, None] * np.eye(d)[0]
    return torch.from_numpy(acts.astype(np.float32)), y


def test_registered_builtins_and_unknown_kind_lists_them():
    assert {"diffmeans", "logistic", "ridge"} <= set(registered_probe_kinds())
    assert probe_kind("ridge").metric == "r2" and not probe_kind("ridge").is_classifier
    assert probe_kind("logistic").supports_permutation and not probe_kind("ridge").supports_control
    with pytest.raises(ConfigError, match=r"unknown probe kind 'svm'; registered probe kinds are "
                       r"\[.*'diffmeans', 'logistic'.*'ridge'.*\]"):  # + kinds other tests add
        probe_kind("svm")
    with pytest.raises(ConfigError, match="unknown probe kind 'svm'"):
        SweepConfig(probe="svm")


def test_builtin_chance_levels():
    y = np.array(["a", "a", "a", "b"])
    assert probe_kind("logistic").chance(y) == 0.75
    assert probe_kind("diffmeans").chance(y) == 0.5
    assert probe_kind("ridge").chance(np.arange(4.0)) == 0.0


def test_toy_kind_runs_a_sweep_without_edits_elsewhere(nearest_mean):
    assert "toy_nearest_mean" in registered_probe_kinds()
    acts, y = planted()
    res = sweep_layers(acts, y, train_idx=np.arange(200), test_idx=np.arange(200, 300),
                       config=SweepConfig(probe="toy_nearest_mean"))
    assert res.probe == "toy_nearest_mean" and res.metric == "accuracy"
    assert res.best_layer == 1 and res.test[1] > 0.9 and res.test[0] < 0.65
    # the reference: nearest class mean by hand at the planted layer
    X, tr, te = acts[1].double().numpy(), np.arange(200), np.arange(200, 300)
    mu = np.stack([X[tr][y[tr] == c].mean(0) for c in (0, 1)])
    want = ((X[te, None] - mu) ** 2).sum(-1).argmin(-1)
    assert res.test[1] == pytest.approx((want == y[te]).mean())
    # the registry refuses a second class under the same name, and a kind without a test
    with pytest.raises(ConfigError, match=r"probe kind 'toy_nearest_mean' is already registered by "
                       r"\S*test_kind\.nearest_mean\.<locals>\.NearestMean; \S*Other cannot register"):
        register_probe_kind(type("Other", (nearest_mean,), {}))
    from probekit.probes import probe_permutation_test

    with pytest.raises(ConfigError, match="kinds with a permutation test"):
        probe_permutation_test(acts[1].numpy(), y, train_idx=np.arange(200),
                               test_idx=np.arange(200, 300), probe="toy_nearest_mean")


def test_sweep_config_checks_each_field_once():
    with pytest.raises(ConfigError, match=r"SweepConfig.cv must be >= 2 \(cross-validation folds\), got 1"):
        SweepConfig(cv=1)
    with pytest.raises(ConfigError, match=r"SweepConfig.confidence_level must be in \(0, 1\) \(e.g. 0.95\), got 1.5"):
        SweepConfig(confidence_level=1.5)
    with pytest.raises(ConfigError, match=r"SweepConfig.n_bootstrap must be >= 1000 \(percentile intervals need >= 1000 resamples\), got 200"):
        SweepConfig(n_bootstrap=200)
    acts, y = planted()
    split = dict(train_idx=np.arange(200), test_idx=np.arange(200, 300))
    with pytest.raises(TypeError, match="unexpected keyword argument 'C'"):
        SweepConfig(C=3)
    # the keyword form of 0.1.0 is gone: options go through the frozen config only
    with pytest.raises(TypeError, match="unexpected keyword argument 'cv'"):
        sweep_layers(acts, y, cv=3, **split)


def test_kind_registry_imports_no_torch():
    code = ("import sys; from probekit.probes.kind import registered_probe_kinds; "
            "print(registered_probe_kinds(), 'torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "('diffmeans', 'logistic', 'ridge') False"
