"""The crossing step as a survival time: Cox vs lifelines, Harrell's C, the censoring curve."""

import numpy as np
import pandas as pd
import pytest
from lifelines import CoxPHFitter
from lifelines.utils import concordance_index
from scipy import stats

from probekit.diagnosis.statistics.survival import (
    DEPENDS_ON_CENSORING,
    censor_grid,
    censoring_sensitivity,
    concordance_test,
    cox_marker,
    harrell_c,
)
from probekit.errors import ConfigError, DataError
from probekit.report.blocks import LinePlot, Table, Text


def population(seed: int, n: int = 48, n_groups: int = 6, k: int = 6) -> dict[str, list]:
    """The marker matters only through the censored runs: the ``k`` largest markers never
    cross; the crossing steps of the others are uniform and independent of the marker."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=n)
    m = rng.normal(size=n)
    censored = np.zeros(n, bool)
    censored[np.argsort(m)[-k:]] = True
    t = rng.uniform(100, 1000, size=n).round()
    return {"y": [None if c else float(v) for c, v in zip(censored, t)], "x": x.tolist(),
            "kind": ["a" if v > 0 else "b" for v in rng.normal(size=n)], "m": m.tolist(),
            "seed": [i % n_groups for i in range(n)]}


def test_cox_equals_lifelines_on_the_same_frame():
    t = population(1)
    got = cox_marker(t, "y", "m", censor=1025.0, covariates=["x", "kind"], groups="seed",
                     n_permutations=99, confidence_level=0.9, covariate_coding={"x": "linear"})
    y = np.array([np.nan if v is None else v for v in t["y"]])
    m = np.array(t["m"])
    frame = pd.DataFrame({"duration": np.where(np.isnan(y), 1025.0, y),
                          "event": (~np.isnan(y)).astype(int), "x": t["x"],
                          "kind_b": [float(v == "b") for v in t["kind"]],
                          "marker": (m - m.mean()) / m.std(ddof=1), "stratum": t["seed"]})
    ref = CoxPHFitter(alpha=0.1).fit(frame, "duration", "event", strata=["stratum"]).summary
    row = ref.loc["marker"]
    assert got.hazard_ratio == pytest.approx(row["exp(coef)"], rel=1e-6)
    assert got.hr_low == pytest.approx(row["exp(coef) lower 90%"], rel=1e-6)
    assert got.hr_high == pytest.approx(row["exp(coef) upper 90%"], rel=1e-6)
    assert got.p == pytest.approx(row["p"], rel=1e-6)
    assert got.se == pytest.approx(row["se(coef)"], rel=1e-6)
    assert (got.n, got.n_events) == (48, 42)
    # the Cox fit and Harrell's C do not depend on the censoring value
    later = cox_marker(t, "y", "m", censor=5000.0, covariates=["x", "kind"], groups="seed",
                       n_permutations=99, confidence_level=0.9, covariate_coding={"x": "linear"})
    assert later.to_record() == pytest.approx(got.to_record(), nan_ok=True)
    # unstratified without groups
    plain = cox_marker(t, "y", "m", censor=1025.0, covariates=["x", "kind"], n_permutations=99,
                       covariate_coding={"x": "linear"})
    ref = CoxPHFitter().fit(frame.drop(columns="stratum"), "duration", "event").summary
    assert plain.hazard_ratio == pytest.approx(ref.loc["marker", "exp(coef)"], rel=1e-6)


def test_harrell_c_equals_lifelines():
    rng = np.random.default_rng(0)
    time = rng.integers(1, 20, size=40).astype(float)  # tied times
    event = rng.random(40) < 0.7
    score = rng.integers(0, 5, size=(3, 40)).astype(float)  # tied scores
    got = harrell_c(time, event, score)
    for b in range(3):
        assert got[b] == pytest.approx(concordance_index(time, score[b], event), abs=1e-12)
    with pytest.raises(DataError, match="no comparable pair"):
        harrell_c(time, np.zeros(40, bool), score)


def test_harrell_c_permutation_p_is_uniform_under_the_null():
    rejections = 0
    groups = np.arange(30) % 3
    for r in range(200):
        t = population(100 + r, n=30, n_groups=3)
        y = np.array([np.nan if v is None else v for v in t["y"]])
        m = np.random.default_rng(r).normal(size=30)  # independent of the crossing time
        _, p = concordance_test(np.where(np.isnan(y), 1025.0, y), ~np.isnan(y), m, groups,
                                n_permutations=99, seed=r)
        rejections += p <= 0.05
    ci = stats.binomtest(rejections, 200).proportion_ci(0.95, method="wilson")
    assert ci.low <= 0.05 <= ci.high, rejections
    # a marker that orders the crossings is at the floor
    y = np.arange(1.0, 31.0)
    _, p = concordance_test(y, np.ones(30, bool), y.copy(), groups, n_permutations=99)
    assert p == 0.01


def test_verdict_that_moves_with_the_censoring_value_is_flagged():
    r = censoring_sensitivity(population(4), "y", markers=["m", "x"],
                              censors=(1025, 1500, 2000, 3000), covariates=["kind"],
                              groups="seed", n_permutations=200)
    assert r.censors == (1025.0, 1500.0, 2000.0, 3000.0) and (r.n_censored, r.n_runs) == (6, 48)
    curve = [c for c in r.curve if c["marker"] == "m"]
    assert [c["censor"] for c in curve] == list(r.censors)
    # the partial r grows with C (the censored runs carry the association), Spearman does not move
    assert np.all(np.diff([c["partial_r"] for c in curve]) > 0)
    assert np.ptp([c["spearman"] for c in curve]) == pytest.approx(0.0, abs=1e-12)
    # within seeds the partial r at C = 1025 is not significant, and with 48 models in 4 seeds
    # its CI cannot be shown inside +-0.2 either: inconclusive; from C = 1500 on it adds
    assert r.verdicts("m") == ["inconclusive"] + ["adds_beyond_covariates"] * 3
    assert r.flags == {"m": (DEPENDS_ON_CENSORING,), "x": ()}
    assert r.sentence("x") == ""
    assert r.sentence("m").startswith("m: its verdict on the censored y depends on the censoring "
                                      "value given to the 6 never-crossing runs "
                                      "(inconclusive at C = 1025 (partial r +0.25)")
    assert "Cox hazard ratio per SD, which does not depend on C, is 0.69" in r.sentence("m")
    # Cox: a larger marker, later (never) crossing -> hazard ratio < 1
    assert r.cox[0].hazard_ratio < 1 and r.cox[0].p < 0.05 and r.cox[0].concordance > 0.5
    assert r.cox_records()[0]["flags"] == DEPENDS_ON_CENSORING
    ps = [c.p for c in r.cox]
    assert [c.p_holm for c in r.cox] == pytest.approx(
        [min(1.0, max(2 * min(ps), p)) for p in ps])  # Holm over the two markers
    blocks = r._blocks()
    assert [type(b) for b in blocks] == [Table, Text, Table, LinePlot]
    assert blocks[3].series[0].values == tuple(c["partial_r"] for c in curve)
    d = r.to_dict()
    assert d["flags"] == {"m": [DEPENDS_ON_CENSORING], "x": []} and list(d["sentences"]) == ["m"]
    assert len(r.to_records()) == 8


def test_bad_grids_and_nothing_censored():
    t = population(2)
    with pytest.raises(DataError, match="censor = 900 is not above the largest observed"):
        censoring_sensitivity(t, "y", markers=["m"], censors=(900, 2000), n_permutations=19)
    with pytest.raises(ConfigError, match="increasing and distinct"):
        censoring_sensitivity(t, "y", markers=["m"], censors=(2000, 1500), n_permutations=19)
    full = dict(t, y=[1.0 if v is None else v for v in t["y"]])
    with pytest.raises(DataError, match="every run crosses"):
        censoring_sensitivity(full, "y", markers=["m"], n_permutations=19)
    assert censor_grid(1225) == (1225.0, 1531.0, 1838.0, 2144.0, 2450.0)
    with pytest.raises(ConfigError, match="censor_grid needs"):
        censor_grid(0.0)


@pytest.mark.slow
def test_shipped_modadd_crossing_survival_reproduces(tmp_path, monkeypatch):
    """docs/diagnosis/modadd/crossing_survival.json equals a rerun of the script."""
    import json
    import sys
    from pathlib import Path

    from scripts import modadd_crossing_survival as S

    root = Path(__file__).resolve().parents[3] / "docs" / "diagnosis" / "modadd"
    out = tmp_path / "s.json"
    monkeypatch.setattr(sys, "argv", ["x", str(root / "markers.csv"), "--out", str(out)])
    S.main()
    got, want = json.loads(out.read_text()), json.loads((root / "crossing_survival.json").read_text())
    assert got == want
    assert sorted(m for m, f in want["300"]["flags"].items() if f) == \
        ["fourier_gini_logit", "probe_accuracy", "restricted_loss"]
