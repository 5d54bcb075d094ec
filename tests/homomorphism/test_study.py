import json

import numpy as np
import pytest
from scipy import stats

from probekit.executor import InProcessExecutor
from scripts import he_study
from scripts import he_study_analysis as A


def test_poly_r2_exact_and_against_numpy():
    x = np.linspace(0, 1, 8)
    assert A.poly_r2(x, 2 * x**2 - x + 1, 2) == pytest.approx(1.0)
    y = np.sin(5 * x)
    resid = y - np.polyval(np.polyfit(x, y, 1), x)
    ref = 1 - (resid**2).sum() / ((y - y.mean()) ** 2).sum()
    assert A.poly_r2(x, y, 1) == pytest.approx(ref)


def test_population_specs_expand_sweeps_seed_major_without_duplicates():
    specs = he_study.population_specs(
        out_root="/r", seeds=[0, 1], noise=[0, 6], he_lambda=[0.0, 0.2], reg_noise=[6],
        coverage=[1, 3], depth=[2, 4], epochs=15,
    )
    # per seed: noise {0, 6} plain + noise 6 regularised + coverage {1, 3} + depth {2, 4},
    # where depth 4 (no noise, 2 clauses) is the noise-0 plain model already listed
    assert len(specs) == 2 * (2 + 1 + 2 + 1)
    assert [s.seed for s in specs] == [0] * 6 + [1] * 6
    first = specs[:6]
    assert [(s.noise, s.he_lambda) for s in first[:3]] == [(0, 0.0), (6, 0.0), (6, 0.2)]
    assert [s.train_clauses for s in first[3:5]] == [(1,), (1, 2, 3)]
    assert first[5].n_layers == 2 and first[5].noise == 0 and first[5].train_clauses == (2,)
    assert len({s.name for s in specs}) == len(specs)
    assert first[0].name == "n00_c2_L4_s0_lam0_ep15_d128"
    # the paper's population: 16 noise + 6 regularised + 4 coverage + 10 depth - 1 shared, x 5
    paper = he_study.population_specs(out_root="/r", epochs=15, **he_study.PAPER)
    assert len(paper) == 5 * (16 + 6 + 4 + 10 - 1) == 175
    with pytest.raises(he_study.ConfigError, match="coverage"):
        he_study.population_specs(out_root="/r", seeds=[0], coverage=[0])


def test_epoch_schedule_steps_and_names():
    by_steps = he_study.ModelSpec(out_root="/r", steps=450)
    by_epochs = he_study.ModelSpec(out_root="/r", epochs=15)
    assert by_steps.train_steps(109, 32) == 450
    assert by_epochs.train_steps(109, 32) == 15 * 4 and by_epochs.train_steps(10, 32) == 15
    assert by_steps.name.endswith("_st450_d128") and by_epochs.name.endswith("_ep15_d128")


def test_preset_names_sets_and_schedule_label():
    """A non-default preset gets its own model names and schedule label (never paired with
    the scan preset's models); the plain arm of a regularising preset sets he_lambda=0."""
    old = he_study.ModelSpec(out_root="/r", noise=3, epochs=50)
    assert old.name == "n03_c2_L4_s0_lam0_ep50_d128"  # names of the scan preset unchanged
    c_plain = he_study.ModelSpec(out_root="/r", noise=3, epochs=50, preset="scan_he_paper")
    c_reg = he_study.ModelSpec(out_root="/r", noise=3, epochs=50, preset="scan_he_paper",
                               he_lambda=0.2)
    assert c_plain.name == "n03_c2_L4_s0_lam0_ep50_d128_scan_he_paper"
    assert "train.he_lambda=0" in c_plain.sets() and "train.he_lambda=0.2" in c_reg.sets()
    assert not any(s.startswith("train.he_lambda") for s in old.sets())
    assert A.schedule_label({"epochs": 50, "steps": 450}) == "ep50"
    assert A.schedule_label({"epochs": 50, "preset": "scan_he_paper"}) == "ep50_scan_he_paper"


