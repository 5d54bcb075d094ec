"""[population] interventions and [diagnosis] mediation: parsing and FILE:LINE errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from probekit.diagnosis.spec import CausalPair, load_diagnosis
from probekit.diagnosis.table_diagnosis import diagnose_table, load_table_diagnosis
from probekit.errors import ConfigError
from probekit.suites.spec import SuiteError

from .population_helpers import WEIGHT_NORM, write_file

GRID = ('preset = "modular_addition"\n'
        'grid = { "train.weight_decay" = [0.1, 1.0], seed = [0, 1, 2] }')


def test_interventions_and_mediation_parse(tmp_path):
    spec = load_diagnosis(write_file(
        tmp_path, GRID + '\ninterventions = [{ knob = "train.weight_decay", target = "wn" }]',
        WEIGHT_NORM,
        'outcome = "id_accuracy"\nmediation = [{ knob = "train.weight_decay", marker = "wn" }]'))
    assert spec.population.interventions == (CausalPair(knob="train.weight_decay", marker="wn"),)
    assert spec.diagnosis.mediation == (CausalPair(knob="train.weight_decay", marker="wn"),)
    assert spec.to_dict()["population"]["interventions"] == [
        {"knob": "train.weight_decay", "target": "wn"}]
    # declaring an arm does not change which models the population holds
    plain = load_diagnosis(write_file(tmp_path, GRID, WEIGHT_NORM, 'outcome = "id_accuracy"'))
    assert plain.population_key() == spec.population_key()


def _line(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


@pytest.mark.parametrize(("population", "diagnosis", "message", "needle"), [
    (GRID + '\ninterventions = { knob = "x", target = "wn" }', "",
     r"\[population\] interventions = .*expected a list of tables", "interventions"),
    (GRID + '\ninterventions = [{ knob = "train.weight_decay", targt = "wn" }]', "",
     r"\[population\] interventions: entry 0: unknown key.*did you mean.*target", "interventions"),
    (GRID + '\ninterventions = [{ knob = "train.weight_decay" }]', "",
     r"entry 0: missing or empty 'target'", "interventions"),
    (GRID + '\ninterventions = [{ knob = "train.weight_decay", target = "gini" }]', "",
     r"target 'gini' is not a marker; the markers are \['wn'\]", "interventions"),
    (GRID + '\ninterventions = [{ knob = "task.p", target = "wn" }]', "",
     r"knob 'task.p' must be a grid key with >= 2 numeric values.*\['train.weight_decay'\]",
     "interventions"),
    (GRID + '\ninterventions = [{ knob = "seed", target = "wn" }]', "",
     r"knob 'seed' must be a grid key", "interventions"),
    (GRID + '\ninterventions = [{ knob = "train.weight_decay", target = "wn" }, '
            '{ knob = "train.weight_decay", target = "wn" }]', "",
     r"entry 1: train.weight_decay -> wn is given twice", "interventions"),
    (GRID, '\nmediation = [{ knob = "train.weight_decay", marker = "nope" }]',
     r"\[diagnosis\] mediation: marker 'nope' is not a marker", "mediation"),
    (GRID, '\nmediation = [{ knob = "train.weight_decay", target = "wn" }]',
     r"\[diagnosis\] mediation: entry 0: unknown key 'target'; valid keys are \['knob', "
     r"'marker'\]", "mediation"),
])
def test_bad_causal_keys_name_file_line(tmp_path, population, diagnosis, message, needle):
    path = write_file(tmp_path, population, WEIGHT_NORM, 'outcome = "id_accuracy"' + diagnosis)
    with pytest.raises(SuiteError, match=message) as err:
        load_diagnosis(path)
    assert f"{path}:{_line(path, needle)}:" in str(err.value)


def _table(tmp_path: Path, population: str, diagnosis: str = "") -> Path:
    csv = tmp_path / "t.csv"
    rows = ["seed,arm,noise,y,he"]
    for s in range(4):
        for arm in (0.0, 0.2):
            for noise in (0, 3):
                rows.append(f"{s},{arm},{noise},{0.5 - 0.01 * noise + 0.001 * s},"
                            f"{0.1 - 0.3 * arm + 0.002 * noise + 0.003 * ((s * 7 + noise) % 5)}")
    csv.write_text("\n".join(rows) + "\n")
    path = tmp_path / "t.toml"
    path.write_text(f'[suite]\nname = "t"\n\n[population]\ntable = "t.csv"\n{population}\n\n'
                    f'[diagnosis]\noutcome = "y"\nmarkers = ["he"]\ncovariates = ["arm", "noise"]'
                    f"\n{diagnosis}\n")
    return path


def test_table_diagnosis_checks_the_columns(tmp_path):
    path = _table(tmp_path, 'interventions = [{ knob = "dose", target = "he" }]')
    spec = load_table_diagnosis(path)
    with pytest.raises(ConfigError, match=r"t.toml:\d+: \[population\] interventions: knob "
                                          r"'dose' is not a design knob.*'arm'"):
        diagnose_table(spec)
    path = _table(tmp_path, "", 'mediation = [{ knob = "noise", marker = "y" }]')
    with pytest.raises(ConfigError, match=r"\[diagnosis\] mediation: marker 'y' is not a marker"):
        diagnose_table(load_table_diagnosis(path))
