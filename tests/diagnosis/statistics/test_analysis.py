"""marker_analysis: equal to a direct computation, planted structure found, calibrated nulls."""

import json

import numpy as np
import pytest
import statsmodels.api as sm
from scipy import stats
from sklearn.linear_model import LinearRegression
from sklearn.metrics import r2_score
from sklearn.model_selection import LeaveOneGroupOut

from probekit.diagnosis import marker_analysis
from probekit.diagnosis.statistics.analysis import logo_predictions, permutations
from probekit.diagnosis.statistics.inference import mde_partial_r
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


def _fe(g):
    return (np.asarray(g)[:, None] == np.unique(g)[1:]).astype(float)


def _logo_within(y, Z, g):
    """LOGO R^2 of y ~ Z + group FE, held-out predictions and outcome centred within groups."""
    g = np.asarray(g)
    yc = y.copy()
    pc = np.empty_like(y)
    for k in np.unique(g):
        te = g == k
        tr_fe = (g[~te][:, None] == np.unique(g[~te])).astype(float)
        D = np.column_stack([Z[~te], tr_fe])
        coef = np.linalg.lstsq(D, y[~te], rcond=None)[0][: Z.shape[1]]
        p = Z[te] @ coef
        pc[te] = p - p.mean()
        yc[te] = y[te] - y[te].mean()
    return 1 - ((yc - pc) ** 2).sum() / (yc**2).sum()


@pytest.mark.parametrize("design", ["models", "within_groups", "cluster"])
def test_equals_direct_computation(design):
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
    groups = None if design == "models" else "seed"
    inference = "cluster" if design == "cluster" else "within_groups"
    res = marker_analysis(t, "y", markers=["m1", "m2", "m3"], covariates=covs, groups=groups,
                          inference=inference, n_permutations=200,
                          covariate_coding={"knob": "linear", "id_acc": "linear"})
    assert res.settings["inference"] == design
    y = _arr(t, "y")
    arch = np.asarray(t["arch"])
    C = np.column_stack([_arr(t, "knob"), arch == "b", arch == "c", _arr(t, "id_acc")]).astype(float)
    X = np.column_stack([np.ones(n), C])
    g = np.asarray(t["seed"]) if groups else np.arange(n)
    fe = design != "models"  # cluster: seed fixed effects in, CR1 clustered by seed
    Xp = np.column_stack([X, _fe(g)]) if fe else X
    X0 = np.column_stack([np.ones(n), _fe(g)]) if fe else np.ones((n, 1))
    assert res.covariate_terms == ("knob", "arch=b", "arch=c", "id_acc")
    ps, pps = [], []
    for rec in res.to_records():
        m = _arr(t, rec["marker"])
        assert rec["spearman"] == pytest.approx(stats.spearmanr(m, y).statistic, abs=1e-9)
        assert rec["pearson"] == pytest.approx(stats.pearsonr(m, y).statistic, abs=1e-9)
        for key, D in (("partial_r", Xp), ("marginal_r", X0)):
            em = m - D @ np.linalg.lstsq(D, m, rcond=None)[0]
            ey = y - D @ np.linalg.lstsq(D, y, rcond=None)[0]
            assert rec[key] == pytest.approx(np.corrcoef(em, ey)[0, 1], abs=1e-9)
        # the partial t: statsmodels HC3, or CR1 clustered by seed
        fit = sm.OLS(y, np.column_stack([Xp, m]))
        ref = (fit.fit(cov_type="cluster", cov_kwds={"groups": g}) if design == "cluster"
               else fit.fit(cov_type="HC3"))
        assert rec["partial_t"] == pytest.approx(ref.tvalues[-1], abs=1e-8)
        # p <= 1 - confidence iff the CI excludes 0 (the CI inverts the same test)
        assert (rec["partial_p"] <= 0.05) == (not rec["partial_low"] <= 0 <= rec["partial_high"])
        assert rec["partial_low"] <= rec["partial_r"] <= rec["partial_high"]
        if fe:
            full, cov = _logo_within(y, np.column_stack([C, m]), g), _logo_within(y, C, g)
        else:
            preds = {}
            for name, Z in (("cov", C), ("full", np.column_stack([C, m]))):
                pred = np.empty(n)
                for tr, te in LeaveOneGroupOut().split(Z, y, g):
                    pred[te] = LinearRegression().fit(Z[tr], y[tr]).predict(Z[te])
                preds[name] = r2_score(y, pred)
            full, cov = preds["full"], preds["cov"]
        assert rec["r2_covariates"] == pytest.approx(cov, abs=1e-9)
        assert rec["r2_full"] == pytest.approx(full, abs=1e-9)
        assert rec["delta_r2"] == pytest.approx(full - cov, abs=1e-9)
        assert rec["n"] == n and rec["n_groups"] == (8 if groups else n)
        df = int(n - np.linalg.matrix_rank(np.column_stack([Xp, m])))
        assert rec["mde_partial_r"] == pytest.approx(mde_partial_r(df, 0.05 / 3), abs=1e-9)
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
        np.testing.assert_allclose([r[key] for r in res.to_records()], hand, atol=1e-9)
    if design == "cluster":  # 8 seeds as the unit, 4 covariate terms: p 0.047, Holm p 0.14
        assert res["m1"].partial_r > 0.5 and res["m1"].partial_p < 0.05, res.sentence("m1")
    else:
        assert res["m1"].verdict == "adds_beyond_covariates", res.sentence("m1")


