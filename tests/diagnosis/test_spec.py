"""Diagnosis files: validation with FILE:LINE errors, markers by registered kind."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from probekit.diagnosis.spec import load_diagnosis
from probekit.suites.spec import SuiteError

from .population_helpers import WEIGHT_NORM, write_file

ROOT = Path(__file__).resolve().parents[2]
GRID = 'preset = "modular_addition"\ngrid = { "train.weight_decay" = [0.1, 1.0], seed = [0, 1, 2] }'


def test_shipped_smoke_file_loads():
    spec = load_diagnosis(ROOT / "probes" / "diagnose_modadd_smoke.toml")
    assert spec.population.trained and spec.population.steps == 120
    assert spec.population.series_steps(120) == (30,)
    assert [m.name for m in spec.markers] == ["fourier_gini", "weight_norm", "restricted_loss",
                                             "probe_accuracy"]
    assert spec.markers[3].spec.site == "resid_post@0"  # the kind's own spec class
    assert spec.diagnosis.outcome == "id_accuracy"
    assert spec.to_dict()["marker"][0] == {"name": "fourier_gini", "measure": "fourier_gini",
                                           "source": "embed", "checkpoint": None}
    assert "model" not in spec.to_dict()


def test_series_steps(tmp_path):
    spec = load_diagnosis(write_file(tmp_path, GRID + "\nseries = [50, 10, 500]",
                                     WEIGHT_NORM, 'outcome = "id_accuracy"'))
    assert spec.population.series_steps(100) == (10, 50)


def _line(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


@pytest.mark.parametrize(("population", "markers", "diagnosis", "message", "needle"), [
    (GRID, '[[marker]]\nname = "x"\nmeasure = "fourier_ginni"', 'outcome = "id_accuracy"',
     r"unknown measurement kind.*did you mean.*fourier_gini.*registered kinds are \[", "fourier_ginni"),
    (GRID, '[[marker]]\nname = "x"\nmeasure = "fourier_gini"\nsorce = "embed"',
     'outcome = "id_accuracy"', r"\[marker\] sorce: unknown key.*source", "sorce"),
    (GRID, '[[marker]]\nname = "x"\nmeasure = "fourier_gini"\nsource = "embeds"',
     'outcome = "id_accuracy"', r"\[marker\] source = 'embeds': must be one of", "embeds"),
    (GRID, WEIGHT_NORM + "\n" + WEIGHT_NORM, 'outcome = "id_accuracy"',
     "marker name 'wn' is used twice", None),
    (GRID + '\ncheckpoints = "runs/*"', WEIGHT_NORM, 'outcome = "id_accuracy"',
     "give exactly one of checkpoints", None),
    ('checkpoints = "runs/*"\nsteps = 10', WEIGHT_NORM, 'outcome = "id_accuracy"',
     r"\[population\] steps: only a trained population", "steps = 10"),
    ('preset = "modular_addition_typo"', WEIGHT_NORM, 'outcome = "id_accuracy"',
     r"unknown preset.*modular_addition", "typo"),
    (GRID + "\nseries = [10]\nevery = 5", WEIGHT_NORM, 'outcome = "id_accuracy"',
     "give series or every, not both", "every"),
    ('preset = "modular_addition"\ngrid = { seed = [0, 0, 1] }', WEIGHT_NORM,
     'outcome = "id_accuracy"', "repeats a value", None),
    (GRID, WEIGHT_NORM, 'outcome = "id_accuracy"\nn_bootstrap = 0', "n_bootstrap = 0: must be >= 1000", None),
    (GRID, WEIGHT_NORM, 'outcom = "id_accuracy"', r"\[diagnosis\] outcom: unknown key", "outcom"),
    (GRID, WEIGHT_NORM + '\nreference = { seed = 0 }', 'outcome = "id_accuracy"',
     r"\[marker\] reference: a reference checkpoint is read by \['representational_similarity'\] "
     "only, not 'weight_norm'", "reference"),
    (GRID, '[[marker]]\nname = "c"\nmeasure = "representational_similarity"\nsite_a = "embed"\n'
     'site_b = "embed"\nreference = "noise0"', 'outcome = "id_accuracy"',
     r"\[marker\] reference = 'noise0': expected a table of design columns", "reference"),
])
def test_bad_files_name_file_line_and_fix(tmp_path, population, markers, diagnosis, message,
                                          needle):
    path = write_file(tmp_path, population, markers, diagnosis)
    with pytest.raises(SuiteError, match=message) as info:
        load_diagnosis(path)
    if needle is not None:
        assert f"{path}:{_line(path, needle)}:" in str(info.value)


def test_model_section_is_refused_with_the_reason(tmp_path):
    path = write_file(tmp_path, GRID, WEIGHT_NORM, 'outcome = "id_accuracy"')
    path.write_text(path.read_text() + '\n[model]\nname = "x"\n')
    with pytest.raises(SuiteError, match=r"a diagnosis file has no \[model\]"):
        load_diagnosis(path)


def test_missing_sections(tmp_path):
    path = write_file(tmp_path, GRID, "", 'outcome = "id_accuracy"')
    with pytest.raises(SuiteError, match=re.escape("no [[marker]]")):
        load_diagnosis(path)
    text = path.read_text().replace("[diagnosis]\noutcome = \"id_accuracy\"\n", "")
    path.write_text(text + WEIGHT_NORM + "\n")
    with pytest.raises(SuiteError, match=re.escape("missing section [diagnosis]")):
        load_diagnosis(path)
