import numpy as np
import pytest
from scipy import stats

from probekit.errors import DataError
from probekit.stats import loo_linear_error, paired_ttest, pearson, spearman, wilcoxon_signed_rank

REPS = 1000


def test_paired_ttest_matches_scipy_and_hand_effect_size():
    rng = np.random.default_rng(0)
    a, b = rng.normal(size=25) + 0.3, rng.normal(size=25)
    res = paired_ttest(a, b)
    ref = stats.ttest_rel(a, b)
    assert res.statistic == pytest.approx(ref.statistic, rel=1e-9)
    assert res.p_value == pytest.approx(ref.pvalue, rel=1e-9)
    d = a - b
    assert res.effect_size == pytest.approx(d.mean() / d.std(ddof=1))
    half = stats.t.ppf(0.975, 24) * d.std(ddof=1) / np.sqrt(25)
    assert (res.ci_low, res.ci_high) == pytest.approx((d.mean() - half, d.mean() + half))
    one = paired_ttest(a, b, alternative="greater")
    assert one.p_value == pytest.approx(stats.ttest_rel(a, b, alternative="greater").pvalue)
    assert res.reject(0.99) and "paired t-test" in res.verdict(0.05)


def test_wilcoxon_matches_scipy_and_rank_biserial_by_hand():
    a = np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0])
    b = np.array([0.5, 2.0, 1.0, 4.5, 2.0, 1.0, 9.0, 2.0])  # d: .5 0 2 -.5 3 5 -2 6
    res = wilcoxon_signed_rank(a, b)
    ref = stats.wilcoxon(a, b)
    assert res.statistic == pytest.approx(ref.statistic)
    assert res.p_value == pytest.approx(ref.pvalue)
    # Non-zero |d| = .5 2 .5 3 5 2 6 -> ranks 1.5 3.5 1.5 5 6 3.5 7; W- = 1.5 + 3.5 = 5, W+ = 23.
    assert res.effect_size == pytest.approx((23 - 5) / 28)
    with pytest.raises(DataError, match="all 3 paired differences are zero"):
        wilcoxon_signed_rank(np.ones(3), np.ones(3))


@pytest.mark.parametrize("test", [paired_ttest, wilcoxon_signed_rank])
def test_paired_tests_are_calibrated_and_powerful(test):
    rng = np.random.default_rng(1)
    null = [test(rng.normal(size=20), rng.normal(size=20)).reject(0.05) for _ in range(REPS)]
    assert 0.03 <= np.mean(null) <= 0.07
    base = rng.normal(size=(REPS, 20))
    power = [test(base[i] + 0.9 + rng.normal(size=20) * 0.6, base[i]).reject(0.05) for i in range(REPS)]
    assert np.mean(power) >= 0.9


def test_paired_errors_name_both_counts():
    with pytest.raises(ValueError, match="got 10 values in a but 9 in b"):
        paired_ttest(np.zeros(10), np.zeros(9))
    with pytest.raises(ValueError, match="got 10 values in a but 9 in b"):
        wilcoxon_signed_rank(np.zeros(10), np.zeros(9))


def test_pearson_spearman_match_scipy():
    rng = np.random.default_rng(2)
    x = rng.normal(size=30)
    y = 0.5 * x + rng.normal(size=30)
    p = pearson(x, y)
    ref = stats.pearsonr(x, y)
    assert p.statistic == pytest.approx(ref.statistic) and p.p_value == pytest.approx(ref.pvalue)
    assert p.r_squared == pytest.approx(ref.statistic**2)
    ci = ref.confidence_interval(0.95)
    assert (p.ci_low, p.ci_high) == pytest.approx((ci.low, ci.high))
    s = spearman(x, y)
    ref_s = stats.spearmanr(x, y)
    assert s.statistic == pytest.approx(ref_s.statistic) and s.p_value == pytest.approx(ref_s.pvalue)


@pytest.mark.parametrize("test", [pearson, spearman])
def test_correlations_are_calibrated_and_powerful(test):
    rng = np.random.default_rng(3)
    null = [test(rng.normal(size=25), rng.normal(size=25)).reject(0.05) for _ in range(REPS)]
    assert 0.03 <= np.mean(null) <= 0.07
    hits = []
    for _ in range(REPS):
        x = rng.normal(size=25)
        hits.append(test(x, 0.8 * x + rng.normal(size=25) * 0.8).reject(0.05))
    assert np.mean(hits) >= 0.9


