"""diagnosis.statistics.inference: equal to statsmodels / wildboottest / brute force; CIs invert the test."""

import itertools
import math

import numpy as np
import pytest
import statsmodels.api as sm
from statsmodels.stats.power import TTestPower

from probekit.diagnosis.statistics.association import row_set
from probekit.diagnosis.statistics.inference import (
    FixedNull,
    ci_by_inversion,
    cluster_weights,
    coefficient_t,
    mde_partial_r,
    r_of_beta,
    resample_pvalue,
)


def _table(seed: int, n_groups: int = 6, per: int = 5):
    rng = np.random.default_rng(seed)
    g = np.repeat(np.arange(n_groups), per)
    n = g.size
    knob = np.tile(np.arange(per), n_groups).astype(float)
    u = rng.normal(size=n_groups)[g]
    m = 0.5 * knob + u + rng.normal(size=n)
    y = -0.3 * knob + u + 0.4 * m + rng.standard_t(3, size=n)
    C = np.column_stack([knob, rng.uniform(size=n)])
    fe = (g[:, None] == np.arange(1, n_groups)).astype(float)
    return m, y, C, g, fe


@pytest.mark.parametrize("with_fe", [False, True])
def test_hc3_t_equals_statsmodels(with_fe):
    m, y, C, g, fe = _table(0)
    X = np.column_stack([np.ones(y.size), C, *( [fe] if with_fe else [])])
    ref = sm.OLS(y, np.column_stack([X, m])).fit(cov_type="HC3")
    beta, t = coefficient_t(m, y, X, "hc3")
    assert beta == pytest.approx(ref.params[-1], abs=1e-9)
    assert t == pytest.approx(ref.tvalues[-1], abs=1e-8)


def test_cr1_t_equals_statsmodels():
    m, y, C, g, _ = _table(1, n_groups=8)
    X = np.column_stack([np.ones(y.size), C])
    ref = sm.OLS(y, np.column_stack([X, m])).fit(cov_type="cluster", cov_kwds={"groups": g})
    beta, t = coefficient_t(m, y, X, "cr1", g)
    assert beta == pytest.approx(ref.params[-1], abs=1e-9)
    assert t == pytest.approx(ref.tvalues[-1], abs=1e-8)


def _wcr(m, y, X, g, V):
    """Our wild cluster restricted bootstrap t's for weights V (draws x G)."""
    f = FixedNull.build(m, X, "cr1", g)
    ey = f.project(y[None, :])[0]
    t = f.t_stats(ey[None, :])[1][0]
    return t, f.t_stats(f.project(V[:, g] * ey))[1]


def test_wild_cluster_restricted_bootstrap_equals_wildboottest():
    wb = pytest.importorskip("wildboottest.wildboottest")
    m, y, C, g, _ = _table(2, n_groups=8, per=4)
    X = np.column_stack([np.ones(y.size), C])
    Z = np.column_stack([X, m])
    R = np.zeros(Z.shape[1])
    R[-1] = 1.0
    # enumerated Rademacher (2^8 = 256 < B): deterministic, so the two agree exactly
    boot = wb.WildboottestCL(X=Z, Y=y, cluster=g, R=R, B=999, seed=0, parallel=False)
    boot.get_scores(bootstrap_type="11", impose_null=True)
    boot.get_weights(weights_type="rademacher")
    assert boot.full_enumeration
    boot.get_numer()
    boot.get_denom()
    boot.get_tboot()
    boot.get_vcov()
    boot.get_tstat()
    V = boot.v.T  # (2^G, G)
    ours_enum, enumerated = cluster_weights(8, 999, np.random.default_rng(0))
    assert not enumerated  # G < 12: Webb weights, never enumerated
    t, t_null = _wcr(m, y, X, g, V)
    assert t == pytest.approx(float(np.ravel(boot.t_stat)[0]), abs=1e-8)
    np.testing.assert_allclose(t_null, boot.t_boot, atol=1e-8)
    # the p-value: ours counts |t*| >= |t| (relative tie 1e-9), so it includes the identity and
    # the sign-flipped vector (|t*| = |t| exactly); wildboottest counts |t*| > |t| in floating
    # point, where those two land on either side by rounding. Our rule on their t's = ours:
    ours = resample_pvalue(t, t_null, enumerated=True)
    assert ours == resample_pvalue(float(np.ravel(boot.t_stat)[0]), boot.t_boot, enumerated=True)
    strict = np.mean(np.abs(t_null) > abs(t) * (1 + 1e-9))
    assert ours == pytest.approx(strict + 2 / 256, abs=1e-12)
    boot.get_pvalue("two-tailed")
    assert strict - 1e-12 <= boot.pvalue <= ours + 1e-12
    # the wildboottest() front end on a statsmodels model, Webb weights: same t statistic
    import pandas as pd

    model = sm.OLS(y, pd.DataFrame(Z, columns=["c", "k", "u", "m"]))
    table = wb.wildboottest(model, B=999, cluster=g, param="m", weights_type="webb", seed=1,
                            show=False, parallel=False)
    assert float(table["statistic"].iloc[0]) == pytest.approx(t, abs=1e-8)


