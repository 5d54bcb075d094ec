"""Probe claims: held-out correctness, the shuffled-label null and selectivity, against sklearn."""

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from probekit.errors import ConfigError
from probekit.executor import InProcessExecutor
from probekit.probes import LogisticProbe
from probekit.probes.claims import probe_correct, selectivity, shuffled_label_accuracies
from probekit.probes.control import control_labels


def _data(n=120, d=6, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, 3, n)
    X = rng.normal(size=(n, d)) + 4.0 * np.eye(3, d)[y]
    return X, y, np.arange(0, n, 2), np.arange(1, n, 2)


def test_probe_correct_matches_sklearn_on_standardised_features():
    X, y, train, test = _data()
    got = probe_correct(X, y, train, test, C=0.5, max_iter=2000)
    ref = make_pipeline(StandardScaler(), LogisticRegression(C=0.5, max_iter=2000))
    want = (ref.fit(X[train], y[train]).predict(X[test]) == y[test]).astype(float)
    np.testing.assert_array_equal(got, want)
    assert got.mean() > 0.8


def test_shuffled_label_null_is_near_chance_and_seeded():
    X, y, train, test = _data()
    null = shuffled_label_accuracies(X, y, train, test, seeds=[1, 2, 3, 4],
                                     executor=InProcessExecutor(progress=False))
    assert null.shape == (4,) and null.mean() < 0.6  # chance 1/3, the real probe > 0.8
    y1 = np.random.default_rng(2).permutation(y[train])
    probe = LogisticProbe(C=1.0, max_iter=200).fit(X[train], y1)
    assert null[1] == pytest.approx(np.mean(probe.predict(X[test]) == y[test]))


def test_selectivity_of_a_type_lookup_is_zero_and_of_a_label_readout_is_positive():
    types = np.tile(np.arange(12), 10)
    X = np.eye(12)[types] * 5.0  # one-hot of the type: any function of the type is decodable
    res = selectivity(X, types % 3, types.tolist(), np.arange(60), np.arange(60, 120))
    np.testing.assert_array_equal(res.task, res.control)
    assert res.n_types == 12 and res.task.mean() == 1.0
    ctrl = control_labels(types, task_labels=types % 3, random_state=0)  # the seed-0 map
    assert len(set(zip(types, ctrl, strict=True))) == 12  # consistent per type
    with pytest.raises(ConfigError, match="one type"):
        selectivity(X, types % 3, [0] * 120, np.arange(60), np.arange(60, 120))
    with pytest.raises(ConfigError, match="n_control_maps"):
        selectivity(X, types % 3, types.tolist(), np.arange(60), np.arange(60, 120), n_control_maps=0)
