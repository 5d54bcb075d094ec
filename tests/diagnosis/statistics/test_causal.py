"""diagnosis.statistics.causal: 2SLS = linearmodels, mediation = statsmodels, group bootstrap = brute force,
and a planted causal chain recovered by the IV estimate (a confounded marker's effect covers 0)."""

import math

import numpy as np
import pandas as pd
import pytest
from linearmodels.iv import IV2SLS
from statsmodels.regression.linear_model import OLS
from statsmodels.stats.mediation import Mediation as SmMediation

from probekit.diagnosis.statistics.causal import (
    build_design,
    causal_evidence,
    coefficient_test,
    group_bootstrap_counts,
    iv_estimate,
    mediation,
    stratified_bootstrap_counts,
)
from probekit.diagnosis.statistics.causal.iv import weak_critical_f
from probekit.diagnosis.statistics.causal.simulate import simulate_instrument, simulate_mediation
from probekit.errors import ConfigError, DataError

BETA = 0.5  # planted effect of the marker m on the outcome


def _population(seed: int, n_seeds: int = 5, beta: float = BETA) -> dict[str, list]:
    """Two knobs x seeds: z1 -> m -> y (effect ``beta``), z2 -> q (q has no effect on y); an
    unobserved per-model confounder u and a seed effect drive m, q and y (OLS is biased)."""
    rng = np.random.default_rng(seed)
    cols: dict[str, list] = {k: [] for k in ("seed", "z1", "z2", "y", "m", "q")}
    for s in range(n_seeds):
        sg = rng.normal()
        for z1 in (0.0, 1.0, 2.0):
            for z2 in (0.0, 1.0, 2.0):
                u = rng.normal()
                m = 0.8 * z1 + 0.5 * sg + u + 0.5 * rng.normal()
                q = 0.8 * z2 + 0.5 * sg + u + 0.5 * rng.normal()
                y = beta * m + 0.5 * sg + u + 0.5 * rng.normal()
                for k, v in zip(cols, (s, z1, z2, y, m, q), strict=True):
                    cols[k].append(v)
    return cols


# ------------------------------------------------------------------ 2SLS vs linearmodels

@pytest.mark.parametrize("inference,groups", [("within_groups", "seed"), ("cluster", "seed"),
                                              ("within_groups", None)])
def test_iv_equals_linearmodels_iv2sls_clustered(inference, groups):
    t = _population(3)
    d = build_design(t, "y", "z1", "m", covariates=("z2",), groups=groups, inference=inference,
                     n_permutations=99, n_bootstrap=1000)
    iv = iv_estimate(d)
    X = pd.DataFrame(d.X, columns=list(d.terms))
    ref = IV2SLS(pd.Series(d.y, name="y"), X, pd.Series(d.m, name="m"),
                 pd.Series(d.z, name="z1")).fit(cov_type="clustered", clusters=pd.Series(d.g),
                                                debiased=True)
    assert iv.beta == pytest.approx(ref.params["m"], rel=1e-8, abs=1e-12)
    assert iv.se == pytest.approx(ref.std_errors["m"], rel=1e-8)
    # the first-stage F is linearmodels' cluster-robust first-stage F
    assert iv.first_stage_f == pytest.approx(ref.first_stage.diagnostics["f.stat"]["m"], rel=1e-8)
    # the Wald CI uses t with G - 1 df
    G = int(np.unique(d.g).size)
    from scipy import stats as sps

    crit = sps.t.ppf(0.975, G - 1)
    assert iv.wald_high - iv.beta == pytest.approx(crit * iv.se, rel=1e-9)


def test_iv_anderson_rubin_inverts_the_reduced_form_test():
    t = _population(4)
    d = build_design(t, "y", "z1", "m", covariates=("z2",), groups="seed", n_permutations=199)
    iv = iv_estimate(d)
    # AR at b0 = 0 is the reduced form's test of the knob on y, with the same permutations
    assert iv.ar_p == pytest.approx(iv.reduced_form.p, abs=1e-9)
    # just identified: beta_hat sets the AR statistic to 0, so it is inside its own CI
    assert iv.ar_low < iv.beta < iv.ar_high
    # the first stage and the reduced form are coefficient tests on the same design
    ref = coefficient_test(d.z, d.m, d.X, d)
    assert iv.first_stage.beta == pytest.approx(ref.beta, abs=1e-9)
    # 2SLS is the ratio of reduced form to first stage (one instrument)
    assert iv.beta == pytest.approx(iv.reduced_form.beta / iv.first_stage.beta, rel=1e-9)


