"""Power-first design (probekit.diagnosis.plan, ``probekit diagnose --plan``)."""

import json
import re
from pathlib import Path

import numpy as np
import pytest

from probekit.cli import main
from probekit.diagnosis import plan as plan_mod
from probekit.diagnosis.plan import (
    PlannedDesign,
    _status,
    design_from_spec,
    plan_power,
    training_cost,
)
from probekit.diagnosis.spec import load_diagnosis
from probekit.diagnosis.statistics.power import PowerCurve
from probekit.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "probes" / "diagnose_modadd_smoke.toml"


def _smoke_copy(tmp_path, extra_population=""):
    text = SMOKE.read_text().replace("[population]\n", f"[population]\n{extra_population}", 1)
    path = tmp_path / "plan.toml"
    path.write_text(text)
    return path


def test_grid_layout_is_the_cartesian_product_with_seeds_as_groups():
    from probekit import diagnosis

    assert diagnosis.plan_power is plan_power and diagnosis.PlannedDesign is PlannedDesign
    d = PlannedDesign.grid({"wd": [1.0, 2.0, 3.0], "tf": [0.5, 0.7]}, seeds=4,
                           covariates=("wd", "tf", "train_loss"), n_markers=7)
    assert d.n_models == 24 and d.n_groups == 4 and d.groups == "seed"
    assert d.columns["wd"][:8] == (1.0,) * 8 and d.columns["tf"][:8] == (0.5,) * 4 + (0.7,) * 4
    assert d.columns["seed"][:8] == (0, 1, 2, 3) * 2
    assert d.measured == ("train_loss",) and d.level == pytest.approx(0.05 / 7)
    assert d.layout() == "wd 3 x tf 2 x seed 4 = 24 models"
    C = d.covariate_matrix(np.random.default_rng(0))
    assert C.shape == (24, 2 + 1 + 4)  # wd, tf factors; train_loss a natural spline of 4 df
    assert d.with_seeds(10).n_models == 60 and d.with_seeds(10).n_groups == 10


def test_measured_covariate_is_correlated_with_the_knobs_as_documented():
    d = PlannedDesign.grid({"wd": [1, 2, 3], "tf": [1, 2, 3]}, seeds=200,
                           covariates=("wd", "tf", "loss"), n_markers=1)
    t = d.table(np.random.default_rng(0))
    X = np.column_stack([np.ones(d.n_models), t["wd"], t["tf"]])
    y = np.asarray(t["loss"])
    fit = X @ np.linalg.lstsq(X, y, rcond=None)[0]
    r2 = 1 - ((y - fit) ** 2).sum() / ((y - y.mean()) ** 2).sum()
    assert r2 == pytest.approx(plan_mod.MEASURED_R2, abs=0.05)


def test_design_from_a_file_is_the_grid_and_the_question(tmp_path):
    spec = load_diagnosis(_smoke_copy(tmp_path, "target_mde = 0.5\n"))
    d = design_from_spec(spec)
    assert d.n_models == 12 and d.groups == "seed" and d.n_markers == 4
    assert d.covariates == ("train.weight_decay", "task.train_fraction", "train_loss")
    assert d.measured == ("train_loss",)
    assert sorted(zip(d.columns["train.weight_decay"], d.columns["task.train_fraction"],
                      d.columns["seed"], strict=True)) == sorted(
        (w, f, s) for w in (0.1, 1.0) for f in (0.4, 0.7) for s in (0, 1, 2))
    assert spec.population.target_mde == 0.5


def test_target_mde_is_checked_and_leaves_the_population_key_alone(tmp_path):
    plain = load_diagnosis(_smoke_copy(tmp_path)).population_key()
    (tmp_path / "b").mkdir()
    assert load_diagnosis(_smoke_copy(tmp_path / "b", "target_mde = 0.3\n")).population_key() == plain
    (tmp_path / "c").mkdir()
    with pytest.raises(ConfigError, match=r"target_mde = 1.5: a partial correlation in \(0, 1\)"):
        load_diagnosis(_smoke_copy(tmp_path / "c", "target_mde = 1.5\n"))


def _curve(mde, se, effects=(0.0, 0.5), power=(0.05, 0.9)):
    return PowerCurve(effects=effects, power=power, power_se=(0.0, 0.0), mde=mde, mde_se=se,
                      classical_mde=mde, level=0.05, n_models=10, n_groups=5, df=5,
                      n_simulations=100, n_permutations=199, inference="within_groups")


def test_status_reaches_borderline_misses():
    assert _status(_curve(0.28, 0.01), None) == "no_target"
    assert _status(_curve(0.28, 0.01), 0.30) == "reaches"
    assert _status(_curve(0.31, 0.01), 0.30) == "borderline"  # within 2 MC SE
    assert _status(_curve(0.33, 0.01), 0.30) == "misses"
    assert _status(_curve(float("nan"), float("nan")), 0.30) == "misses"