def test_no_covariates_partial_is_pearson_and_frame_matches_records():
    t = population(0)
    res = marker_analysis(t, "ood", groups=None, n_permutations=200)
    for s in res.markers:
        assert s.partial_r == pytest.approx(s.pearson, abs=1e-9)
        assert s.marginal_r == pytest.approx(s.pearson, abs=1e-9)
        assert (s.pearson_low, s.pearson_high) == (s.marginal_low, s.marginal_high)
    assert "with no covariates the partial r is" in res.sentence("planted")
    within = marker_analysis(t, "ood", n_permutations=200)  # groups auto -> seed fixed effects
    for s in within.markers:
        assert s.partial_r == pytest.approx(s.marginal_r, abs=1e-9)
    frame = res.to_frame()
    assert frame.to_dict("records") == res.to_records() or all(
        np.allclose(list(a.values())[4:], list(b.values())[4:], equal_nan=True)
        for a, b in zip(frame.to_dict("records"), res.to_records(), strict=True))
    json.dumps(res.to_dict(), allow_nan=False)


def test_groups_auto_resolves_to_the_seed_column():
    t = population(0)
    res = marker_analysis(t, "ood", markers=["planted"], n_permutations=100)
    assert res.groups == "seed" and res.settings["inference"] == "within_groups"
    assert res.settings["groups_source"] == "auto: the table's 'seed' column"
    assert "models permuted within seed strata" in res.sentence("planted")
    assert res.warnings[0].startswith("groups: seed (auto: the table's 'seed' column)")
    no_seed = {k: v for k, v in t.items() if k != "seed"}
    res = marker_analysis(no_seed, "ood", markers=["planted"], n_permutations=100)
    assert res.groups is None and res.settings["inference"] == "models"
    assert res.settings["groups_source"].startswith("auto: no seed-like column")
    assert res["planted"].flags[0].startswith("ungrouped(no groups")
    res = marker_analysis(t, "ood", markers=["planted"], groups=None, n_permutations=100)
    assert res.groups is None and res.settings["groups_source"].startswith("none (asked)")
    assert res["planted"].flags[0].startswith("ungrouped(no groups")
    res = marker_analysis(t, "ood", markers=["planted"], inference="cluster")
    assert "seed groups (cluster-robust" in res.sentence("planted")


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
        assert getattr(res["null_a"], key) == pytest.approx(getattr(ref["null_a"], key), abs=1e-9)


# ------------------------------------------------------------------ planted structure


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_planted_tracking_and_null_markers(seed):
    t = population(seed)
    res = marker_analysis(t, "ood", covariates=["noise"])
    assert res["planted"].verdict == "adds_beyond_covariates", res.sentence("planted")
    # within seeds the tracker's marginal effect is strong, its partial effect absent
    assert res["tracks_knob"].p_holm <= 0.05 and res["tracks_knob"].partial_p_holm > 0.05
    # showing it absent (CI inside the margin) takes more models: 40 seeds x 6 levels
    big = marker_analysis(population(seed, n_seeds=40), "ood", covariates=["noise"],
                          markers=["tracks_knob", "null_a", "planted"], equivalence_margin=0.3,
                          n_permutations=500)
    s = big["tracks_knob"]
    assert s.verdict == "explained_by_covariates", big.sentence("tracks_knob")
    assert s.partial_low > -0.3 and s.partial_high < 0.3
    text = big.sentence("tracks_knob")
    assert text.startswith("tracks_knob: Spearman -0.") and "given noise the partial r is" in text
    assert "explained by the covariates" in text
    assert big["null_a"].verdict == "no_association", big.sentence("null_a")
    assert big["planted"].verdict == "adds_beyond_covariates"


