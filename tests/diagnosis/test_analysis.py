"""marker_analysis: equal to a direct computation, planted structure found, calibrated nulls."""

import json

import numpy as np
import pytest
from scipy import stats
from sklearn.linear_model import LinearRegression
from sklearn.metrics import r2_score
from sklearn.model_selection import LeaveOneGroupOut

from probekit.diagnosis import marker_analysis
from probekit.diagnosis.analysis import (
    _wcorr,
    _wranks,
    _wresidual,
    freedman_lane_null,
    logo_predictions,
    permutations,
    spearman_null,
)
from probekit.errors import ConfigError, DataError


def population(seed: int, n_seeds: int = 5, n_levels: int = 6) -> dict[str, list]:
    """5 seeds x 6 knob levels; the outcome = knob effect + planted signal + noise."""
    rng = np.random.default_rng(seed)
    seeds = np.repeat(np.arange(n_seeds), n_levels)
    knob = np.tile(np.linspace(0.0, 1.0, n_levels), n_seeds)
    n = knob.size
    signal = rng.normal(size=n)
    ood = -2.0 * knob + 0.5 * signal + 0.2 * rng.normal(size=n)
    return {
        "seed": seeds.tolist(), "noise": knob.tolist(), "ood": ood.tolist(),
        "planted": (signal + 0.3 * rng.normal(size=n)).tolist(),
        "tracks_knob": (np.exp(knob) + 0.05 * rng.normal(size=n)).tolist(),
        "null_a": rng.normal(size=n).tolist(), "null_b": rng.normal(size=n).tolist(),
    }


def _arr(t, k):
    return np.asarray(t[k], dtype=float)


# ------------------------------------------------------------------ equal to a direct computation


@pytest.mark.parametrize("groups", [None, "seed"])
def test_equals_direct_computation(groups):
    rng = np.random.default_rng(3)
    n = 40
    t = {
        "seed": (np.arange(n) % 8).tolist(),
        "knob": rng.normal(size=n).tolist(),
        "arch": rng.choice(["a", "b", "c"], size=n).tolist(),
        "id_acc": rng.uniform(size=n).tolist(),
        "y": rng.normal(size=n).tolist(),
        "m1": rng.normal(size=n).tolist(),
        "m2": rng.normal(size=n).tolist(),
        "m3": rng.normal(size=n).tolist(),
    }
    t["y"] = (_arr(t, "y") + 0.8 * _arr(t, "m1") + _arr(t, "knob")).tolist()
    covs = ["knob", "arch", "id_acc"]
    res = marker_analysis(t, "y", markers=["m1", "m2", "m3"], covariates=covs, groups=groups,
                          n_permutations=200,
                          covariate_coding={"knob": "linear", "id_acc": "linear"})
    y = _arr(t, "y")
    arch = np.asarray(t["arch"])
    C = np.column_stack([_arr(t, "knob"), arch == "b", arch == "c", _arr(t, "id_acc")]).astype(float)
    X = np.column_stack([np.ones(n), C])
    g = np.asarray(t["seed"]) if groups else np.arange(n)
    assert res.covariate_terms == ("knob", "arch=b", "arch=c", "id_acc")
    ps, pps = [], []
    for rec in res.to_records():
        m = _arr(t, rec["marker"])
        assert rec["spearman"] == pytest.approx(stats.spearmanr(m, y).statistic, abs=1e-10)
        assert rec["pearson"] == pytest.approx(stats.pearsonr(m, y).statistic, abs=1e-10)
        em = m - X @ np.linalg.lstsq(X, m, rcond=None)[0]
        ey = y - X @ np.linalg.lstsq(X, y, rcond=None)[0]
        assert rec["partial_r"] == pytest.approx(np.corrcoef(em, ey)[0, 1], abs=1e-10)
        preds = {}
        for name, Z in (("cov", C), ("full", np.column_stack([C, m]))):
            pred = np.empty(n)
            for tr, te in LeaveOneGroupOut().split(Z, y, g):
                pred[te] = LinearRegression().fit(Z[tr], y[tr]).predict(Z[te])
            preds[name] = r2_score(y, pred)
        assert rec["r2_covariates"] == pytest.approx(preds["cov"], abs=1e-10)
        assert rec["r2_full"] == pytest.approx(preds["full"], abs=1e-10)
        assert rec["delta_r2"] == pytest.approx(preds["full"] - preds["cov"], abs=1e-10)
        assert rec["delta_r2_low"] <= rec["delta_r2"] <= rec["delta_r2_high"] or groups
        assert rec["n"] == n and rec["n_groups"] == (8 if groups else n)
        ps.append(rec["p"])
        pps.append(rec["partial_p"])
    # Holm by hand: sorted p times (m, m-1, ...), running max, capped at 1
    for raw, key in ((ps, "p_holm"), (pps, "partial_p_holm")):
        order = np.argsort(raw)
        hand = np.empty(3)
        running = 0.0
        for rank, i in enumerate(order):
            running = max(running, min(1.0, (3 - rank) * raw[i]))
            hand[i] = running
        np.testing.assert_allclose([r[key] for r in res.to_records()], hand, atol=1e-12)
    assert res["m1"].verdict == "adds_beyond_covariates"


