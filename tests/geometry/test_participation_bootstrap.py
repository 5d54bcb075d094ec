"""Participation-ratio bootstrap: every resample equals the PR refit on the repeated rows."""

import numpy as np
import pytest
import torch

from probekit.errors import DataError
from probekit.geometry import participation_ratio as ref
from probekit.geometry.participation_bootstrap import pr_of_weighted_rows, pr_resamples
from probekit.stats.bootstrap import bootstrap_indices


@pytest.mark.parametrize("n", [40, 3001])
def test_resamples_equal_refits_on_repeated_rows(n):
    rng = np.random.default_rng(1)
    X = rng.normal(size=(n, 7)) * np.arange(1, 8) + 10.0
    counts = rng.integers(0, 3, size=(3, n)).astype(np.float64)
    want = [float(ref(torch.tensor(np.repeat(X, c.astype(int), axis=0)))[0]) for c in counts]
    np.testing.assert_allclose(pr_of_weighted_rows(X, counts), want, rtol=1e-9)


def test_pr_resamples_are_seeded_row_resamples_and_refuse_no_spread():
    X = np.random.default_rng(2).normal(size=(30, 5))
    reps = pr_resamples(X, n_bootstrap=1000, seed=4)
    b = bootstrap_indices(30, 1000, 4)[11]
    assert reps.shape == (1000,) and reps[11] == pytest.approx(float(ref(torch.tensor(X[b]))[0]))
    with pytest.raises(DataError, match="3 rows at x have no spread"):
        pr_resamples(np.eye(3)[:3, :2] * [[1], [1], [0]] + 1.0, n_bootstrap=1000, seed=0,
                     what="rows at x")
