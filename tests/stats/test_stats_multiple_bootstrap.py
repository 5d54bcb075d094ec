import itertools

import numpy as np
import pytest

from probekit.errors import ConfigError, DataError
from probekit.stats import adjust_pvalues, benjamini_hochberg, bootstrap_ci, holm


def holm_brute(p):
    m = len(p)
    order = np.argsort(p)
    out = np.empty(m)
    running = 0.0
    for rank, i in enumerate(order):
        running = max(running, min(1.0, (m - rank) * p[i]))
        out[i] = running
    return out


def bh_brute(p):
    m = len(p)
    out = np.empty(m)
    for i in range(m):
        # adjusted p_i = min over j with p_j >= p_i of m p_j / rank_j
        ranks = np.argsort(np.argsort(p)) + 1
        out[i] = min(min(1.0, m * p[j] / ranks[j]) for j in range(m) if p[j] >= p[i])
    return out


def test_known_values_by_hand():
    p = np.array([0.01, 0.04, 0.03, 0.005])
    # Holm: sorted .005 .01 .03 .04 -> 4*.005=.02, 3*.01=.03, 2*.03=.06, 1*.04=.04 -> max-acc .06
    np.testing.assert_allclose(holm(p), [0.03, 0.06, 0.06, 0.02])
    # BH: m p / rank = .02, .02, .04, .04 (sorted) -> min from the right
    np.testing.assert_allclose(benjamini_hochberg(p), [0.02, 0.04, 0.04, 0.02])
    res = adjust_pvalues(p, method="holm", alpha=0.05)
    np.testing.assert_array_equal(res.reject, [True, False, False, True])
    assert adjust_pvalues(p, method="bh").reject.all()


def test_match_brute_force_on_random_families():
    rng = np.random.default_rng(0)
    for m in [1, 2, 7, 30]:
        p = rng.uniform(size=m) ** 3
        np.testing.assert_allclose(holm(p), holm_brute(p), atol=1e-15)
        np.testing.assert_allclose(benjamini_hochberg(p), bh_brute(p), atol=1e-15)


def test_holm_controls_fwer_bh_fdr_on_null():
    rng = np.random.default_rng(1)
    fw = [adjust_pvalues(rng.uniform(size=20), method="holm").reject.any() for _ in range(2000)]
    assert np.mean(fw) <= 0.05 + 0.015
    fdr = [adjust_pvalues(rng.uniform(size=20), method="bh").reject.any() for _ in range(2000)]
    assert np.mean(fdr) <= 0.05 + 0.015  # all-null family: FDR == FWER


def test_multiple_errors():
    with pytest.raises(DataError, match=r"entry 1 is 1.5"):
        holm([0.1, 1.5])
    with pytest.raises(ConfigError, match="'holm' or 'bh'"):
        adjust_pvalues([0.1], method="bonf")
    with pytest.raises(ValueError, match="no p-values"):
        holm([])


def test_bootstrap_ci_percentile_properties_and_coverage():
    rng = np.random.default_rng(2)
    x = rng.normal(size=200)
    ci = bootstrap_ci(np.mean, x, vectorized=True, random_state=0)
    assert ci.low < x.mean() < ci.high and ci.n_resamples == 1000
    # Width ~ 2 * 1.96 * se.
    assert (ci.high - ci.low) == pytest.approx(2 * 1.96 * x.std() / np.sqrt(200), rel=0.15)
    again = bootstrap_ci(np.mean, x, vectorized=True, random_state=0)
    assert (again.low, again.high) == (ci.low, ci.high)
    covered = []
    for seed in range(200):
        s = np.random.default_rng(100 + seed).normal(loc=1.0, size=60)
        covered.append(bootstrap_ci(np.mean, s, vectorized=True, random_state=seed).contains(1.0))
    assert 0.88 <= np.mean(covered) <= 0.99


def test_bootstrap_paired_metric_and_percentiles_by_hand():
    rng = np.random.default_rng(3)
    y = rng.integers(0, 2, 150)
    pred = np.where(rng.random(150) < 0.8, y, 1 - y)
    ci = bootstrap_ci(lambda a, b: (a == b).mean(), y, pred, random_state=0)
    assert ci.estimate == pytest.approx((y == pred).mean())
    assert ci.low < ci.estimate < ci.high
    assert ci.high - ci.low == pytest.approx(2 * 1.96 * np.sqrt(0.8 * 0.2 / 150), rel=0.25)


def test_bootstrap_errors():
    with pytest.raises(ConfigError, match="n_resamples=100 is below the 1000"):
        bootstrap_ci(np.mean, np.arange(10.0), n_resamples=100)
    with pytest.raises(ValueError, match="array 0 has 5 items but array 1 has 4"):
        bootstrap_ci(lambda a, b: 0.0, np.arange(5), np.arange(4))


def test_brute_force_helpers_are_themselves_consistent():
    # Sanity of the oracles: for m=3 enumerate all orders.
    for perm in itertools.permutations([0.001, 0.02, 0.04]):
        p = np.array(perm)
        assert holm_brute(p).max() == pytest.approx(0.04)