def test_permutation_nulls_equal_loops():
    rng = np.random.default_rng(0)
    n = 25
    m, y = rng.normal(size=n), rng.normal(size=n)
    X = np.column_stack([np.ones(n), rng.normal(size=(n, 2))])
    perms = permutations(n, 50, rng)
    assert all(sorted(p) == list(range(n)) for p in perms)
    rho, null = spearman_null(m, y, perms)
    assert rho == pytest.approx(stats.spearmanr(m, y).statistic, abs=1e-12)
    np.testing.assert_allclose(null, [stats.spearmanr(m, y[p]).statistic for p in perms], atol=1e-12)
    # Freedman-Lane by brute force: permute the reduced model's residuals, add back the fit,
    # residualise again, correlate with the marker's residuals
    beta = np.linalg.lstsq(X, y, rcond=None)[0]
    fit, ey = X @ beta, y - X @ beta
    em = m - X @ np.linalg.lstsq(X, m, rcond=None)[0]
    ref = []
    for p in perms:
        ystar = fit + ey[p]
        es = ystar - X @ np.linalg.lstsq(X, ystar, rcond=None)[0]
        ref.append(np.corrcoef(em, es)[0, 1])
    r, null_r = freedman_lane_null(m, y, X, perms)
    assert r == pytest.approx(np.corrcoef(em, ey)[0, 1], abs=1e-12)
    np.testing.assert_allclose(null_r, ref, atol=1e-12)


def test_weighted_bootstrap_equals_replicated_sample():
    """A group bootstrap resample as weights gives the statistics of the replicated sample."""
    rng = np.random.default_rng(1)
    n = 12
    m = np.round(rng.normal(size=n), 1)  # ties
    y = rng.normal(size=n)
    X = np.column_stack([np.ones(n), rng.normal(size=n)])
    W = rng.integers(0, 3, size=(4, n)).astype(float)
    W[:, :3] += 1
    rho = _wcorr(W, _wranks(W, m), _wranks(W, y))
    part = _wcorr(W, _wresidual(W, X, m), _wresidual(W, X, y))
    for b in range(4):
        idx = np.repeat(np.arange(n), W[b].astype(int))
        assert rho[b] == pytest.approx(stats.spearmanr(m[idx], y[idx]).statistic, abs=1e-10)
        Xi = X[idx]
        em = m[idx] - Xi @ np.linalg.lstsq(Xi, m[idx], rcond=None)[0]
        ey = y[idx] - Xi @ np.linalg.lstsq(Xi, y[idx], rcond=None)[0]
        assert part[b] == pytest.approx(np.corrcoef(em, ey)[0, 1], abs=1e-10)


