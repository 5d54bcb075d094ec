"""calibrate: the generator plants its target, the analysis' size and power on a known design."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import integrate
from scipy import stats as sps
from statsmodels.stats.proportion import proportion_confint

from probekit.diagnosis import Calibration, calibrate
from probekit.diagnosis.statistics.calibration import (
    _power_crossing,
    calibration_section,
    fit_design,
    simulate,
    variance_components,
)
from probekit.errors import ConfigError, DataError
from probekit.report.blocks import Table, Text
from tests.report.notebook_checks import check_display


def _population(n_levels: int = 4, n_seeds: int = 5, seed_sd: float = 0.5, slope: float = -0.3,
                rng_seed: int = 0) -> dict[str, list]:
    rng = np.random.default_rng(rng_seed)
    noise = np.tile(np.arange(n_levels), n_seeds).astype(float)
    seed = np.repeat(np.arange(n_seeds), n_levels)
    y = slope * noise + seed_sd * rng.normal(size=n_seeds)[seed] + rng.normal(size=noise.size)
    m = 0.5 * noise + rng.normal(size=noise.size)
    return {"seed": seed.tolist(), "noise": noise.tolist(), "ood": y.tolist(), "he": m.tolist()}


def _design_parts(t: dict[str, list]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    y = np.asarray(t["ood"], dtype=float)
    X = np.column_stack([np.ones(y.size), t["noise"]])
    return y, X, np.asarray(t["seed"])


# --------------------------------------------------------------------------- the generator


@pytest.mark.parametrize("rho", [0.0, 0.3, 0.6])
@pytest.mark.parametrize("real_marker", [False, True])
def test_generator_plants_the_partial_correlation(rho: float, real_marker: bool) -> None:
    t = _population()
    y, X, g = _design_parts(t)
    marker = np.asarray(t["he"]) if real_marker else None
    design = fit_design(y, X, g, marker, "he")
    assert 0.05 < design.tau < 0.95  # the population has a seed effect to reproduce
    Y, M = simulate(design, [rho], 40_000, np.random.default_rng(1))
    ey, em = Y - design.mu_y, M[0] - design.mu_m
    # the true residuals: correlation rho per model, variances s_y^2 and s_m^2
    assert np.corrcoef(em.ravel(), ey.ravel())[0, 1] == pytest.approx(rho, abs=0.005)
    assert ey.var() == pytest.approx(design.s_y**2, rel=0.01)
    assert em.var() == pytest.approx(design.s_m**2, rel=0.01)
    # the partial correlation given X, pooled over simulations, is the target too
    Q = np.linalg.qr(X)[0]
    ry, rm = Y - (Y @ Q) @ Q.T, M[0] - (M[0] @ Q) @ Q.T
    assert (ry * rm).sum() / math.sqrt((ry * ry).sum() * (rm * rm).sum()) == pytest.approx(rho, abs=0.005)
    # the group share of the outcome's residual: between-seed covariance / total variance
    same = g[:, None] == g[None, :]
    np.fill_diagonal(same, False)
    cov = np.einsum("si,sj->ij", ey, ey) / ey.shape[0]
    assert cov[same].mean() / design.s_y**2 == pytest.approx(design.tau, abs=0.02)


def test_variance_components_balanced_anova_exactly() -> None:
    """No covariates, balanced groups: the one-way ANOVA estimates (MSB - MSW) / k and MSW."""
    rng = np.random.default_rng(3)
    n_groups, k = 6, 4
    g = np.repeat(np.arange(n_groups), k)
    y = rng.normal(size=n_groups)[g] + rng.normal(size=g.size)
    r = y - y.mean()
    means = np.array([r[g == j].mean() for j in range(n_groups)])
    msw = sum(((r[g == j] - means[j]) ** 2).sum() for j in range(n_groups)) / (g.size - n_groups)
    msb = k * (means**2).sum() / (n_groups - 1)
    Q = np.ones((g.size, 1)) / math.sqrt(g.size)
    sb2, sw2 = variance_components(r, Q, g)
    assert (msb - msw) / k > 0
    assert sb2 == pytest.approx((msb - msw) / k, rel=1e-9)
    assert sw2 == pytest.approx(msw, rel=1e-9)
    # no group effect (a negative estimate) or no groups: the pooled residual variance
    assert variance_components(r, Q, None) == pytest.approx((0.0, r @ r / (g.size - 1)))


def test_variance_components_recover_planted_values_with_covariates() -> None:
    rng = np.random.default_rng(4)
    n_groups, k = 400, 6
    g = np.repeat(np.arange(n_groups), k)
    x = rng.normal(size=g.size)
    y = 2.0 * x + 0.8 * rng.normal(size=n_groups)[g] + 1.5 * rng.normal(size=g.size)
    Q = np.linalg.qr(np.column_stack([np.ones(g.size), x]))[0]
    sb2, sw2 = variance_components(y - Q @ (Q.T @ y), Q, g)
    assert sb2 == pytest.approx(0.64, abs=0.08)
    assert sw2 == pytest.approx(2.25, abs=0.1)


def test_power_crossing_interpolates_the_first_crossing() -> None:
    assert _power_crossing([0.0, 0.2, 0.4, 0.6], [0.05, 0.3, 0.7, 0.9]) == pytest.approx(0.5)
    assert math.isnan(_power_crossing([0.0, 0.2], [0.05, 0.5]))


def test_linear_outcome_is_refused() -> None:
    t = _population()
    t["ood"] = [2.0 * v + 1 for v in t["noise"]]
    with pytest.raises(DataError, match="linear function of the covariates"):
        calibrate(t, "ood", covariates=("noise",), n_simulations=2)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"effects": (0.5, 1.2)}, "1.2"), ({"effects": ()}, "empty"),
    ({"effects": (0.3, 0.3)}, "repeat"), ({"n_simulations": 0}, "n_simulations"),
    ({"markers": ["he"]}, "markers"), ({"groups": "nope"}, "nope"),
    ({"covariates": ("ood",)}, "also a covariate"),
])
def test_bad_arguments_are_refused_before_work(kwargs: dict, match: str) -> None:
    with pytest.raises(ConfigError, match=match):
        calibrate(_population(), "ood", **{"covariates": ("noise",), **kwargs})


def test_too_few_groups_is_a_data_error() -> None:
    with pytest.raises(DataError, match=">= 3 groups"):
        calibrate(_population(n_seeds=2), "ood", covariates=("noise",), n_simulations=2)


# --------------------------------------------------------------------------- the result


@pytest.fixture(scope="module")
def small() -> Calibration:
    return calibrate(_population(n_levels=3, n_seeds=4), "ood", covariates=("noise",),
                     n_simulations=12, seed=5)


def test_calibrate_records_and_groups_auto(small: Calibration) -> None:
    assert small.groups == "seed" and small.n_groups == 4 and small.n_models == 12
    assert small.effects == (0.0, 0.2, 0.4, 0.6)
    for r in small.records:
        assert r["n_simulations"] == 12
        verdicts = sum(r[f"verdict_{v}"] for v in small.verdicts)
        assert verdicts == pytest.approx(1.0)
        assert r["rejected_se"] == pytest.approx(math.sqrt(r["rejected"] * (1 - r["rejected"]) / 12))
    assert small[0.6]["effect"] == 0.6
    with pytest.raises(KeyError, match="effects"):
        small[0.5]
    # deterministic given the seed
    again = calibrate(_population(n_levels=3, n_seeds=4), "ood", covariates=("noise",),
                      n_simulations=12, seed=5)
    assert again.records == small.records


def test_calibration_display(small: Calibration) -> None:
    # one column per verdict the simulations gave
    assert small.verdicts and "inconclusive" in small.verdicts
    check_display(small, headers=["true partial r", "partial p <= 0.05", "95% CI covers",
                                  *(v.replace("_", " ") for v in small.verdicts)],
                  numbers={"effect": ".2f", "rejected": ".1%", "covered": ".1%",
                           "rejected_se": ".1%"}, plot=False)
    text = small.sentence()
    assert text.startswith("With 12 models in 4 seed groups, given noise, a null marker")
    assert "of 12 simulations (nominal 5%)" in text and "a partial r of 0.2 is detected in" in text
    kinds = [type(b) for b in small._blocks()]
    assert Table in kinds and kinds[-1] is Text and "only 12 simulations" in small._blocks()[0].text
    assert small.to_dict()["sentence"] == text


def test_report_section_appends_blocks_and_records() -> None:
    class Settings:
        alpha, seed, calibration_simulations = 0.05, 0, 3

    extras: dict = {}
    blocks = calibration_section(_population(n_levels=3, n_seeds=4), "ood", ("noise",), "seed",
                                 Settings(), extras)
    assert any(isinstance(b, Table) for b in blocks)
    assert extras["calibration"]["records"][0]["n_simulations"] == 3
    Settings.calibration_simulations = 0
    assert calibration_section({}, "ood", (), None, Settings(), {}) == ()
    Settings.calibration_simulations = 3
    two = _population(n_levels=3, n_seeds=2)
    (warning,) = calibration_section(two, "ood", ("noise",), "seed", Settings(), extras)
    assert warning.level == "warning" and ">= 3 groups" in warning.text


# --------------------------------------------------------------------------- size and power


def _analytic_power(rho: float, n: int, q: int, alpha: float) -> float:
    """Two-sided OLS t-test of m's slope in ``y ~ [1, C] + m``, averaged over the design of m.

    Given m, ``t ~ noncentral t(n - q - 1, delta)`` with ``delta^2 = rho^2 / (1 - rho^2) *
    |(I - H) m|^2 / sigma_m^2`` and ``|(I - H) m|^2 / sigma_m^2 ~ chi^2(n - q)``.
    """
    df = n - q - 1
    crit = sps.t.ppf(1 - alpha / 2, df)

    def power(w: float) -> float:
        delta = math.sqrt(rho**2 / (1 - rho**2) * w)
        return (sps.nct.sf(crit, df, delta) + sps.nct.cdf(-crit, df, delta)) * sps.chi2.pdf(w, n - q)

    return integrate.quad(power, 0, sps.chi2.ppf(1 - 1e-12, n - q), limit=200)[0]


@pytest.mark.slow
def test_size_and_power_match_the_t_test() -> None:
    """No design effect, no groups: size within the Wilson interval, power = the t-test's."""
    rng = np.random.default_rng(11)
    n = 20
    t = {"noise": np.tile(np.arange(4), 5).astype(float).tolist(), "ood": rng.normal(size=n).tolist()}
    n_sim = 400
    cal = calibrate(t, "ood", covariates=("noise",), groups=None, effects=(0.6,),
                    n_simulations=n_sim, seed=2)
    size = cal[0.0]["rejected"]
    lo, hi = proportion_confint(round(size * n_sim), n_sim, alpha=0.01, method="wilson")
    assert lo <= 0.05 <= hi, (size, lo, hi)
    analytic = _analytic_power(0.6, n, 2, 0.05)
    assert analytic == pytest.approx(0.814, abs=0.002)  # also by Monte Carlo of the nct mixture

    power = cal[0.6]["rejected"]
    lo, hi = proportion_confint(round(power * n_sim), n_sim, alpha=0.01, method="wilson")
    assert lo <= analytic <= hi, (power, analytic, lo, hi)
    assert abs(cal[0.6]["covered"] - 0.95) < 0.05