def test_rademacher_enumeration_from_12_groups():
    V, enumerated = cluster_weights(12, 5000, np.random.default_rng(0))
    assert enumerated and V.shape == (4096, 12)
    assert np.unique(V, axis=0).shape[0] == 4096
    V, enumerated = cluster_weights(12, 1000, np.random.default_rng(0))
    assert not enumerated and set(np.unique(V)) == {-1.0, 1.0}
    W, _ = cluster_weights(5, 60000, np.random.default_rng(0))
    vals, counts = np.unique(W, return_counts=True)
    np.testing.assert_allclose(vals, [-math.sqrt(1.5), -1, -math.sqrt(0.5), math.sqrt(0.5), 1,
                                      math.sqrt(1.5)])
    assert counts.min() / counts.max() > 0.95  # six equally likely points


def test_freedman_lane_equals_brute_force_enumeration():
    """All within-group permutations of a tiny design: vectorised p = refit-per-permutation p."""
    rng = np.random.default_rng(5)
    g = np.array([0, 0, 0, 1, 1, 1, 1])
    n = g.size
    knob = rng.normal(size=n)
    m = rng.normal(size=n) + knob
    y = rng.normal(size=n) + 0.5 * knob + 0.6 * m
    X = np.column_stack([np.ones(n), knob, g == 1])
    perms = []
    for a in itertools.permutations(range(3)):
        for b in itertools.permutations(range(3, 7)):
            perms.append(list(a) + list(b))
    perms = np.array(perms)  # 3! * 4! = 144, the identity among them
    # brute force: y* = fit + e[pi], refit y* ~ X + m with statsmodels HC3
    gamma = np.linalg.lstsq(X, y, rcond=None)[0]
    fit, e = X @ gamma, y - X @ gamma
    Z = np.column_stack([X, m])
    t_obs = sm.OLS(y, Z).fit(cov_type="HC3").tvalues[-1]
    t_bf = np.array([sm.OLS(fit + e[p], Z).fit(cov_type="HC3").tvalues[-1] for p in perms])
    p_bf = np.mean(np.abs(t_bf) >= abs(t_obs) * (1 - 1e-9))
    f = FixedNull.build(m, X, "hc3")
    ey = f.project(y[None, :])[0]
    t_vec = f.t_stats(f.project(ey[perms]))[1]
    np.testing.assert_allclose(t_vec, t_bf, atol=1e-8)
    assert resample_pvalue(t_obs, t_vec, enumerated=True) == pytest.approx(p_bf, abs=1e-12)
    # the row set draws permutations within groups (and its p-value uses them)
    rs = row_set(np.ones(n, bool), y, knob[:, None], g, None, mode="within_groups",
                 n_resamples=200, rng=np.random.default_rng(0))
    assert (g[rs.perms] == g).all()


def test_ci_inverts_the_test_and_maps_to_r():
    m, y, C, g, fe = _table(3)
    X = np.column_stack([np.ones(y.size), C, fe])
    rs = row_set(np.ones(y.size, bool), y, C, g, None, mode="within_groups", n_resamples=999,
                 rng=np.random.default_rng(1))
    f = FixedNull.build(m, X, "hc3")
    ey = f.project(y[None, :])[0]
    beta, t = (float(v[0]) for v in f.t_stats(ey[None, :]))
    Ey, Em = f.project(rs.resample(ey)), f.project(rs.resample(f.em))
    se = abs(beta / t)

    def p_at(b0):
        return resample_pvalue((beta - b0) / se, f.t_stats(Ey - b0 * Em)[1])

    lo, hi = ci_by_inversion(p_at, beta, se, 0.05)
    assert lo < beta < hi
    assert p_at(lo - 1e-4 * se) <= 0.05 < p_at(lo + 1e-4 * se)
    assert p_at(hi + 1e-4 * se) <= 0.05 < p_at(hi - 1e-4 * se)
    assert (p_at(0.0) <= 0.05) == (not lo <= 0.0 <= hi)
    # the r map: r(beta_hat) is the observed partial r, increasing in b
    rss = f.rss(ey)
    r_obs = float(np.corrcoef(f.em, ey)[0, 1])
    assert r_of_beta(beta, f.em2, rss) == pytest.approx(r_obs, abs=1e-9)
    assert r_of_beta(lo, f.em2, rss) < r_obs < r_of_beta(hi, f.em2, rss)


@pytest.mark.parametrize("df", [5, 17, 60])
def test_mde_equals_statsmodels_power(df):
    """A partial-r t test is a noncentral t with lambda = sqrt(df) r / sqrt(1 - r^2).

    statsmodels' one-sample TTestPower has df = nobs - 1 and lambda = d sqrt(nobs): with
    nobs = df + 1 the same lambda gives r / sqrt(1 - r^2) = d sqrt((df + 1) / df).
    """
    r = mde_partial_r(df, 0.01, 0.8)
    d = TTestPower().solve_power(effect_size=None, nobs=df + 1, alpha=0.01, power=0.8)
    assert r / math.sqrt(1 - r * r) == pytest.approx(d * math.sqrt((df + 1) / df), rel=1e-5)  # statsmodels solver tol