def test_resume_skips_finished_models(tmp_path, monkeypatch):
    spec = he_study.ModelSpec(out_root=str(tmp_path), noise=3, seed=1)
    done = {"name": spec.name, "marker": 7}
    (tmp_path / spec.name).mkdir()
    (tmp_path / spec.name / he_study.RESULT).write_text(json.dumps(done))

    def no_training(*a, **k):
        raise AssertionError("a finished model was retrained")

    import probekit.train

    monkeypatch.setattr(probekit.train, "train", no_training)
    assert he_study.run_model(spec) == done
    other = he_study.ModelSpec(out_root=str(tmp_path), noise=3, seed=2)
    assert he_study.load_result(other) is None
    # a result.json of another spec in this directory is not taken for this one
    (tmp_path / other.name).mkdir()
    (tmp_path / other.name / he_study.RESULT).write_text(json.dumps({"name": "else"}))
    assert he_study.load_result(other) is None


def _row(noise, seed, he, ood, *, clauses=(2,), layers=4, lam=0.0, seq=None, idacc=0.5):
    spec = dict(noise=noise, train_clauses=list(clauses), n_layers=layers, seed=seed,
                he_lambda=lam, steps=450, epochs=15)
    return {"spec": spec, "modifier_he": he, "sequence_he": seq if seq is not None else he / 2,
            "ood_token_acc": ood, "id_token_acc": idacc}


def test_sweep_membership():
    assert A.sweep_level(_row(6, 0, 1, 1)["spec"], "noise") == 6
    base = _row(0, 0, 1, 1)["spec"]  # no noise, 2 clauses, 4 layers: noise and depth sweeps
    assert [A.sweep_level(base, s) for s in A.SWEEPS] == [0, None, 4]
    assert [A.sweep_level(_row(0, 0, 1, 1, clauses=(1, 2, 3))["spec"], s)
            for s in A.SWEEPS] == [None, 3, None]
    assert [A.sweep_level(_row(0, 0, 1, 1, layers=7)["spec"], s)
            for s in A.SWEEPS] == [None, None, 7]
    assert A.sweep_level(_row(3, 0, 1, 1, clauses=(1, 2))["spec"], "coverage") is None
    assert A.schedule_label(base) == "ep15"


def test_analysis_on_a_constructed_population():
    # noise sweep: HE = 0.01 (1 + noise) + seed jitter, OOD = 0.6 - 2 HE exactly
    rows = []
    for noise in (0, 3, 6, 9):
        for seed in (0, 1, 2):
            he = 0.01 * (1 + noise) + 0.001 * seed
            rows.append(_row(noise, seed, he, 0.6 - 2 * he, idacc=0.9 - 0.01 * noise + 0.003 * seed))
    # coverage sweep: HE falls with k, OOD rises monotonically but not linearly
    for k in (1, 2, 3, 4):
        for seed in (0, 1):
            he = 1.0 / k**2 + 0.01 * seed
            rows.append(_row(0, seed, he, 0.3 + 0.1 * np.sqrt(k) + 0.1 * seed,
                             clauses=tuple(range(1, k + 1))))
    an = A.analyse(rows)
    noise = an["sweeps"]["noise/ep15"]
    assert noise["levels"] == [0, 3, 6, 9] and noise["n_models"] == 12
    assert noise["level_means"]["3"]["modifier_he"] == pytest.approx(0.041)
    assert noise["poly_r2_modifier_he_vs_ood"] == pytest.approx({"1": 1.0, "2": 1.0})
    sm = noise["single_models"]["modifier_he_vs_ood"]
    assert sm["pearson_r"] == pytest.approx(-1.0) and sm["spearman_rho"] == pytest.approx(-1.0)
    assert sm["spearman_ci"] == pytest.approx([-1.0, -1.0]) and sm["n"] == 12
    lv = noise["single_models"]["level_vs_modifier_he"]  # tied levels: below 1, as scipy
    assert lv["spearman_rho"] == pytest.approx(
        stats.spearmanr([r["spec"]["noise"] for r in rows[:12]],
                        [r["modifier_he"] for r in rows[:12]]).statistic)
    cov = an["sweeps"]["coverage/ep15"]
    assert cov["levels"] == [1, 2, 3, 4] and cov["seeds"] == [0, 1]
    he = [r["modifier_he"] for r in rows[12:]]
    ood = [r["ood_token_acc"] for r in rows[12:]]
    ref = stats.spearmanr(he, ood)
    c = cov["single_models"]["modifier_he_vs_ood"]
    assert c["spearman_rho"] == pytest.approx(ref.statistic)
    assert c["spearman_p"] == pytest.approx(ref.pvalue)
    assert c["spearman_ci"][0] < c["spearman_rho"] < c["spearman_ci"][1]
    # the no-noise 2-clause 4-layer model is one depth level only: no depth analysis
    assert "depth/ep15" not in an["sweeps"] and "regularisation" not in an