def test_no_covariates_partial_is_pearson_and_frame_matches_records():
    t = population(0)
    res = marker_analysis(t, "ood", groups="seed", n_permutations=200)
    for s in res.markers:
        assert s.partial_r == pytest.approx(s.pearson, abs=1e-12)
    assert "partial = Pearson" in res.sentence("planted")
    frame = res.to_frame()
    assert frame.to_dict("records") == res.to_records() or all(
        np.allclose(list(a.values())[3:], list(b.values())[3:], equal_nan=True)
        for a, b in zip(frame.to_dict("records"), res.to_records(), strict=True))
    json.dumps(res.to_dict(), allow_nan=False)


def test_missing_cells_drop_rows_for_that_marker_only():
    t = population(1)
    full = marker_analysis(t, "ood", covariates=["noise"], groups="seed", n_permutations=100)
    holes = dict(t)
    holes["null_a"] = [None if i % 7 == 0 else v for i, v in enumerate(t["null_a"])]
    res = marker_analysis(holes, "ood", covariates=["noise"], groups="seed", n_permutations=100)
    assert res["null_a"].n_missing == 5 and res["null_a"].n == 25
    assert res["planted"].n_missing == 0 and res["planted"].n == 30
    assert res["planted"].partial_r == full["planted"].partial_r
    keep = [i for i in range(30) if i % 7]
    sub = {k: [v[i] for i in keep] for k, v in t.items()}
    ref = marker_analysis(sub, "ood", markers=["null_a"], covariates=["noise"], groups="seed",
                          n_permutations=100)
    for key in ("spearman", "partial_r", "r2_full", "delta_r2"):
        assert getattr(res["null_a"], key) == pytest.approx(getattr(ref["null_a"], key), abs=1e-12)


# ------------------------------------------------------------------ planted structure


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_planted_tracking_and_null_markers(seed):
    t = population(seed)
    res = marker_analysis(t, "ood", covariates=["noise"], groups="seed")
    assert res["planted"].verdict == "adds_beyond_covariates", res.sentence("planted")
    assert res["tracks_knob"].verdict == "explained_by_covariates", res.sentence("tracks_knob")
    assert res["tracks_knob"].p_holm <= 0.05 and res["tracks_knob"].partial_p_holm > 0.05
    text = res.sentence("tracks_knob")
    assert text.startswith("tracks_knob: Spearman -0.") and "given noise the partial r is" in text
    assert text.endswith("explained by the covariates.")


def test_null_markers_are_quiet():
    """Pure-noise markers: no_association in >= 90% of 20 populations, never 'adds'."""
    verdicts = []
    for seed in range(20):
        res = marker_analysis(population(100 + seed), "ood", covariates=["noise"], groups="seed",
                              n_permutations=400)
        verdicts += [res[m].verdict for m in ("null_a", "null_b")]
    assert verdicts.count("no_association") >= 36, verdicts
    assert "adds_beyond_covariates" not in verdicts


def test_an_exact_function_of_the_covariates_has_no_partial():
    t = population(0)
    t["copy_of_knob"] = (3 * np.asarray(t["noise"]) + 1).tolist()
    res = marker_analysis(t, "ood", markers=["copy_of_knob", "planted"], covariates=["noise"],
                          groups="seed", n_permutations=200)
    s = res["copy_of_knob"]
    assert s.verdict == "explained_by_covariates"
    assert "linear function of the covariates" in s.reason and np.isnan(s.partial_r)
    assert res.to_dict()["markers"][0]["partial_r"] is None


# ------------------------------------------------------------------ calibration under the null