def test_loo_error_matches_brute_force_refits():
    rng = np.random.default_rng(4)
    x = rng.normal(size=15)
    y = 2 * x + 1 + rng.normal(size=15) * 0.3
    res = loo_linear_error(x, y)
    brute = []
    for i in range(15):
        keep = np.arange(15) != i
        slope, icpt = np.polyfit(x[keep], y[keep], 1)
        brute.append(slope * x[i] + icpt)
    np.testing.assert_allclose(res.predictions, brute, atol=1e-9)
    assert res.rmse == pytest.approx(np.sqrt(np.mean((y - np.array(brute)) ** 2)))
    assert res.mae == pytest.approx(np.mean(np.abs(y - np.array(brute))))


def test_correlation_errors():
    with pytest.raises(ValueError, match="got 5 x values but 4 y values"):
        pearson(np.arange(5), np.arange(4))
    with pytest.raises(ValueError, match="constant"):
        spearman(np.ones(5), np.arange(5))


def test_nonfinite_inputs_raise_nonfinite_error_a_probekit_error():
    from probekit.errors import NonFiniteError, ProbekitError

    with pytest.raises(NonFiniteError, match="NaN/inf") as info:
        paired_ttest(np.array([1.0, np.nan, 2.0]), np.array([1.0, 2.0, 3.0]))
    assert isinstance(info.value, ProbekitError) and isinstance(info.value, ValueError)
    with pytest.raises(NonFiniteError, match="NaN/inf"):
        pearson(np.array([1.0, 2.0, np.inf, 4.0]), np.arange(4.0))


def test_spearman_ci_bonett_wright_exact_and_coverage():
    from probekit.stats import spearman_ci

    # hand value: rho 0.5, n 28 -> se = sqrt(1.125 / 25), tanh(atanh(0.5) -+ 1.959964 se)
    se = (1.125 / 25) ** 0.5
    lo, hi = spearman_ci(0.5, 28)
    assert (lo, hi) == pytest.approx(
        (np.tanh(np.arctanh(0.5) - 1.959964 * se), np.tanh(np.arctanh(0.5) + 1.959964 * se)),
        rel=1e-6,
    )
    assert lo == pytest.approx(0.132747, abs=1e-6) and hi == pytest.approx(0.746533, abs=1e-6)
    assert spearman_ci(-0.5, 28) == pytest.approx((-hi, -lo))
    assert np.isnan(spearman_ci(0.3, 3)).all() and spearman_ci(1.0, 10) == (1.0, 1.0)
    s = spearman(np.arange(10.0), np.arange(10.0) ** 3)
    assert (s.statistic, s.ci_low, s.ci_high) == pytest.approx((1.0, 1.0, 1.0))
    # planted: bivariate normal r = 0.6 has population rho_s = 6/pi asin(0.3); ~95% coverage
    rng = np.random.default_rng(3)
    r, n = 0.6, 30
    truth = 6 / np.pi * np.arcsin(r / 2)
    hits = 0
    for _ in range(REPS):
        x = rng.normal(size=n)
        y = r * x + np.sqrt(1 - r * r) * rng.normal(size=n)
        res = spearman(x, y)
        hits += res.ci_low <= truth <= res.ci_high
    assert 0.925 <= hits / REPS <= 0.975


def test_paired_ttest_on_identical_samples_is_flagged_not_nan():
    """Zero differences: t = 0/0 in scipy (NaN); here t = 0, p = 1, flagged degenerate."""
    a = np.linspace(0.1, 0.9, 12)
    res = paired_ttest(a, a.copy())
    assert (res.statistic, res.p_value, res.effect_size, res.ci_low, res.ci_high) == (0, 1, 0, 0, 0)
    assert res.n == 12 and not res.reject(0.05)
    assert "all 12 paired differences are zero" in res.degenerate
    assert "[degenerate: all 12 paired differences are zero" in res.verdict()
    assert res.to_records()[0]["degenerate"] == res.degenerate
    for alternative in ("greater", "less"):
        assert paired_ttest(a, a, alternative=alternative).p_value == 1.0


def test_paired_ttest_on_a_constant_shift_is_exact_and_flagged():
    """Every difference equals c: zero variance, t = +-inf; p 0 on c's side, 1 on the other."""
    a = np.arange(8.0)
    res = paired_ttest(a + 0.5, a)
    assert res.statistic == np.inf and res.p_value == 0.0 and (res.ci_low, res.ci_high) == (0.5, 0.5)
    assert "all 8 paired differences equal 0.5" in res.degenerate
    assert paired_ttest(a + 0.5, a, alternative="greater").p_value == 0.0
    assert paired_ttest(a + 0.5, a, alternative="less").p_value == 1.0
    assert paired_ttest(a - 2.0, a, alternative="less").statistic == -np.inf


def test_paired_ttest_with_variance_is_not_flagged():
    rng = np.random.default_rng(3)
    a = rng.normal(size=20)
    res = paired_ttest(a, a + rng.normal(scale=0.1, size=20))
    assert res.degenerate == "" and np.isfinite(res.p_value)