def test_iv_weak_instrument_warns_and_its_ar_set_is_unbounded():
    t = _population(5)
    # a knob that moves nothing (permuted: its CR1 F over 5 seeds is 0.006 here)
    t["noise_knob"] = list(np.random.default_rng(1).permutation(t["z2"]))
    d = build_design(t, "y", "noise_knob", "q", covariates=("z1",), groups="seed",
                     n_permutations=199)
    iv = iv_estimate(d)
    assert iv.weak and iv.first_stage_f < 10
    assert iv.ar_unbounded and iv.covers(0.0) and iv.covers(1e9)
    ev = causal_evidence(t, "y", interventions=[("noise_knob", "q")], covariates=("z1",),
                         groups="seed", n_permutations=99, n_bootstrap=200)
    texts = [b.text for b in ev._blocks() if hasattr(b, "text")]
    assert any("weak instrument" in x for x in texts)


def test_weak_instrument_critical_value_allows_for_few_clusters():
    """Montiel Olea & Pflueger's 95% critical value (tau = 10%): 23.1 with many clusters, the
    noncentral F(1, G - 1, 10) quantile with G clusters."""
    from scipy import stats as sps

    assert weak_critical_f(100_000) == pytest.approx(sps.ncx2.ppf(0.95, 1, 10.0), rel=1e-3)
    assert sps.ncx2.ppf(0.95, 1, 10.0) == pytest.approx(23.1085, abs=1e-3)
    assert weak_critical_f(5) == pytest.approx(68.25, abs=0.01)
    assert weak_critical_f(10) == pytest.approx(37.42, abs=0.01)


def test_an_f_above_10_from_5_seeds_is_still_weak():
    """A simulated weak-ish instrument (concentration 20, 5 seeds): CR1 F 28.5 passes the old
    F > 10 rule, but not the few-cluster test (critical value 68.25): flagged, and said why."""
    t = simulate_instrument(concentration=20.0, seed=0)
    d = build_design(t, "y", "z", "m", groups="seed", n_permutations=199)
    iv = iv_estimate(d)
    assert iv.first_stage_f == pytest.approx(28.5, abs=0.05) and not iv.ar_unbounded
    assert iv.weak and iv.first_stage_f_critical == pytest.approx(68.25, abs=0.01)
    assert iv.to_record()["first_stage_f_critical"] == iv.first_stage_f_critical
    ev = causal_evidence(t, "y", interventions=[("z", "m")], groups="seed", n_permutations=99,
                         n_bootstrap=200)
    texts = [b.text for b in ev._blocks() if hasattr(b, "text")]
    assert any("weak instrument: z on m: effective first-stage F 28.5 <= 68.3" in x
               for x in texts), texts
    strong = iv_estimate(build_design(simulate_instrument(concentration=20.0, seed=5), "y", "z",
                                      "m", groups="seed", n_permutations=199))
    assert strong.first_stage_f > strong.first_stage_f_critical and not strong.weak


# ------------------------------------------------------------------ mediation vs statsmodels

class _Mean:
    def __init__(self, mu):
        self.mu = mu

    def rvs(self, n, rng=None, random_state=None):
        return self.mu


class _PointMediation(SmMediation):
    """statsmodels' Mediation with its simulation noise removed: the parameters at their
    estimates and the mediator at its predicted mean, so one replication is its point estimate."""

    def _simulate_params(self, result, rng):
        return result.params