def test_every_diagnosis_report_has_the_calibration_section(tmp_path) -> None:
    from probekit.diagnosis.runner import _csv
    from probekit.diagnosis.table_diagnosis import diagnose_table

    t = _population(n_levels=3, n_seeds=4)
    (tmp_path / "markers.csv").write_text(_csv(t))
    spec = tmp_path / "diag.toml"
    spec.write_text('[suite]\nname = "cal"\n\n[population]\ntable = "markers.csv"\n'
                    'knobs = ["noise"]\n\n[diagnosis]\noutcome = "ood"\nn_permutations = 99\n')
    res = diagnose_table(spec)
    tables = [b for b in res.blocks if isinstance(b, Table) and b.title.startswith("What this")]
    assert len(tables) == 1 and len(tables[0].rows) == 4
    cal = res.extras["calibration"]
    assert cal["groups"] == "seed" and cal["covariates"] == ["noise"]
    assert cal["settings"]["n_simulations"] == 4  # tests/diagnosis/conftest.py's size
    assert res.to_dict()["diagnosis"]["calibration"]["sentence"].startswith("With 12 models")


def test_coverage_note_states_the_measured_coverage_range():
    from probekit.diagnosis.statistics.calibration import coverage_note

    cal = {"records": [{"covered": 0.9}, {"covered": 0.955}, {"covered": None}],
           "settings": {"confidence_level": 0.95}}
    assert coverage_note(cal) == "95% CI coverage measured on this design: 90%-96%"
    assert coverage_note({"records": [{"covered": 0.9}], "settings": {"confidence_level": 0.9}}) \
        == "90% CI coverage measured on this design: 90%"
    assert coverage_note(None) is None and coverage_note({"records": [], "settings": {}}) is None