def test_regularisation_paired_tests_match_scipy():
    rows, plain_seed, reg_seed = [], {}, {}
    for seed, shift in ((0, 0.010), (1, 0.030), (2, 0.015)):
        for noise in (0, 6):
            p = _row(noise, seed, 0.1 + 0.01 * noise, 0.45 - 0.001 * noise + 0.001 * seed)
            r = _row(noise, seed, p["modifier_he"] - shift, p["ood_token_acc"] + shift / 3,
                     lam=0.2)
            rows += [p, r]
        plain_seed[seed] = np.mean([x["modifier_he"] for x in rows[-4::2]])
        reg_seed[seed] = np.mean([x["modifier_he"] for x in rows[-3::2]])
    # seed 3 has only its noise-0 pair: in the tests over models, not in the per-seed test
    extra = [_row(0, 3, 0.2, 0.4), _row(0, 3, 0.1, 0.41, lam=0.2)]
    full = A.analyse(rows + extra)["regularisation"]
    assert full["n_pairs"] == 7 and full["seeds_complete"] == [0, 1, 2]
    assert full["modifier_he"]["paired_t_over_seeds"]["n"] == 3
    reg = A.analyse(rows)["regularisation"]
    assert reg["n_pairs"] == 6 and reg["seeds"] == [0, 1, 2] and reg["noise"] == [0, 6]
    m = reg["modifier_he"]
    ref = stats.ttest_rel([reg_seed[s] for s in range(3)], [plain_seed[s] for s in range(3)])
    assert m["paired_t_over_seeds"]["t"] == pytest.approx(ref.statistic)
    assert m["paired_t_over_seeds"]["p"] == pytest.approx(ref.pvalue)
    assert m["paired_t_over_seeds"]["n"] == 3
    assert m["reg_mean"] - m["plain_mean"] == pytest.approx(-np.mean([0.010, 0.030, 0.015]))
    a = [r["ood_token_acc"] for r in rows[0::2]]
    b = [r["ood_token_acc"] for r in rows[1::2]]
    assert reg["ood_token_acc"]["paired_t_over_models"]["p"] == pytest.approx(
        stats.ttest_rel(b, a).pvalue)


def test_smoke_study_runs_resumes_and_reports(tmp_path):
    out = tmp_path / "study"
    res = he_study.main(
        ["--smoke", "--out", str(out)], executor=InProcessExecutor(check_picklable=True)
    )
    an = res["analysis"]
    assert an["n_models"] == 6 and an["n_trained_this_call"] == 6  # 3 noise x {plain, reg}
    noise = an["sweeps"]["noise/st20"]
    assert set(noise["poly_r2_modifier_he_vs_ood"]) == {"1"}  # 3 level means: degree 1 only
    assert 0.0 <= noise["poly_r2_modifier_he_vs_ood"]["1"] <= 1.0
    assert noise["single_models"]["modifier_he_vs_ood"]["n"] == 3
    reg = an["regularisation"]
    assert reg["n_pairs"] == 3 and {"modifier_he", "sequence_he", "ood_token_acc"} <= set(reg)
    assert an["plots"] == ["noise_st20.png", "regularisation.png"]
    assert (out / "noise_st20.png").stat().st_size > 1000
    saved = json.loads((out / "study.json").read_text())
    assert len(saved["models"]) == 6 and all(m["train_cpu_s"] > 0 for m in saved["models"])
    # each finished model's history has only the final evaluation (step-0 eval skipped)
    hist = json.loads(next((out / "models").glob("*/run/history.json")).read_text())
    assert [r["step"] for r in hist["records"]] == [20]
    # resumable: a finished model is not retrained (its result.json is reused)
    again = he_study.main(["--smoke", "--out", str(out)])
    assert again["analysis"]["n_trained_this_call"] == 0
    assert again["analysis"]["train_s_total"] == an["train_s_total"]
    listed = he_study.main(["--smoke", "--out", str(out), "--list"])
    assert len(listed["specs"]) == 6 and listed["todo"] == []
    paper = he_study.main(["--out", str(out), "--population", "paper", "--list"])
    assert len(paper["todo"]) == 175 and paper["todo"][0].epochs == 15
    everything = he_study.main(["--out", str(out), "--analyse-all"])["analysis"]
    assert everything["n_models"] == 6 and everything["n_trained_this_call"] == 0
    assert everything["regularisation"]["n_pairs"] == 3
