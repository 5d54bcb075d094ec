"""Populations: design columns from saved configs, checkpoints that agree, grids, series, errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from probekit.diagnosis.population import (
    Checkpoint,
    design_columns,
    grid_runs,
    list_lengths,
    resolve_population,
    varying_knobs,
)
from probekit.diagnosis.runner import check_diagnosis
from probekit.diagnosis.spec import load_diagnosis
from probekit.errors import ConfigError
from probekit.suites.spec import SuiteError

from .population_helpers import WEIGHT_NORM, write_checkpoint, write_file


def _population(root: Path, fractions=(0.4, 0.6), seeds=(0, 1, 2)) -> None:
    for f in fractions:
        for s in seeds:
            write_checkpoint(root / "runs" / f"f{f}-s{s}", seed=s, train_fraction=f,
                             train={"weight_decay": 1.0 if f == 0.4 else 0.5})


def test_design_columns_keep_what_varies():
    base = {"task": "modular_addition", "task_config": {"p": 11, "seed": 0, "train_fraction": 0.4},
            "model_config": {"d_model": 16, "seed": 0},
            "train_config": {"seed": 0, "lr": 1e-3, "n_evals": 10, "betas": [0.9, 0.98]}}
    other = json.loads(json.dumps(base))
    other["task_config"].update(seed=1, train_fraction=0.6)
    other["model_config"]["seed"] = 1
    other["train_config"].update(seed=1, n_evals=20, betas=[0.9, 0.99])
    got = design_columns([base, other])
    # per-config seeds equal to the train seed and the evaluation schedule are not knobs
    assert got == [{"seed": 0, "task.train_fraction": 0.4, "train.betas": "[0.9, 0.98]"},
                   {"seed": 1, "task.train_fraction": 0.6, "train.betas": "[0.9, 0.99]"}]


def test_checkpoint_glob_gives_one_final_row_each_with_its_design(tmp_path):
    _population(tmp_path)
    spec = load_diagnosis(write_file(tmp_path, 'checkpoints = "runs/*"', WEIGHT_NORM,
                                     'outcome = "id_accuracy"'))
    rows = resolve_population(spec, train=False)
    assert len(rows) == 6 and all(r.final and r.step == 100 for r in rows)
    assert rows[0].design == {"seed": 0, "task.train_fraction": 0.4, "train.weight_decay": 1.0}
    assert varying_knobs(rows) == ["task.train_fraction", "train.weight_decay"]
    lines = check_diagnosis(spec)
    assert "6 checkpoints" in lines[1]
    assert "covariates ['task.train_fraction', 'train.weight_decay']" in lines[3]  # id_acc = outcome
    assert "groups 'seed'" in lines[3]


def test_run_directories_give_their_series(tmp_path):
    for seed in range(3):
        run = tmp_path / "runs" / f"seed{seed}"
        for step in (0, 10, 20, 30):
            d = write_checkpoint(run / "checkpoints" / f"step_{step:07d}", seed=seed, step=step)
            (d / "optimizer.json").write_text("{}")
    spec = load_diagnosis(write_file(tmp_path, 'checkpoints = "runs/*"\nseries = [10, 20]',
                                     WEIGHT_NORM, 'outcome = "id_accuracy"'))
    rows = resolve_population(spec, train=False)
    assert [(r.step, r.final) for r in rows[:3]] == [(10, False), (20, False), (30, True)]
    assert len(rows) == 9 and {r.run for r in rows[:3]} == {str(tmp_path / "runs" / "seed0")}
    spec = load_diagnosis(write_file(tmp_path, 'checkpoints = "runs/*"\nseries = [15]',
                                     WEIGHT_NORM, 'outcome = "id_accuracy"'))
    with pytest.raises(SuiteError, match=r"no checkpoint at step\(s\) \[15\]"):
        resolve_population(spec, train=False)


def test_empty_glob_is_one_error(tmp_path):
    path = write_file(tmp_path, 'checkpoints = "nowhere/*"', WEIGHT_NORM, 'outcome = "id_accuracy"')
    with pytest.raises(SuiteError, match=r"diag.toml:\d+: \[population\] checkpoints: 'nowhere/\*' "
                       "matches no checkpoint"):
        check_diagnosis(path)


def test_different_vocabularies_name_both_checkpoints(tmp_path):
    _population(tmp_path, fractions=(0.4,))
    write_checkpoint(tmp_path / "runs" / "zz-p13", seed=5, p=13)
    path = write_file(tmp_path, 'checkpoints = "runs/*"', WEIGHT_NORM, 'outcome = "id_accuracy"')
    with pytest.raises(ConfigError, match=r"different vocabularies.*f0.4-s0 \(13 tokens\) and .*zz-p13 "
                       r"\(15 tokens\)"):
        check_diagnosis(path)


def test_different_tasks_name_both_checkpoints(tmp_path):
    write_checkpoint(tmp_path / "runs" / "a", seed=0)
    write_checkpoint(tmp_path / "runs" / "b", task="relation_facts", seed=1)
    path = write_file(tmp_path, 'checkpoints = "runs/*"', WEIGHT_NORM, 'outcome = "id_accuracy"')
    with pytest.raises(ConfigError, match=r"different tasks.*runs/a \('modular_addition'\) and "
                       r".*runs/b \('relation_facts'\)"):
        check_diagnosis(path)


def test_outcome_split_missing_on_some_checkpoints(tmp_path):
    for s in range(3):
        write_checkpoint(tmp_path / "runs" / f"long{s}", task="scan", seed=s, ood_lengths=[5, 6],
                         n_ood_per_length=5, max_samples=50)
        write_checkpoint(tmp_path / "runs" / f"short{s}", task="scan", seed=s, ood_lengths=[5],
                         n_ood_per_length=5, max_samples=50)
    path = write_file(tmp_path, 'checkpoints = "runs/*"', WEIGHT_NORM,
                      'outcome = "ood:ood_len_6"', data='label = "n_clauses"')
    with pytest.raises(ConfigError, match=r"outcome split is missing on 3 of 6 checkpoints "
                       r"\(e.g. .*short0; present on .*long0\).*\[data\] task"):
        check_diagnosis(path)
    path = write_file(tmp_path, 'checkpoints = "runs/long*"', WEIGHT_NORM,
                      'outcome = "ood:nope"', data='label = "n_clauses"')
    with pytest.raises(ConfigError, match=r"no such outcome column; the checkpoints have \[.*"
                       r"'ood:ood_len', 'ood:ood_len_5', 'ood:ood_len_6'"):
        check_diagnosis(path)


def test_fewer_than_three_groups(tmp_path):
    _population(tmp_path, seeds=(0, 1))
    path = write_file(tmp_path, 'checkpoints = "runs/*"', WEIGHT_NORM, 'outcome = "id_accuracy"')
    with pytest.raises(ConfigError, match=r"\[diagnosis\] groups: 2 group\(s\) of 'seed'.*needs >= 3"):
        check_diagnosis(path)
    path = write_file(tmp_path, 'checkpoints = "runs/*"', WEIGHT_NORM,
                      'outcome = "id_accuracy"\ngroups = ""')
    assert "groups None" in check_diagnosis(path)[3]


def test_grid_runs_and_unknown_grid_key(tmp_path):
    grid = ('preset = "modular_addition"\ngrid = { "train.weight_decay" = [0.1, 1.0], '
            'seed = [0, 1, 2] }\nsets = ["task.p=11"]\nsteps = 30\nevery = 10')
    path = write_file(tmp_path, grid, WEIGHT_NORM, 'outcome = "id_accuracy"')
    runs = grid_runs(load_diagnosis(path), tmp_path / "pop")
    assert len(runs) == 6 and runs[1].design == {"preset": "modular_addition",
                                                  "train.weight_decay": 0.1, "seed": 1}
    assert runs[1].run.sets == ("task.p=11", "train.weight_decay=0.1", "train.checkpoint_steps=[10, 20]",
                                "train.eval_steps=[10, 20, 30]", "train.eval_at_start=false")
    assert runs[1].final_step == 30 and len({r.run.out_dir for r in runs}) == 6
    assert "grid of 6 runs" in check_diagnosis(path)[1]
    bad = grid.replace('"train.weight_decay"', '"train.wieght_decay"')
    path = write_file(tmp_path, bad, WEIGHT_NORM, 'outcome = "id_accuracy"')
    with pytest.raises(SuiteError, match=r"diag.toml:\d+: \[population\] grid: run .*train config "
                       r"has no field 'wieght_decay'"):
        check_diagnosis(path)


def test_a_list_knob_is_recorded_with_its_length_the_numeric_column(tmp_path):
    # the coverage knob of An & Du 2026: train on 1..k clauses; the statistics use k
    grid = ('preset = "scan"\ngrid = { "task.train_clauses" = [[1], [1, 2]], seed = [0, 1, 2] }\n'
            'sets = ["task.max_samples=40", "task.ood_lengths=[5]", "task.n_ood_per_length=10", '
            '"task.n_ood_combo=10"]\nsteps = 20')
    path = write_file(tmp_path, grid, WEIGHT_NORM, 'outcome = "ood:ood_len"\n'
                      'covariates = ["len(task.train_clauses)", "id_accuracy"]',
                      data='label = "first_primitive"\nprompt_only = false\nmax_per_split = 50')
    runs = grid_runs(load_diagnosis(path), tmp_path / "pop")
    assert [r.design for r in runs[2:4]] == [
        {"preset": "scan", "task.train_clauses": [1], "seed": 2, "len(task.train_clauses)": 1},
        {"preset": "scan", "task.train_clauses": [1, 2], "seed": 0, "len(task.train_clauses)": 2}]
    # the derived column is no --set override: the run (and its cache key) is the list's
    assert runs[3].run.sets[-3] == "task.train_clauses=[1, 2]"
    assert runs[3].run.sets[-2:] == ("train.eval_steps=[20]", "train.eval_at_start=false")
    rows = [Checkpoint(path=str(i), run=str(i), step=20, final=True, design=r.design)
            for i, r in enumerate(runs)]
    assert varying_knobs(rows) == ["len(task.train_clauses)"]  # the list itself is no knob
    assert list_lengths({"a": (3, 4, 5), "b": 1}) == {"a": (3, 4, 5), "b": 1, "len(a)": 3}
