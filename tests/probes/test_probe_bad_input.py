"""Issue 27's probe rows: missing labels and NaN activations give probekit's one-line errors."""

import numpy as np
import pytest
import torch

from probekit.errors import DataError, NonFiniteError
from probekit.probes import DiffMeansProbe, LogisticProbe, RidgeProbe, sweep_layers


def _data(n=40, d=5, seed=0):
    rng = np.random.default_rng(seed)
    return rng.normal(size=(n, d)), rng.integers(0, 2, n)


@pytest.mark.parametrize("bad", [np.nan, None])
def test_sweep_refuses_missing_labels_naming_rows(bad):
    X, y = _data()
    lab = y.astype(object if bad is None else float)
    lab[[3, 7]] = bad
    err = NonFiniteError if bad is not None else DataError
    with pytest.raises(err, match=r"labels are missing .* 2 row\(s\) \(3, 7\)"):
        sweep_layers(torch.tensor(X[None]), lab, train_idx=np.arange(30), test_idx=np.arange(30, 40))


def test_sweep_refuses_nan_activations_naming_layer_and_rows():
    X, y = _data()
    acts = torch.tensor(np.stack([X, X, X]))
    acts[1, 5, 2] = float("nan")
    acts[1, 9, 0] = float("inf")
    with pytest.raises(NonFiniteError, match=r"layer\(s\) \[1\], 2 row\(s\) \(5, 9\)"):
        sweep_layers(acts, y, train_idx=np.arange(30), test_idx=np.arange(30, 40))


@pytest.mark.parametrize(
    "probe", [LogisticProbe(C=1.0), LogisticProbe(), RidgeProbe(), DiffMeansProbe()]
)
def test_probes_refuse_nan_naming_rows(probe):
    X, y = _data()
    X[12, 1] = np.nan
    with pytest.raises(NonFiniteError, match=r"X contains NaN or inf values at 1 row\(s\) \(12\)"):
        probe.fit(X, y)
    X[12, 1] = 0.0
    probe.fit(X, y)
    X[4, 0] = np.inf
    with pytest.raises(NonFiniteError, match=r"row\(s\) \(4\)"):
        probe.predict(X)


def test_probes_refuse_nan_targets():
    X, y = _data()
    t = y.astype(float)
    t[2] = np.nan
    with pytest.raises(NonFiniteError, match=r"y are missing .* \(2\)"):
        RidgeProbe().fit(X, t)