@pytest.mark.parametrize("inference", ["within_groups", "cluster"])
def test_mediation_points_equal_statsmodels(inference):
    t = _population(6)
    d = build_design(t, "y", "z1", "m", covariates=("z2",), groups="seed", inference=inference,
                     n_permutations=99)
    med = mediation(d, n_bootstrap=200)
    exog = pd.DataFrame(d.X, columns=list(d.terms))
    exog["T"] = (d.z - med.t0) / (med.t1 - med.t0)
    out_exog = exog.copy()
    out_exog["M"] = d.m
    outcome_model = OLS(d.y, out_exog)
    mediator_model = OLS(d.m, exog)
    mediator_model.get_distribution = lambda params, scale=None, exog=None, **kw: _Mean(
        exog @ params)
    ref = _PointMediation(outcome_model, mediator_model, "T", mediator="M").fit(n_rep=1, rng=0)
    assert med.indirect == pytest.approx(float(np.mean(ref.ACME_avg)), rel=1e-8)
    assert med.direct == pytest.approx(float(np.mean(ref.ADE_avg)), rel=1e-8)
    assert med.total == pytest.approx(float(np.mean(ref.total_effect)), rel=1e-8)
    assert med.proportion == pytest.approx(float(np.mean(ref.prop_med_avg)), rel=1e-8)
    # and with statsmodels' own simulation, its estimate lies near ours (MC + parameter noise)
    sim = SmMediation(OLS(d.y, out_exog), OLS(d.m, exog), "T", mediator="M").fit(
        n_rep=400, rng=1)
    assert float(np.mean(sim.ACME_avg)) == pytest.approx(med.indirect, abs=0.35 * abs(med.indirect))


def test_mediation_group_bootstrap_equals_brute_force():
    """inference="cluster": seeds drawn with replacement (a seed drawn twice: two fixed effects)."""
    t = _population(7)
    d = build_design(t, "y", "z1", "m", covariates=("z2",), groups="seed", n_permutations=99,
                     inference="cluster")
    B = 60
    med = mediation(d, n_bootstrap=B, seed=11)
    W = group_bootstrap_counts(d.g, B, np.random.default_rng([11, 0xB007]))
    G = int(d.g.max()) + 1
    base = d.X[:, :d.X.shape[1] - d.n_fixed_effects]  # intercept + covariates
    brute = []
    for w in W:
        counts = [int(w[d.g == k][0]) for k in range(G)]
        rows, fe = [], []
        for k in range(G):
            for copy in range(counts[k]):
                idx = np.flatnonzero(d.g == k)
                rows += idx.tolist()
                fe += [f"{k}-{copy}"] * idx.size
        rows = np.array(rows)
        labels = pd.factorize(np.array(fe))[0]
        D = (labels[:, None] == np.arange(1, labels.max() + 1)).astype(float)
        Xb = np.column_stack([base[rows], D])
        a = np.linalg.lstsq(np.column_stack([Xb, d.z[rows]]), d.m[rows], rcond=None)[0][-1]
        coef = np.linalg.lstsq(np.column_stack([Xb, d.z[rows], d.m[rows]]), d.y[rows],
                               rcond=None)[0]
        b, c = coef[-1], coef[-2]
        dz = med.t1 - med.t0
        brute.append([a * b * dz, c * dz, (a * b + c) * dz, a * b / (a * b + c)])
    brute = np.array(brute)
    assert med.n_dropped == 0
    np.testing.assert_allclose(med.draws, brute, rtol=1e-8, atol=1e-10)
    lo, hi = np.quantile(brute[:, 0], [0.025, 0.975])
    # the percentile ends, rescaled about the estimate by sqrt(G / (G - 1)) t_{G-1} / z
    from scipy import stats as sps

    s = math.sqrt(G / (G - 1)) * sps.t.ppf(0.975, G - 1) / sps.norm.ppf(0.975)
    want = (med.indirect + s * (lo - med.indirect), med.indirect + s * (hi - med.indirect))
    assert (med.indirect_low, med.indirect_high) == pytest.approx(want, rel=1e-8)