def test_null_markers_are_quiet():
    """Pure-noise markers in 20 populations: claims of an association at about the nominal rate.

    40 null markers, Holm over 2 per population at alpha 0.05: about 2 false partial rejections
    are expected (the audit's invalid test made 18-55%, i.e. 7-22 of 40); "explained" needs a
    marginal rejection too.
    """
    verdicts = []
    for seed in range(20):
        res = marker_analysis(population(100 + seed), "ood", covariates=["noise"],
                              markers=["null_a", "null_b"], n_permutations=400)
        verdicts += [res[m].verdict for m in ("null_a", "null_b")]
    claims = [v for v in verdicts if v in ("adds_beyond_covariates", "partial_association")]
    assert len(claims) <= 4, verdicts  # P(Binomial(40, 0.05) >= 5) = 0.05
    assert verdicts.count("explained_by_covariates") <= 2, verdicts
    assert set(verdicts) <= {"no_association", "inconclusive", *claims}, verdicts


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
                              covariates=["noise"], groups="seed", n_permutations=200, seed=r)
        marg += any(s.p_holm <= 0.05 for s in res.markers)
        part += any(s.partial_p_holm <= 0.05 for s in res.markers)
        verdict += any(s.verdict in ("adds_beyond_covariates", "partial_association",
                                     "explained_by_covariates") for s in res.markers)
    return marg / reps, part / reps, verdict / reps


def test_shuffled_outcome_rarely_significant_fast():
    marg, part, verdict = _null_rates(30)
    assert marg <= 0.12 and part <= 0.12 and verdict <= 0.12, (marg, part, verdict)


@pytest.mark.slow
def test_shuffled_outcome_calibrated():
    """Family-wise error of each Holm family at 5% +- 2% over 1000 shuffled populations."""
    marg, part, verdict = _null_rates(1000)
    assert 0.03 <= marg <= 0.07, marg
    assert 0.03 <= part <= 0.07, part
    assert verdict <= 0.07, verdict


# ------------------------------------------------------------------ flags


def test_flags_near_identical_few_groups_and_runner_flags():
    t = population(0)
    t["copy_of_y"] = (np.asarray(t["ood"]) + 1e-4 * np.arange(30)).tolist()
    res = marker_analysis(t, "ood", markers=["copy_of_y", "planted"], covariates=["noise"],
                          n_permutations=200, coverage_note="measured coverage 0.91",
                          marker_flags={"planted": ["runner_said_so"]})
    s = res["copy_of_y"]
    assert s.partial_p_holm <= 0.05 and s.verdict == "inconclusive"
    assert any(f.startswith("near_identical(|Spearman| 1.000 >= 0.98") for f in s.flags)
    assert "few_groups(G=5; measured coverage 0.91)" in s.flags
    assert res["planted"].flags == ("few_groups(G=5; measured coverage 0.91)", "runner_said_so")
    assert "[flags: few_groups" in res.sentence("planted")


@pytest.mark.parametrize("kind", ["constant", "tied"])
def test_degenerate_outcome_makes_every_marker_inconclusive(kind):
    t = population(0)
    t["ood"] = [0.5] * 30 if kind == "constant" else [0.5] * 25 + [0.1, 0.2, 0.3, 0.4, 0.6]
    res = marker_analysis(t, "ood", covariates=["noise"], n_permutations=100)
    for s in res.markers:
        assert s.verdict == "inconclusive", s
        assert any(f.startswith("degenerate_outcome") for f in s.flags)
    assert res.sentence("planted").startswith("planted: inconclusive (degenerate outcome")


def test_few_outcome_examples_flag():
    t = population(0)
    y = 0.6 + 0.02 * np.random.default_rng(0).normal(size=30)
    t["ood"] = y.tolist()
    res = marker_analysis(t, "ood", markers=["planted"], n_permutations=100, outcome_examples=50)
    se = np.sqrt(y.mean() * (1 - y.mean()) / 50)
    flag = next(f for f in res["planted"].flags if f.startswith("few_outcome_examples"))
    assert f"binomial SE {se:.3g} at 50 examples > half the outcome SD {y.std(ddof=1):.3g}" in flag
    res = marker_analysis(t, "ood", markers=["planted"], n_permutations=100,
                          outcome_examples=100_000)
    assert not any(f.startswith("few_outcome_examples") for f in res["planted"].flags)


