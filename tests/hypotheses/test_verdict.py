"""Verdict calibration: nulls never (rarely) PASS, planted effects PASS, CI coverage, Holm."""

import numpy as np
import pytest
from scipy.stats import binomtest

from probekit.errors import DataError, NonFiniteError
from probekit.hypotheses import Measurement
from probekit.hypotheses.verdict import judge_all, measurement_test
from probekit.stats import holm
from tests.hypotheses.helpers import claim

REPS = 200


def _verdict(m, c, seed=0):
    return judge_all([(c, m)], n_permutations=1000, seed=seed)[0]


def test_null_bound_claim_passes_in_at_most_5_percent():
    # True mean exactly at the threshold: a ">=" claim is false-by-equality; its PASS rate is the
    # verdict's size. Nominal: the lower end of a 95% percentile CI, ~2.5%; percentile intervals
    # undercover a little at n = 40 (measured ~3% over 8000 reps). A one-sided binomial test of
    # "rate <= 5%" must not reject (it would at >= ~6.4% here), and the rate must not be
    # vacuously ~0 (a verdict that never passes would also be "calibrated").
    n_reps = 2000
    rng = np.random.default_rng(0)
    passes = sum(_verdict(Measurement(metric="m", values=rng.normal(0.5, 1, 40)),
                          claim(">=", (0.5,)), seed=i).verdict == "PASS" for i in range(n_reps))
    assert binomtest(passes, n_reps, 0.05, alternative="greater").pvalue > 1e-3, passes
    assert passes / n_reps >= 0.01, passes


def test_null_control_claim_fails_in_at_least_95_percent():
    rng = np.random.default_rng(1)
    out = []
    for i in range(REPS):
        v = rng.normal(0, 1, 30)
        paired = Measurement(metric="m", values=v, control=rng.normal(0, 1, 30))
        out.append(_verdict(paired, claim("greater_than_control", (0.0,)), seed=i).verdict)
        # a permutation null drawn from the same distribution as the observed mean
        shuffled = Measurement(metric="m", values=v, null=rng.normal(0, 1 / np.sqrt(30), 199))
        out.append(_verdict(shuffled, claim("greater_than_control", (0.0,)), seed=i).verdict)
    assert np.mean([o == "FAIL" for o in out]) >= 0.95
    assert set(out) <= {"PASS", "FAIL"}  # a control test never says INCONCLUSIVE


def test_planted_effect_passes():
    rng = np.random.default_rng(2)
    m = Measurement(metric="m", values=rng.normal(1.0, 1, 60))
    assert _verdict(m, claim(">=", (0.3,))).verdict == "PASS"
    assert _verdict(m, claim("<=", (0.3,))).verdict == "FAIL"
    assert _verdict(m, claim("between", (0.2, 2.0))).verdict == "PASS"
    assert _verdict(m, claim("between", (1.9, 3.0))).verdict == "FAIL"
    assert _verdict(m, claim(">=", (1.0,))).verdict == "INCONCLUSIVE"  # CI straddles 1.0
    ctl = Measurement(metric="m", values=rng.normal(1.0, 1, 60), control=rng.normal(0, 1, 60))
    assert _verdict(ctl, claim("greater_than_control", (0.0,))).verdict == "PASS"


def test_ci_coverage_of_the_mean():
    rng = np.random.default_rng(3)
    covered = []
    for i in range(REPS):
        x = rng.exponential(1.0, 50)  # skewed, true mean 1
        t = measurement_test(Measurement(metric="m", values=x), claim(">=", (0.0,)), seed=i)
        covered.append(t.low <= 1.0 <= t.high)
    assert 0.89 <= np.mean(covered) <= 0.99


def test_exact_values_on_a_constructed_case():
    # resamples given by the kind: CI = their 2.5/97.5 percentiles, p = (1 + #below) / (1 + B)
    reps = np.linspace(0.0, 1.0, 999)
    t = measurement_test(Measurement(metric="m", estimate=0.5, resamples=reps), claim(">=", (0.25,)))
    assert t.low == pytest.approx(0.025) and t.high == pytest.approx(0.975)
    assert t.p == pytest.approx((1 + np.count_nonzero(reps < 0.25)) / 1000)
    t = measurement_test(Measurement(metric="m", values=np.ones(5), null=np.arange(9.0)),
                         claim("greater_than_control", (0.0,)))
    assert t.p == pytest.approx((1 + 8) / 10) and t.effect == pytest.approx(1 - 4.0)


def test_holm_over_the_claims_of_a_file():
    rng = np.random.default_rng(4)
    ms = [Measurement(metric="m", values=rng.normal(mu, 1, 25)) for mu in (0.8, 0.4, 0.0)]
    cs = [claim(">=", (0.0,))] * 3
    res = judge_all(list(zip(cs, ms)))
    np.testing.assert_allclose([r.p_holm for r in res], holm([r.p_value for r in res]))
    assert res[0].verdict == "PASS"
    assert all(r.p_holm >= r.p_value for r in res)


def test_measurement_refuses_bad_input():
    with pytest.raises(NonFiniteError, match=r"values\[1\]"):
        Measurement(metric="m", values=np.array([0.0, np.nan]))
    with pytest.raises(DataError, match="needs values"):
        Measurement(metric="m")
    with pytest.raises(DataError, match="pair with values"):
        Measurement(metric="m", values=np.ones(3), control=np.ones(4))
