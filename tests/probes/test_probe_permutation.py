"""Batched probe permutation test vs generic refits; calibration under the null; power."""

import numpy as np
import pytest

from probekit import probe_permutation_test as top_level
from probekit.probes import DiffMeansProbe, LogisticProbe, probe_permutation_test
from probekit.stats import permutation_test


def probe_data(n=240, d=6, sep=0.0, seed=0, k=2):
    rng = np.random.default_rng(seed)
    y = np.arange(n) % k
    X = rng.normal(size=(n, d)) + sep * rng.normal(size=(k, d))[y]
    return X, y


@pytest.mark.parametrize("probe", ["logistic", "diffmeans"])
def test_batched_fast_path_equals_generic_refits(probe):
    X, y = probe_data(sep=0.4, seed=2)
    tr, te = np.arange(160), np.arange(160, 240)

    def score(Xa, ya):
        if probe == "logistic":
            return LogisticProbe(C=0.5).fit(Xa[tr], ya[tr]).score(Xa[te], ya[te])
        return DiffMeansProbe().fit(Xa[tr], ya[tr]).score(Xa[te], ya[te])

    slow = permutation_test(score, X, y, n_permutations=30, random_state=7)
    fast = probe_permutation_test(X, y, train_idx=tr, test_idx=te, probe=probe, C=0.5, n_permutations=30, random_state=7)
    assert fast.statistic == pytest.approx(slow.statistic, abs=1e-9)
    np.testing.assert_allclose(fast.null_distribution, slow.null_distribution, atol=1e-9)
    assert fast.p_value == pytest.approx(slow.p_value)


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not __import__("torch").cuda.is_available(), reason="needs a CUDA device"))])
def test_logistic_permutation_device(device):
    X, y = probe_data(sep=0.4, seed=2, k=3)
    kw = dict(train_idx=np.arange(160), test_idx=np.arange(160, 240), C=0.5, n_permutations=20, random_state=1)
    ref = probe_permutation_test(X, y, **kw)
    got = probe_permutation_test(X, y, device=device, **kw)
    assert got.statistic == pytest.approx(ref.statistic)
    np.testing.assert_allclose(got.null_distribution, ref.null_distribution, atol=1 / 80 + 1e-9)


def test_fast_path_calibrated_on_null_and_powerful():
    rej = []
    for rep in range(300):
        X, y = probe_data(n=80, d=4, sep=0.0, seed=100 + rep)
        r = probe_permutation_test(
            X, y, train_idx=np.arange(50), test_idx=np.arange(50, 80), probe="diffmeans",
            n_permutations=99, random_state=rep,
        )
        rej.append(r.reject(0.05))
    assert 0.025 <= np.mean(rej) <= 0.075
    X, y = probe_data(n=300, d=10, sep=0.5, seed=3, k=3)
    r = probe_permutation_test(X, y, train_idx=np.arange(200), test_idx=np.arange(200, 300), n_permutations=199)
    assert r.p_value == pytest.approx(1 / 200) and r.statistic > 0.6
    assert np.abs(np.mean(r.null_distribution) - 1 / 3) < 0.03  # null is chance


def test_probe_permutation_errors_and_export():
    assert top_level is probe_permutation_test
    X, y = probe_data()
    with pytest.raises(ValueError, match="got 240 activations but 200 labels"):
        probe_permutation_test(X, y[:200], train_idx=np.arange(10), test_idx=np.arange(10, 20))