def test_mediation_within_seed_bootstrap_equals_brute_force():
    """within_groups: each seed's models drawn from that seed, the fixed effects refitted."""
    t = _population(7)
    d = build_design(t, "y", "z1", "m", covariates=("z2",), groups="seed", n_permutations=99)
    B = 40
    med = mediation(d, n_bootstrap=B, seed=11)
    W = stratified_bootstrap_counts(d.g, B, np.random.default_rng([11, 0xB007]))
    assert np.all(np.stack([W[:, d.g == k].sum(1) for k in range(5)], 1) == 9)  # n_g kept
    brute = []
    for w in W:
        rows = np.repeat(np.arange(d.n), w.astype(int))
        a = np.linalg.lstsq(np.column_stack([d.X[rows], d.z[rows]]), d.m[rows], rcond=None)[0][-1]
        coef = np.linalg.lstsq(np.column_stack([d.X[rows], d.z[rows], d.m[rows]]), d.y[rows],
                               rcond=None)[0]
        b, c = coef[-1], coef[-2]
        dz = med.t1 - med.t0
        brute.append([a * b * dz, c * dz, (a * b + c) * dz, a * b / (a * b + c)])
    brute = np.array(brute)
    np.testing.assert_allclose(med.draws, brute, rtol=1e-7, atol=1e-9)
    lo, hi = np.quantile(brute[:, 1], [0.025, 0.975])
    s = math.sqrt(d.n / (d.n - (d.X.shape[1] + 2)))  # the HC1-like residual df factor
    want = (med.direct + s * (lo - med.direct), med.direct + s * (hi - med.direct))
    assert (med.direct_low, med.direct_high) == pytest.approx(want, rel=1e-7)


def test_mediation_recovers_a_planted_unconfounded_chain():
    """No confounder: a b is the planted indirect effect, c' the planted direct effect."""
    rng = np.random.default_rng(8)
    cols: dict[str, list] = {k: [] for k in ("seed", "z", "m", "y")}
    for s in range(8):
        sg = rng.normal()
        for z in (0.0, 1.0, 2.0, 3.0):
            for _ in range(3):
                m = 1.0 * z + sg + 0.3 * rng.normal()
                y = 0.5 * m + 0.25 * z + sg + 0.3 * rng.normal()
                for k, v in zip(cols, (s, z, m, y), strict=True):
                    cols[k].append(v)
    d = build_design(cols, "y", "z", "m", groups="seed", n_permutations=199)
    med = mediation(d, n_bootstrap=500)
    assert med.indirect_low <= 0.5 * 3 <= med.indirect_high
    assert med.direct_low <= 0.25 * 3 <= med.direct_high
    assert med.proportion == pytest.approx(0.5 / 0.75, abs=0.1)
    assert med.p_indirect == max(med.path_a.p, med.path_b.p) <= 0.01


# ------------------------------------------------------------------ planted chain, replicated

def _coverage(n_replicates: int, n_permutations: int) -> tuple[float, float]:
    hit_m = hit_q = 0
    for r in range(n_replicates):
        t = _population(1000 + r)
        d_m = build_design(t, "y", "z1", "m", covariates=("z2",), groups="seed",
                           n_permutations=n_permutations, seed=r)
        d_q = build_design(t, "y", "z2", "q", covariates=("z1",), groups="seed",
                           n_permutations=n_permutations, seed=r)
        hit_m += iv_estimate(d_m).covers(BETA)
        hit_q += iv_estimate(d_q).covers(0.0)
    return hit_m / n_replicates, hit_q / n_replicates


def test_iv_recovers_planted_chain_and_not_the_confounded_marker():
    # OLS is confounded (u drives m, q and y): it misses both
    t = _population(999)
    d_q = build_design(t, "y", "z2", "q", covariates=("z1",), groups="seed", n_permutations=99)
    assert iv_estimate(d_q).ols_beta > 0.4
    cover_m, cover_q = _coverage(20, 99)
    assert cover_m >= 0.9
    assert cover_q >= 0.9


@pytest.mark.slow
def test_iv_recovers_planted_chain_200_replicates():
    cover_m, cover_q = _coverage(200, 199)
    assert cover_m >= 0.9
    assert cover_q >= 0.9


# ------------------------------------------------------------------ the evidence and its errors