def test_exclude_rows_flag_and_equality_with_missing_cells():
    t = population(1)
    res = marker_analysis(t, "ood", markers=["null_a", "planted"], covariates=["noise"],
                          exclude_rows={"null_a": [0, 7, 7]}, n_permutations=100)
    assert "self_reference_excluded(2 rows)" in res["null_a"].flags
    assert res["null_a"].n == 28 and res["null_a"].n_missing == 2
    holes = dict(t, null_a=[None if i in (0, 7) else v for i, v in enumerate(t["null_a"])])
    ref = marker_analysis(holes, "ood", markers=["null_a", "planted"], covariates=["noise"],
                          n_permutations=100)
    assert res["null_a"].partial_r == ref["null_a"].partial_r
    assert res["null_a"].partial_p == ref["null_a"].partial_p
    with pytest.raises(ConfigError, match="exclude_rows names 'nope'"):
        marker_analysis(t, "ood", markers=["null_a"], exclude_rows={"nope": [1]})
    with pytest.raises(ConfigError, match=r"exclude_rows\['null_a'\] holds row 30"):
        marker_analysis(t, "ood", markers=["null_a"], exclude_rows={"null_a": [30]})


def test_adaptive_permutations_near_a_holm_threshold():
    """A p within 3 MC SE of its Holm threshold draws more permutations (fresh streams)."""
    t = population(0)
    noise = np.random.default_rng(12345).normal(size=30)
    found = None
    for c in np.linspace(0.6, 2.6, 41):  # find a marker whose 200-permutation p is borderline
        t["weak"] = (c * np.asarray(t["planted"]) + noise).tolist()
        s = marker_analysis(t, "ood", markers=["weak"], covariates=["noise"],
                            n_permutations=200, max_permutations=200)["weak"]
        assert s.partial_p_mcse == pytest.approx(np.sqrt(s.partial_p * (1 - s.partial_p) / 200),
                                                 abs=1e-15)
        if abs(s.partial_p - 0.05) <= 3 * s.partial_p_mcse:
            found = c
            break
    assert found is not None
    s = marker_analysis(t, "ood", markers=["weak"], covariates=["noise"], n_permutations=200,
                        max_permutations=1600)["weak"]
    assert s.n_permutations_used in (400, 800, 1600)
    assert s.partial_p_mcse == pytest.approx(
        np.sqrt(s.partial_p * (1 - s.partial_p) / s.n_permutations_used), abs=1e-15)
    # it stopped because the p left the band, or at the cap
    assert abs(s.partial_p - 0.05) > 3 * s.partial_p_mcse or s.n_permutations_used == 1600


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
    with pytest.raises(ConfigError, match="equivalence_margin must be in"):
        marker_analysis(t, "ood", equivalence_margin=0.0)
    with pytest.raises(ConfigError, match="inference must be 'within_groups' or 'cluster'"):
        marker_analysis(t, "ood", inference="wild")
    with pytest.raises(ConfigError, match="groups column 'seed' is also a covariate"):
        marker_analysis(t, "ood", covariates=["seed"], groups="seed")
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
    plain = marker_analysis(t, "ood", markers=["tracks_knob", "planted"], groups=None,
                            n_permutations=400)
    within = marker_analysis(t, "ood", markers=["tracks_knob", "planted"], groups=None,
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
    np.testing.assert_allclose(logo_predictions(y, X, g), ref, atol=1e-9)


def test_sentences_per_verdict():
    import dataclasses

    res = marker_analysis(population(0), "ood", markers=["planted"], covariates=["noise"],
                          n_permutations=200)
    s = res["planted"]
    text = res.sentence("planted")
    assert "within seed the marginal r is" in text and "(p 0.001, Holm p 0.001" not in text
    assert text.endswith("adds beyond the covariates (significant partial effect and "
                         "out-of-sample gain) [flags: few_groups(G=5)].")

    def say(**kw):
        odd = dataclasses.replace(s, **kw)
        return dataclasses.replace(res, markers=(odd,)).sentence("planted")

    assert "partial association (significant partial effect, no out-of-sample gain shown)" in \
        say(verdict="partial_association")
    assert "explained by the covariates (marginal effect significant, partial effect shown to " \
        "lie within +-0.2)" in say(verdict="explained_by_covariates")
    assert "no association (marginal and partial effects both shown to lie within +-0.2)" in \
        say(verdict="no_association")
    assert f"this design detects |partial r| >= {s.mde_partial_r:.2f} with 80% power" in \
        say(verdict="inconclusive")
