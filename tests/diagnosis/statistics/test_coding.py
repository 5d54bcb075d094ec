"""Covariates coded by what they are: factors, natural splines, the seed refused as a number."""

from __future__ import annotations

import numpy as np
import patsy
import pytest
from statsmodels.stats.proportion import proportion_confint

from probekit.diagnosis import marker_analysis
from probekit.diagnosis.statistics.table import as_marker_table
from probekit.errors import ConfigError


def test_default_codings_exact_matrix():
    rng = np.random.default_rng(0)
    n = 14
    noise = [0.3, 0.1, 0.0, 0.1, 0.3, 0.0, 0.1, 0.3, 0.0, 0.1, 0.3, 0.0, 0.1, 0.3]
    acc = rng.uniform(0.5, 1.0, size=n)
    arch = ["b", "a", "c", "a", "b", "c", "a", "b", "c", "a", "b", "c", "a", "b"]
    t = as_marker_table({"noise": noise, "id_acc": acc.tolist(), "arch": arch})
    X, terms = t.design(["noise", "arch", "id_acc"])
    assert terms == ("noise=0.1", "noise=0.3", "arch=b", "arch=c",
                     "id_acc[spline 1/4]", "id_acc[spline 2/4]", "id_acc[spline 3/4]",
                     "id_acc[spline 4/4]")
    nz, ar = np.asarray(noise), np.asarray(arch)
    np.testing.assert_array_equal(X[:, :4], np.column_stack(
        [nz == 0.1, nz == 0.3, ar == "b", ar == "c"]).astype(float))
    # the library's own basis, through its formula interface
    ref = patsy.dmatrix("cr(x, df=4, constraints='center') - 1", {"x": acc})
    np.testing.assert_allclose(X[:, 4:], np.asarray(ref), atol=1e-9)
    np.testing.assert_allclose(X[:, 4:].sum(0), 0.0, atol=1e-9)  # orthogonal to the intercept


def test_overrides_and_spline_df():
    x = np.linspace(0.0, 1.0, 12) ** 2
    k = [0, 1, 2] * 4
    t = as_marker_table({"x": x.tolist(), "k": k})
    X, terms = t.design(["k", "x"], coding={"k": "linear", "x": "spline"}, spline_df=3)
    assert terms == ("k", "x[spline 1/3]", "x[spline 2/3]", "x[spline 3/3]")
    np.testing.assert_array_equal(X[:, 0], k)
    np.testing.assert_allclose(X[:, 1:], patsy.cr(x, df=3, constraints="center"), atol=1e-9)
    X, terms = t.design(["x"], coding={"x": "linear"})
    assert terms == ("x",)
    np.testing.assert_array_equal(X[:, 0], x)
    X, terms = t.design(["x"], coding={"x": "factor"})
    assert len(terms) == 11 and terms[0] == f"x={x[1]}" and X.sum() == 11


@pytest.mark.parametrize("how", ["linear", "spline"])
def test_seed_as_a_number_is_refused_with_the_fix(how):
    t = as_marker_table({"seed": list(range(12)), "run": list(range(12))})
    with pytest.raises(ConfigError, match=rf"covariate 'seed' is the seed, a label without order: "
                       rf"it cannot enter as a number \('{how}'\); leave it as the groups column "
                       r"\(the default: remove it from the covariates\) or code it as a factor"):
        t.design(["seed"], coding={"seed": how})
    with pytest.raises(ConfigError, match="covariate 'run' is the groups column 'run'"):
        t.design(["run"], coding={"run": how}, groups="run")
    X, terms = t.design(["seed"])  # 12 distinct values, still a factor
    assert terms[0] == "seed=1" and X.shape == (12, 11)


def test_other_refusals():
    t = as_marker_table({"a": ["u", "v", "w"] * 4, "x": [0.0, 1.0, 2.0, 3.0] * 3})
    with pytest.raises(ConfigError, match="covariate 'a' holds text; it can only enter as a factor"):
        t.design(["a"], coding={"a": "linear"})
    with pytest.raises(ConfigError, match=r"covariate_coding of 'x' = 'cubic': must be one of"):
        t.design(["x"], coding={"x": "cubic"})
    with pytest.raises(ConfigError, match="covariate_coding names 'z', which is not a covariate"):
        t.design(["x"], coding={"z": "factor"})
    with pytest.raises(ConfigError, match=r"4 distinct values, too few for a natural cubic spline "
                       r"with spline_df = 4 \(needs >= 6\)"):
        t.design(["x"], coding={"x": "spline"})
    with pytest.raises(ConfigError, match="spline_df = 1: .* integer >= 2"):
        t.design(["x"], spline_df=1)


def _replicate(rng: np.random.Generator, coding: dict[str, str] | None) -> float:
    """Marker and outcome both exp-shaped in a 5-level knob, independent given the knob."""
    k = np.repeat(np.arange(5.0), 4)
    m = np.exp(k) / 10 + 0.5 * rng.normal(size=k.size)
    y = np.exp(k) / 10 + 0.5 * rng.normal(size=k.size)
    res = marker_analysis({"knob": k.tolist(), "m": m.tolist(), "y": y.tolist()}, "y",
                          markers=["m"], covariates=["knob"], n_permutations=99,
                          covariate_coding=coding)
    return res.markers[0].partial_p


def test_linear_knob_gives_false_partial_association_factor_does_not():
    """60 null replicates (m independent of y given the knob): rejection rates at 5% (~2.5 s)."""
    linear = np.array([_replicate(np.random.default_rng([7, i]), {"knob": "linear"})
                       for i in range(60)])
    factor = np.array([_replicate(np.random.default_rng([7, i]), None) for i in range(60)])
    n_lin, n_fac = int((linear <= 0.05).sum()), int((factor <= 0.05).sum())
    lo_lin, _ = proportion_confint(n_lin, 60, alpha=0.05, method="wilson")
    lo_fac, hi_fac = proportion_confint(n_fac, 60, alpha=0.05, method="wilson")
    assert lo_lin > 0.5  # the knob's curvature, left in both residuals, reads as association
    assert lo_fac <= 0.05 <= hi_fac  # the factor coding holds the nominal level


def test_a_few_distinct_measured_values_enter_linearly():
    """Six models: train loss has 6 values, all distinct; a factor would fit each model exactly."""
    loss = [0.31, 0.12, 0.55, 0.07, 0.23, 0.4]
    t = as_marker_table({"frac": [0.4, 0.4, 0.4, 0.6, 0.6, 0.6], "train_loss": loss})
    X, terms = t.design(["frac", "train_loss"])
    assert terms == ("frac=0.6", "train_loss")
    np.testing.assert_array_equal(X, np.column_stack([[0, 0, 0, 1, 1, 1], loss]))


def test_a_measured_column_with_single_model_values_is_not_a_factor():
    """ID accuracy on a small evaluation set: 4 values over 8 models, two held by one model
    only: a quantity (linear), not a design knob; the same values each held twice: a factor."""
    acc = [0.8, 0.8, 0.8, 0.9, 0.9, 0.9, 0.85, 0.95]
    t = as_marker_table({"id_accuracy": acc})
    X, terms = t.design(["id_accuracy"])
    assert terms == ("id_accuracy",)
    np.testing.assert_array_equal(X[:, 0], acc)
    knob = [0.8, 0.8, 0.85, 0.85, 0.9, 0.9, 0.95, 0.95]
    assert as_marker_table({"knob": knob}).design(["knob"])[1] == (
        "knob=0.85", "knob=0.9", "knob=0.95")