def test_causal_evidence_records_and_sentences():
    t = _population(9)
    ev = causal_evidence(t, "y", interventions=[("z1", "m"), ("z2", "q")],
                         mediations=[("z1", "m")], covariates=("z1", "z2"), groups="seed",
                         n_permutations=99, n_bootstrap=200)
    recs = ev.to_records()
    assert [r["kind"] for r in recs] == ["arm", "arm", "mediation"]
    d = build_design(t, "y", "z1", "m", covariates=("z2",), groups="seed", n_permutations=99,
                     n_bootstrap=200)
    assert recs[0]["iv_beta"] == pytest.approx(iv_estimate(d).beta, abs=1e-9)
    assert recs[0]["mediation_indirect"] == pytest.approx(recs[2]["mediation_indirect"])
    s = ev.sentences()
    assert s[0].startswith("arm z1 -> m -> y: the knob moves m by")
    assert "sequential ignorability" in s[2]
    js = ev.to_dict()
    assert "sequential ignorability" in js["assumptions"]["mediation"]
    titles = [getattr(b, "title", "") for b in ev._blocks()]
    assert "Intervention arms: first stage and reduced form" in titles
    assert any(x.startswith("Mediation") for x in titles)


def test_design_errors():
    t = _population(10)
    with pytest.raises(ConfigError, match="'nope'"):
        build_design(t, "y", "nope", "m", groups="seed")
    with pytest.raises(ConfigError, match="three different columns"):
        build_design(t, "y", "m", "m", groups="seed")
    const = dict(t, k=[1.0] * len(t["y"]))
    with pytest.raises(DataError, match="constant"):
        build_design(const, "y", "k", "m", groups="seed")
    ev = causal_evidence(const, "y", interventions=[("k", "m")], groups="seed",
                         n_permutations=99, n_bootstrap=200)
    assert ev.to_records()[0]["reason"].startswith("knob 'k' is constant")
    assert math.isnan(ev.to_records()[0].get("iv_beta", math.nan))


# ------------------------------------------------------------------ the shipped arm (HE regulariser)

def test_he_regulariser_arm_from_its_table(tmp_path):
    """probes/diagnose_he_regulariser.toml: he_lambda (0 / 0.2) intervenes on the modifier HE."""
    import json
    from pathlib import Path

    from probekit.diagnosis import diagnose_table

    root = Path(__file__).resolve().parents[3]
    result = diagnose_table(root / "probes" / "diagnose_he_regulariser.toml", out=tmp_path)
    causal = json.loads((tmp_path / "report.json").read_text())["diagnosis"]["causal"]
    assert causal == result.extras["causal"]
    arm, med = causal["records"]
    assert (arm["knob"], arm["marker"], med["knob"], med["marker"]) == (
        "he_lambda", "modifier_he", "noise", "modifier_he")
    # the regulariser moves HE strongly (F 386) ...
    assert arm["first_beta"] == pytest.approx(-0.58697, abs=1e-5)
    assert arm["first_stage_f"] == pytest.approx(386.26, abs=0.01)
    assert not arm["weak_instrument"]
    # ... and OOD accuracy not at all: HE's IV effect on OOD is 0.001 [-0.042, 0.042] per unit
    assert arm["reduced_p"] == arm["iv_ar_p"] == pytest.approx(0.951, abs=1e-3)
    assert arm["iv_beta"] == pytest.approx(0.0010469, abs=1e-6)
    assert (arm["iv_ar_low"], arm["iv_ar_high"]) == pytest.approx((-0.0417, 0.0421), abs=1e-4)
    # noise's effect on OOD (-0.062 from noise 0 to 15) does not go through HE
    assert med["mediation_total"] == pytest.approx(-0.06151, abs=1e-5)
    assert med["mediation_proportion"] == pytest.approx(-0.0095, abs=1e-4)
    assert med["mediation_proportion_low"] < 0 < med["mediation_proportion_high"] < 0.15
    html = (tmp_path / "report.html").read_text()
    assert "Intervention arms: first stage and reduced form" in html
    assert "sequential ignorability" in html


def test_no_causal_section_without_interventions():
    from probekit.diagnosis.statistics.causal.arms import causal_section

    assert causal_section({}, "y", interventions=(), mediations=(), covariates=(), knobs=(),
                          groups=None, settings=None, extras={}) == ()


def test_causal_evidence_displays_itself():
    from tests.report.notebook_checks import check_display

    ev = causal_evidence(_population(12), "y", interventions=[("z1", "m")],
                         mediations=[("z2", "q")], covariates=("z1", "z2"), groups="seed",
                         n_permutations=99, n_bootstrap=200)
    check_display(ev, headers=["knob -> target", "first-stage F", "Anderson-Rubin CI",
                               "indirect [CI]", "proportion mediated [CI]"],
                  numbers={"first_stage_f": ".3g", "first_p": ".2g", "iv_ar_p": ".2g",
                           "mediation_p_indirect": ".2g"}, plot=False)


