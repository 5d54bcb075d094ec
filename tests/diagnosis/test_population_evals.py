"""A grid population evaluates only where the diagnosis reads an evaluation (issue 55 item 2):
the same models and marker table as with the preset's full evaluation schedule, fewer
evaluations."""

import json

import pytest

from probekit.diagnosis.population import grid_runs
from probekit.diagnosis.spec import load_diagnosis

from .population_helpers import WEIGHT_NORM, run_smoke_diagnosis, write_file

GRID = ('preset = "modular_addition"\ngrid = { "train.weight_decay" = [0.1, 1.0], seed = [0, 1] }\n'
        'sets = ["task.p=11", "model.d_model=32", "model.d_head=16", "model.d_mlp=64"]\n'
        "steps = 40\nseries = [10]")


def _sets(tmp_path, population=GRID, diagnosis='outcome = "id_accuracy"'):
    path = write_file(tmp_path, population, WEIGHT_NORM, diagnosis)
    return [r.run for r in grid_runs(load_diagnosis(path), tmp_path / "pop")]


def test_eval_sets_follow_what_the_diagnosis_reads(tmp_path):
    lean = _sets(tmp_path)
    assert lean[0].sets[-2:] == ("train.eval_steps=[10, 40]", "train.eval_at_start=false")
    full = _sets(tmp_path, GRID + "\ncurves = true")
    assert [r.sets for r in full] == [r.sets[:-2] for r in lean]
    # the run directories (cache keys) do not depend on the evaluation schedule
    assert [r.out_dir for r in full] == [r.out_dir for r in lean]
    crossing = _sets(tmp_path, diagnosis='outcome = "id_accuracy"\ncrossing = 0.9')
    assert [r.sets for r in crossing] == [r.sets for r in full]
    own = GRID.replace('"model.d_mlp=64"', '"model.d_mlp=64", "train.eval_steps=[5, 40]"')
    assert _sets(tmp_path, own)[0].sets[-1] == "train.checkpoint_steps=[10]"
    stop = GRID.replace('"model.d_mlp=64"', '"model.d_mlp=64", "train.stop_metric=\\"test_id/acc\\""')
    assert _sets(tmp_path, stop)[0].sets[-1] == "train.checkpoint_steps=[10]"


def test_curves_key_only_for_a_trained_population(tmp_path):
    from probekit.suites.spec import SuiteError

    path = write_file(tmp_path, 'checkpoints = "runs/*"\ncurves = true', WEIGHT_NORM,
                      'outcome = "id_accuracy"')
    with pytest.raises(SuiteError, match=r"only a trained population .* takes grid, sets, steps, "
                       r"device, target_mde and curves"):
        load_diagnosis(path)


@pytest.mark.slow
def test_lean_evaluation_gives_the_same_table(tmp_path):
    """Same markers.csv (outcomes, markers, design) with curves and without; fewer evaluations."""
    tables, records = {}, {}
    for name, extra in (("lean", ""), ("curves", "\ncurves = true")):
        path = write_file(tmp_path / name if (tmp_path / name).mkdir() is None else None,
                          GRID + extra, WEIGHT_NORM,
                          'outcome = "id_accuracy"\ncovariates = ["train.weight_decay"]\n'
                          'groups = ""\nn_permutations = 50\ncalibration_simulations = 0')
        res = run_smoke_diagnosis(path, tmp_path / name)
        assert res["code"] == 0
        tables[name] = [{k: v for k, v in row.items() if k not in ("checkpoint", "run")}
                        for row in res["rows"]]
        hist = sorted((tmp_path / name / "cache").rglob("history.json"))
        records[name] = [len(json.loads(h.read_text())["records"]) for h in hist]
    assert tables["lean"] == tables["curves"] and len(tables["lean"]) == 8
    assert records["lean"] == [2] * 4
    assert min(records["curves"]) > 10
