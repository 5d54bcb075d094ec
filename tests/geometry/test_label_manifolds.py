"""Label manifolds: the MFT run of the class manifolds, its cache and the shuffled-label null."""

import numpy as np
import pytest
import torch

from probekit.executor import InProcessExecutor
from probekit.geometry import manifold_capacity, manifolds_from_labels
from probekit.geometry.label_manifolds import (
    LabelManifolds,
    label_capacity,
    label_capacity_cached,
    shuffled_label_capacities,
)


def _task(noise=0.3, seed=0, p=3, m=8, n=16, **kw):
    rng = np.random.default_rng(seed)
    y = np.repeat(np.arange(p), m)
    X = rng.normal(size=(p, n))[y] + noise * rng.normal(size=(p * m, n))
    return LabelManifolds(acts=torch.tensor(X), labels=y, n_t=10, **kw)


def test_label_capacity_is_manifold_capacity_of_the_classes():
    task = _task()
    res = label_capacity(task)
    ref = manifold_capacity(manifolds_from_labels(task.acts, task.labels, max_points=50, seed=0)[0],
                            n_t=10, seed=0)
    assert float(res.capacity) == pytest.approx(float(ref.capacity), rel=1e-9)
    np.testing.assert_allclose(res.radius_m.numpy(), ref.radius_m.numpy(), rtol=1e-9)


def test_the_cache_returns_one_run_per_input():
    task = _task(seed=1)
    first = label_capacity_cached(task)
    assert label_capacity_cached(LabelManifolds(**{**task.__dict__})) is first
    other = label_capacity_cached(_task(seed=1, kappa=0.1))
    assert other is not first and float(other.capacity) < float(first.capacity)  # a margin costs


def test_shuffled_null_refits_seeded_permutations_and_is_below_the_real_classes():
    task = _task(noise=0.1, seed=2)
    null = shuffled_label_capacities(task, n_shuffles=3, executor=InProcessExecutor(progress=False))
    rng = np.random.default_rng(task.seed)
    want = [float(label_capacity(LabelManifolds(acts=task.acts, labels=rng.permutation(task.labels),
                                                n_t=10, seed=task.seed + 1 + i)).capacity)
            for i in range(3)]
    np.testing.assert_allclose(null, want, rtol=1e-9)
    assert null.max() < float(label_capacity(task).capacity)