def _null_rates(reps: int) -> tuple[float, float, float]:
    marg = part = verdict = 0
    for r in range(reps):
        t = population(1000 + r)
        t["ood"] = np.random.default_rng(r).permutation(t["ood"]).tolist()
        res = marker_analysis(t, "ood", markers=["planted", "null_a", "null_b", "tracks_knob"],
                              covariates=["noise"], groups="seed", n_permutations=400, seed=r)
        marg += any(s.p_holm <= 0.05 for s in res.markers)
        part += any(s.partial_p_holm <= 0.05 for s in res.markers)
        verdict += any(s.verdict != "no_association" for s in res.markers)
    return marg / reps, part / reps, verdict / reps


def test_shuffled_outcome_rarely_significant_fast():
    marg, part, verdict = _null_rates(60)
    assert marg <= 0.12 and part <= 0.12 and verdict <= 0.12, (marg, part, verdict)


@pytest.mark.slow
def test_shuffled_outcome_calibrated():
    """Family-wise error of each Holm family at 5% +- 2% over 1000 shuffled populations."""
    marg, part, verdict = _null_rates(1000)
    assert 0.03 <= marg <= 0.07, marg
    assert 0.03 <= part <= 0.07, part
    assert verdict <= 0.07, verdict


# ------------------------------------------------------------------ bad input


def test_bad_input_messages():
    t = population(0)
    with pytest.raises(ConfigError, match=r"outcome column 'oood' is not in the table; valid "
                       r"columns: 'seed', 'noise', 'ood'"):
        marker_analysis(t, "oood")
    with pytest.raises(ConfigError, match="covariate column 'nois' is not in the table"):
        marker_analysis(t, "ood", covariates=["nois"])
    with pytest.raises(ConfigError, match="marker column 'he' is not in the table"):
        marker_analysis(t, "ood", markers=["he"])
    ragged = dict(t, planted=t["planted"][:-2])
    with pytest.raises(DataError, match="column 'seed' has 30 rows but column 'planted' has 28"):
        marker_analysis(ragged, "ood")
    nan_y = dict(t, ood=[np.nan if i in (3, 17) else v for i, v in enumerate(t["ood"])])
    with pytest.raises(DataError, match=r"outcome column 'ood' has missing .* rows 3, 17"):
        marker_analysis(nan_y, "ood")
    nan_c = dict(t, noise=[None if i == 5 else v for i, v in enumerate(t["noise"])])
    with pytest.raises(DataError, match=r"covariate column 'noise' has missing .* rows 5"):
        marker_analysis(nan_c, "ood", covariates=["noise"])
    with pytest.raises(DataError, match=r"outcome column 'ood' is constant \(0\.5 in all 30"):
        marker_analysis(dict(t, ood=[0.5] * 30), "ood")
    two = dict(t, seed=[i % 2 for i in range(30)])
    with pytest.raises(DataError, match="leave-one-group-out needs >= 3 groups; groups column "
                       "'seed' has 2 distinct"):
        marker_analysis(two, "ood", groups="seed")
    with pytest.raises(ConfigError, match="marker 'noise' is also the outcome, a covariate"):
        marker_analysis(t, "ood", markers=["noise"], covariates=["noise"])
    with pytest.raises(ConfigError, match="n_bootstrap=100 is below the 1000"):
        marker_analysis(t, "ood", n_bootstrap=100)
    with pytest.raises(DataError, match="column 'planted' mixes numbers and text"):
        marker_analysis(dict(t, planted=["x"] + t["planted"][1:]), "ood")