def test_a_design_that_cannot_reach_its_target_is_refused_with_the_seeds_that_would():
    d = PlannedDesign.grid({"wd": [1, 2, 3], "tf": [1, 2, 3]}, seeds=3, n_markers=7)
    plan = plan_power(d, target_mde=0.6, n_simulations=100)
    assert plan.status == "misses" and plan.mde > 0.6
    g = int(re.search(r"add seeds: (\d+) seeds \((\d+) models\) reach 0\.\d\d$", plan.fix).group(1))
    assert g > 3
    assert plan.refusal() == (
        f"target_mde 0.6 is out of reach: the planned design (wd 3 x tf 3 x seed 3 = 27 models) "
        f"detects a partial r of {plan.mde:.3f} +- {plan.curve.mde_se:.3f} with 80% power; "
        f"{plan.fix}")
    # the seeds it names do reach the target (the search simulates its own answer)
    again = plan_power(d.with_seeds(g), target_mde=0.6, n_simulations=100, seed=5)
    assert again.mde <= 0.6 + 3 * again.curve.mde_se


def test_cost_arithmetic_recorded_and_timed(tmp_path, monkeypatch):
    from probekit.diagnosis.population import grid_runs
    from probekit.train.build import build_run
    from probekit.train.trainer import _run_meta

    spec = load_diagnosis(_smoke_copy(tmp_path))
    runs = grid_runs(spec)
    monkeypatch.setattr(plan_mod, "_timed_cost", lambda run, steps: (2.0, 0.1))
    timed = training_cost(spec, roots=[])
    assert timed.timed_cells == 4 and timed.recorded_cells == 0
    assert timed.total == pytest.approx(12 * (0.1 * 120 + 2.0))
    assert timed.per_model == pytest.approx(timed.total / 12)
    # an earlier run of the first cell: 6 s over 120 steps -> 0.05 s per step
    r = runs[0].run
    task, mcfg, tcfg = build_run(r.preset, steps=r.steps, seed=7, sets=list(r.sets))
    run_dir = tmp_path / "cache" / "pop" / "runs" / "run-x"
    run_dir.mkdir(parents=True)
    (run_dir / "run.json").write_text(json.dumps(_run_meta(task, mcfg, tcfg)))
    (run_dir / "history.json").write_text(json.dumps(
        {"records": [{"step": 0, "elapsed_s": 0.0}, {"step": 120, "elapsed_s": 6.0}]}))
    cost = training_cost(spec, roots=[tmp_path / "cache"])
    assert cost.recorded_cells == 4 and cost.timed_cells == 0  # 1 exact, 3 same task and model
    assert cost.total == pytest.approx(12 * 0.05 * 120)
    assert "1 of 4 grid cells from earlier runs with the same configuration" in cost.detail


def test_cli_plan_prints_the_curve_writes_json_and_exits_2_below_target(tmp_path, monkeypatch,
                                                                       capsys):
    monkeypatch.setattr(plan_mod, "_timed_cost", lambda run, steps: (1.0, 0.01))
    monkeypatch.setenv("PROBEKIT_CACHE", str(tmp_path / "cache"))
    path = _smoke_copy(tmp_path)
    code = main(["diagnose", str(path), "--plan", "--target-mde", "0.6", "--plan-simulations",
                 "100", "--out", str(tmp_path / "out")])
    out, err = capsys.readouterr()
    assert code == 2
    assert "80%-power partial r (MDE):" in out and "training cost: 12 models x" in out
    line, = err.strip().splitlines()
    assert re.search(r"target_mde 0\.6 is out of reach: the planned design \(train\.weight_decay 2 "
                     r"x task\.train_fraction 2 x seed 3 = 12 models\) detects a partial r of "
                     r".* with 80% power; add seeds: \d+ seeds \(\d+ models\) reach 0\.\d\d", line)
    saved = json.loads((tmp_path / "out" / "plan.json").read_text())
    assert saved["status"] == "misses" and saved["design"]["n_models"] == 12
    assert saved["power"]["n_simulations"] == 100 and saved["cost"]["total"] == pytest.approx(
        12 * (0.01 * 120 + 1.0))


def test_a_run_with_an_unreachable_target_is_refused_before_training(tmp_path, monkeypatch,
                                                                    capsys):
    monkeypatch.setenv("PROBEKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(plan_mod, "CHECK_SIMULATIONS", 100)
    path = _smoke_copy(tmp_path, "target_mde = 0.6\n")
    code = main(["diagnose", str(path), "--out", str(tmp_path / "out"), "--quiet"])
    assert code == 2
    assert "[population] target_mde: target_mde 0.6 is out of reach" in capsys.readouterr().err
    assert not (tmp_path / "cache" / "diagnosis").exists()  # nothing trained


def test_timing_run_moves_a_lean_evaluation_schedule_to_its_own_last_step(tmp_path):
    """A grid evaluated only at its series steps (train.eval_steps=[30, 120]) is timed over fewer
    steps: the schedule must follow the timing run (it was refused by TrainConfig before)."""
    from probekit.diagnosis.population import grid_runs

    spec = load_diagnosis(_smoke_copy(tmp_path))
    run = grid_runs(spec)[0].run
    assert "train.eval_steps=[30, 120]" in run.sets
    overhead, rate = plan_mod._timed_cost(run, 8)
    assert overhead >= 0.0 and 0.0 < rate < 5.0
