import math

import numpy as np
import pytest

from probekit.errors import ConfigError, DataError
from probekit.stats import adjust_pvalues, n_permutations_for, permutation_pvalue, permutation_test


def mean_diff(X, y):
    return abs(X[y == 1].mean() - X[y == 0].mean())


def test_pvalue_formula_by_hand():
    null = np.array([0.1, 0.5, 0.7, 0.7, 0.9])
    assert permutation_pvalue(0.7, null) == pytest.approx((1 + 3) / 6)
    assert permutation_pvalue(0.7, null, "less") == pytest.approx((1 + 4) / 6)
    assert permutation_pvalue(2.0, null) == pytest.approx(1 / 6)


def test_generic_permutation_test_is_calibrated_on_null():
    rng = np.random.default_rng(0)
    rej = []
    for _ in range(1000):
        X = rng.normal(size=30)
        y = np.arange(30) % 2
        rej.append(permutation_test(mean_diff, X, y, n_permutations=99, random_state=rng).reject(0.05))
    assert 0.03 <= np.mean(rej) <= 0.07


def test_generic_permutation_test_has_power():
    rng = np.random.default_rng(1)
    rej = []
    for _ in range(200):
        y = np.arange(30) % 2
        X = rng.normal(size=30) + 1.3 * y
        rej.append(permutation_test(mean_diff, X, y, n_permutations=99, random_state=rng).reject(0.05))
    assert np.mean(rej) >= 0.9


def test_permutation_errors():
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(240, 6)), np.arange(240) % 2
    with pytest.raises(DataError, match="got 240 activations but 200 labels"):
        permutation_test(mean_diff, X[:, 0], y[:200])
    with pytest.raises(ConfigError, match="n_permutations must be >= 1"):
        permutation_test(mean_diff, X[:, 0], y, n_permutations=0)


@pytest.mark.parametrize(("alpha", "m", "n"), [(0.05, 1, 19), (0.05, 3, 59), (0.05, 7, 139),
                                              (0.01, 7, 699), (0.1, 1, 9)])
def test_n_permutations_for_holm_is_the_smallest_that_reaches_alpha(alpha, m, n):
    assert n_permutations_for(alpha, m) == n

    def holm_floor(k):  # every test at the smallest permutation p
        return adjust_pvalues([1 / (1 + k)] * m, method="holm").p_adjusted.max()

    assert holm_floor(n) <= alpha < holm_floor(n - 1)
    with pytest.raises(ConfigError, match="n_tests >= 1"):
        n_permutations_for(alpha, 0)


def test_mc_se_is_the_binomial_standard_error():
    from probekit.stats.permutation import mc_se

    assert mc_se(0.05, 1000) == pytest.approx(math.sqrt(0.05 * 0.95 / 1000), rel=1e-15)
    assert mc_se(0.0, 10) == 0.0 and mc_se(1.0, 10) == 0.0
    # the observed spread of p over repeated random permutation sets matches it
    rng = np.random.default_rng(0)
    ps = rng.binomial(400, 0.2, size=4000) / 400
    assert ps.std() == pytest.approx(mc_se(0.2, 400), rel=0.05)
    with pytest.raises(ConfigError, match="p must be in"):
        mc_se(1.5, 10)
    with pytest.raises(ConfigError, match="n_permutations must be >= 1"):
        mc_se(0.5, 0)