def test_not_applicable_records():
    t = population(0)
    t["const"] = [1.0] * 30
    t["all_none"] = [None] * 30
    t["two_seeds"] = [v if s < 2 else None for v, s in zip(t["null_a"], t["seed"], strict=True)]
    res = marker_analysis(t, "ood", markers=["planted", "const", "all_none", "two_seeds"],
                          covariates=["noise"], groups="seed", n_permutations=200)
    assert res["const"].verdict == "not_applicable"
    assert res["const"].reason == "constant (1) over the 30 models that have it"
    assert res["all_none"].reason == "no model has a value (30 missing cells)"
    assert res["two_seeds"].reason == "only 2 group(s) have a value; leave-one-group-out needs >= 3"
    assert res["two_seeds"].n == 12 and res["two_seeds"].n_missing == 18
    assert res.sentence("const") == "const: not applicable (constant (1) over the 30 models that have it)."
    # Holm runs over the applicable markers only: one marker -> Holm p = p
    assert res["planted"].p_holm == res["planted"].p
    assert any("not applicable: const, all_none, two_seeds" in w for w in res.warnings)
    rec = res.to_dict()["markers"][1]
    assert rec["verdict"] == "not_applicable" and rec["spearman"] is None


def test_dataframe_input_equals_mapping():
    pd = pytest.importorskip("pandas")
    t = population(2)
    a = marker_analysis(t, "ood", covariates=["noise"], groups="seed", n_permutations=100)
    b = marker_analysis(pd.DataFrame(t), "ood", covariates=["noise"], groups="seed",
                        n_permutations=100)
    assert a.to_records() == b.to_records()


def test_permutations_within_strata():
    t = population(0)
    strata = np.asarray(t["seed"])
    perms = permutations(30, 200, np.random.default_rng(0), strata)
    assert (strata[perms] == strata).all()
    assert (perms != np.arange(30)).any(1).mean() > 0.9  # actually permuted
    plain = marker_analysis(t, "ood", markers=["tracks_knob", "planted"], groups="seed",
                            n_permutations=400)
    within = marker_analysis(t, "ood", markers=["tracks_knob", "planted"], groups="seed",
                             n_permutations=400, strata="noise")
    # across levels the knob drives both; within each noise level the tracker orders nothing
    assert plain["tracks_knob"].p_holm <= 0.05 < within["tracks_knob"].p_holm
    assert within["planted"].p_holm <= 0.05 and within.settings["strata"] == "noise"


def test_to_frame_without_pandas(monkeypatch):
    import sys

    res = marker_analysis(population(0), "ood", markers=["planted"], n_permutations=100)
    monkeypatch.setitem(sys.modules, "pandas", None)
    with pytest.raises(ConfigError, match=r"to_frame\(\) needs pandas.*\[notebook\]"):
        res.to_frame()


@pytest.mark.parametrize("kind", ["single", "groups", "unseen_level"])
def test_logo_predictions_equal_refits(kind):
    rng = np.random.default_rng(4)
    n = 24
    X = np.column_stack([np.ones(n), rng.normal(size=(n, 2))])
    y = rng.normal(size=n)
    g = np.arange(n) if kind == "single" else np.arange(n) % 4
    if kind == "unseen_level":  # an indicator only group 0 has: that fold is rank-deficient
        X = np.column_stack([X, (g == 0).astype(float)])
    ref = np.empty(n)
    for k in np.unique(g):
        te = g == k
        ref[te] = X[te] @ np.linalg.lstsq(X[~te], y[~te], rcond=None)[0]
    np.testing.assert_allclose(logo_predictions(y, X, g), ref, atol=1e-10)


def test_sentence_says_why_a_significant_partial_gets_no_association():
    import dataclasses

    res = marker_analysis(population(0), "ood", markers=["planted"], covariates=["noise"],
                          groups="seed", n_permutations=200)
    assert "no association claimed" not in res.sentence("planted")
    odd = dataclasses.replace(res["planted"], verdict="no_association", partial_p_holm=0.01,
                              delta_r2_low=-0.1)
    text = dataclasses.replace(res, markers=type(res.markers)([odd])).sentence("planted")
    assert text.endswith(": no association claimed (the partial correlation is significant, "
                         "but the out-of-sample gain's CI includes 0).")
    late = dataclasses.replace(odd, partial_p_holm=0.2)
    assert dataclasses.replace(res, markers=type(res.markers)([late])).sentence(
        "planted").endswith(": no association.")