def test_check_names_the_arms_and_a_bad_knob(tmp_path, monkeypatch):
    from probekit.diagnosis import check_diagnosis, load_diagnosis

    from ..population_helpers import WEIGHT_NORM, write_checkpoint, write_file

    monkeypatch.setenv("PROBEKIT_CACHE", str(tmp_path / "cache"))
    for f in (0.4, 0.6):
        for seed in range(3):
            write_checkpoint(tmp_path / "runs" / f"f{f}-s{seed}", seed=seed, train_fraction=f)
    good = write_file(tmp_path, 'checkpoints = "runs/*"\ninterventions = [{ knob = '
                      '"task.train_fraction", target = "wn" }]', WEIGHT_NORM,
                      'outcome = "id_accuracy"\nmediation = [{ knob = "task.train_fraction", '
                      'marker = "wn" }]')
    lines = check_diagnosis(load_diagnosis(good))
    assert "  intervention arms: task.train_fraction -> wn" in lines
    assert "  mediations: task.train_fraction -> wn" in lines
    bad = write_file(tmp_path, 'checkpoints = "runs/*"\ninterventions = [{ knob = '
                     '"task.noise", target = "wn" }]', WEIGHT_NORM, 'outcome = "id_accuracy"')
    with pytest.raises(ConfigError, match=r"diag.toml:\d+: \[population\] interventions: knob "
                                          r"'task.noise' is not a design knob.*'seed'"):
        check_diagnosis(load_diagnosis(bad))


# ------------------------------------------------------------------ calibrated on simulated populations


def _weak_flag_rate(concentration: float, reps: int) -> float:
    flagged = 0
    for r in range(reps):
        t = simulate_instrument(concentration=concentration, seed=60_000 + r)
        d = build_design(t, "y", "z", "m", groups="seed", n_permutations=199, seed=r)
        flagged += iv_estimate(d).weak
    return flagged / reps


@pytest.mark.slow
def test_weak_instruments_are_flagged_slow():
    """400 weak-instrument populations (first-stage concentration 3: median CR1 F 2.8; 5 seeds x
    3 levels x 2): the flag fires in >= 95% (measured 98.5%; its Monte-Carlo SE there is 0.6
    points, so a true rate of 95% would fail this about half the time). The old F < 10 rule
    flagged 85.5% of 200 such populations."""
    rate = _weak_flag_rate(3.0, 400)
    print(f"WEAK mu2=3 G=5: flagged {rate:.3f}")  # noqa: T201
    assert rate >= 0.95


def _mediation_coverage(inference: str, reps: int) -> np.ndarray:
    a, b, c, d = 1.0, 0.5, 0.25, 2.0
    truth = (a * b * d, c * d, (a * b + c) * d)
    hits = np.zeros(3)
    for r in range(reps):
        t = simulate_mediation(a=a, b=b, c=c, n_seeds=5, seed=70_000 + r)
        design = build_design(t, "y", "z", "m", groups="seed", inference=inference,
                              n_permutations=99, n_bootstrap=999, seed=r)
        med = mediation(design, n_bootstrap=1000, seed=r)
        for j, key in enumerate(("indirect", "direct", "total")):
            hits[j] += getattr(med, f"{key}_low") <= truth[j] <= getattr(med, f"{key}_high")
    return hits / reps


@pytest.mark.slow
@pytest.mark.parametrize("inference", ["within_groups", "cluster"])
def test_mediation_ci_coverage_with_5_seeds_slow(inference):
    """200 populations where every mediation assumption holds (5 seeds x 3 knob levels x 2):
    the 95% CIs of the indirect, direct and total effects cover the truth in >= 90% (measured
    96-97% within seeds, 94.5-95.5% with the rescaled seed bootstrap; Monte-Carlo SE 1.5
    points, so 90% is over 3 SE below). The unrescaled seed bootstrap covered 82-86%."""
    cover = _mediation_coverage(inference, 200)
    print(f"MEDIATION {inference} G=5 coverage indirect/direct/total: {cover}")  # noqa: T201
    assert np.all(cover >= 0.90), cover
