"""[diagnosis] analysis keys and the population facts handed to marker_analysis."""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from probekit.diagnosis import marker_analysis
from probekit.diagnosis.options import (
    MEASURED_ON_OUTCOME,
    analysis_kwargs,
    marker_flags,
    marker_splits,
    outcome_examples,
    supported_kwargs,
)
from probekit.diagnosis.population import Checkpoint
from probekit.diagnosis.runner import analysis_inputs, population_facts
from probekit.diagnosis.spec import load_diagnosis
from probekit.diagnosis.statistics import analysis as analysis_module
from probekit.diagnosis.table_diagnosis import diagnose_table
from probekit.errors import ConfigError
from probekit.suites.spec import SuiteError

from .population_helpers import WEIGHT_NORM, write_file

GRID = 'preset = "modular_addition"\ngrid = { "task.noise" = [0.0, 0.1], seed = [0, 1, 2] }'
KEYS = ('outcome = "id_accuracy"\ncovariate_coding = { "task.noise" = "linear" }\nspline_df = 3\n'
        'inference = "cluster"\nequivalence_margin = 0.1\nmax_permutations = 5000')


def _line(path: Path, needle: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if needle in line)


def test_keys_parse_and_only_set_ones_are_passed(tmp_path):
    d = load_diagnosis(write_file(tmp_path, GRID, WEIGHT_NORM, KEYS)).diagnosis
    assert analysis_kwargs(d) == {"covariate_coding": {"task.noise": "linear"}, "spline_df": 3,
                                  "inference": "cluster", "equivalence_margin": 0.1,
                                  "max_permutations": 5000}
    bare = load_diagnosis(write_file(tmp_path, GRID, WEIGHT_NORM, 'outcome = "id_accuracy"'))
    assert analysis_kwargs(bare.diagnosis) == {}


@pytest.mark.parametrize(("key", "message"), [
    ('covariate_coding = { noise = "cubic" }', r"noise = 'cubic': must be one of \['factor'"),
    ('covariate_coding = { seed = "linear" }', r"covariate 'seed' is the seed, a label without "
     r"order: .*leave it as the groups column .*or code it as a factor"),
    # the declared rules of AnalysisOptions / DiagnosisSettings, at the key's line
    ("spline_df = 1", r"spline_df = 1: must be >= 2 \(a natural cubic spline needs 3 knots\)"),
    ('inference = "bootstrap"', r"inference = 'bootstrap': must be one of \['within_groups', "
     r"'cluster'\]"),
    ("equivalence_margin = 1.5", r"equivalence_margin = 1.5: must be in \(0, 1\) \(a partial "
     r"correlation, e.g. 0.2\)"),
    ("max_permutations = 0", r"max_permutations = 0: must be >= 1"),
    ("max_permutations = 100001", r"max_permutations = 100001: must be <= 100000"),
    ("calibration_simulations = -1", r"calibration_simulations = -1: must be in \[0, 10000\] "
     r"\(0 leaves the calibration out\)"),
])
def test_bad_keys_name_file_line(tmp_path, key, message):
    path = write_file(tmp_path, GRID, WEIGHT_NORM, f'outcome = "id_accuracy"\n{key}')
    with pytest.raises(SuiteError, match=message) as info:
        load_diagnosis(path)
    assert f"{path}:{_line(path, key.split(' =')[0])}:" in str(info.value)


def _fn_main(table, outcome, *, markers=None, covariates=(), groups=None, covariate_coding=None,
             spline_df=4):
    """marker_analysis's keyword set before the new options (main, plus coding)."""


def test_supported_kwargs_drops_derived_and_refuses_user_keys():
    got, dropped = supported_kwargs(_fn_main, {"spline_df": 3, "outcome_examples": 50,
                                               "marker_flags": {"m": ("x",)}})
    assert got == {"spline_df": 3} and dropped == ["outcome_examples", "marker_flags"]
    with pytest.raises(ConfigError, match=r"F:3: this version of marker_analysis does not take "
                       "'inference'"):
        supported_kwargs(_fn_main, {"inference": "cluster"}, lambda k: "F:3")
    everything = {"inference": "cluster", "exclude_rows": {"m": [0]}}
    assert supported_kwargs(lambda *a, **k: None, everything) == (everything, [])


def test_outcome_examples_is_the_smallest_count():
    assert outcome_examples({"ood:x__n": [200, 150, 200]}, "ood:x") == 150
    assert outcome_examples({"ood:x__n": [200, None]}, "ood:x") is None  # an old cached cell
    assert outcome_examples({"ood:x": [0.5]}, "ood:x") is None


DATA = SimpleNamespace(train_split="train", test_split="test_id", file=None, task=None)


def _m(name, **splits):
    return SimpleNamespace(name=name, spec=SimpleNamespace(**splits))


def test_marker_flags_by_split():
    markers = [_m("probe_ood", train_split="train", test_split="ood:ood_len_7"),
               _m("probe_id", train_split="train", test_split="test"),
               _m("rl_all", split="all"), _m("gini")]
    assert marker_splits(markers[0].spec, DATA) == {"train", "ood_len_7"}
    assert marker_splits(markers[2].spec, DATA) == {"train", "test_id"}
    assert marker_flags(markers, "ood:ood_len_7", DATA) == {"probe_ood": (MEASURED_ON_OUTCOME,)}
    # a grouped mean over ood_len_<n> covers ood_len_7
    assert marker_flags(markers, "ood:ood_len", DATA) == {"probe_ood": (MEASURED_ON_OUTCOME,)}
    assert marker_flags(markers, "id_accuracy", DATA) == {"probe_id": (MEASURED_ON_OUTCOME,),
                                                          "rl_all": (MEASURED_ON_OUTCOME,)}
    assert marker_flags(markers, "id_step_0.9", DATA) == {}
    jsonl = SimpleNamespace(train_split="train", test_split="test_id", file="x.jsonl", task=None)
    assert marker_flags(markers, "id_accuracy", jsonl) == {}


def _row(path, seed, noise, final=True):
    return Checkpoint(path=path, run=path, step=100, final=final,
                      design={"seed": seed, "task.noise": noise})


def test_population_facts_exclude_the_reference_itself(tmp_path):
    spec = load_diagnosis(write_file(tmp_path, GRID, WEIGHT_NORM, 'outcome = "id_accuracy"'))
    rows = [_row("a0", 0, 0.0, final=False), _row("a0f", 0, 0.0), _row("b0", 0, 0.1),
            _row("a1", 1, 0.0), _row("b1", 1, 0.1)]
    refs = {"cka": ["a0f", "a0f", "a0f", "a1", "a1"]}
    # final rows: a0f (0), b0 (1), a1 (2), b1 (3); a0f and a1 are their own reference
    assert population_facts(spec, rows, refs, "id_accuracy") == {"exclude_rows": {"cka": [0, 2]}}


def test_analysis_inputs_builds_the_kwargs(tmp_path, monkeypatch):
    spec = load_diagnosis(write_file(tmp_path, GRID, WEIGHT_NORM, KEYS))
    table = {"id_accuracy": [0.5, 0.6, 0.7], "id_accuracy__n": [40, 40, 38], "wn": [1, 2, 3]}
    facts = {"exclude_rows": {"cka": [0], "wn": [2]}, "marker_flags": {"wn": ("f",)}}

    def accepts_all(table, outcome, **kwargs):
        return None

    monkeypatch.setattr(analysis_module, "marker_analysis", accepts_all)
    got, dropped = analysis_inputs(spec, table, "id_accuracy", ["wn"], facts)
    assert dropped == [] and got == {
        "covariate_coding": {"task.noise": "linear"}, "spline_df": 3, "inference": "cluster",
        "equivalence_margin": 0.1, "max_permutations": 5000, "outcome_examples": 38,
        "exclude_rows": {"wn": [2]}, "marker_flags": {"wn": ("f",)}}
    monkeypatch.setattr(analysis_module, "marker_analysis", _fn_main)
    path = spec.source
    with pytest.raises(ConfigError, match=re.escape(f"{path}:{_line(path, 'inference')}:")):
        analysis_inputs(spec, table, "id_accuracy", ["wn"], facts)


def _table_file(tmp_path, diagnosis):
    from probekit.diagnosis.runner import _csv

    rng = np.random.default_rng(0)
    knob = np.repeat(np.arange(4.0), 6)
    table = {"knob": knob.tolist(), "seed": np.tile(np.arange(6), 4).tolist(),
             "ood:x": (knob + rng.normal(size=24)).tolist(), "ood:x__n": [50] * 12 + [48] * 12,
             "m": rng.normal(size=24).tolist()}
    (tmp_path / "markers.csv").write_text(_csv(table))
    path = tmp_path / "diag.toml"
    path.write_text('[suite]\nname = "t"\n\n[population]\ntable = "markers.csv"\n\n[diagnosis]\n'
                    f'outcome = "ood:x"\nmarkers = ["m"]\nn_permutations = 99\n{diagnosis}\n')
    return table, path


def test_table_diagnosis_passes_the_coding_and_the_example_count(tmp_path):
    table, path = _table_file(tmp_path, 'covariates = ["knob"]\n'
                                        'covariate_coding = { knob = "linear" }')
    res = diagnose_table(path)
    assert res.analysis.covariate_terms == ("knob",)
    passed = res.extras["analysis_inputs"]["passed"]
    assert passed["covariate_coding"] == {"knob": "linear"}
    if "outcome_examples" in inspect.signature(analysis_module.marker_analysis).parameters:
        assert passed["outcome_examples"] == 48
    else:  # until marker_analysis takes it: dropped and said so
        assert res.extras["analysis_inputs"]["not_taken_yet"] == ["outcome_examples"]
    ref = marker_analysis(table, "ood:x", markers=["m"], covariates=["knob"], groups="seed",
                          n_permutations=99, covariate_coding={"knob": "linear"})
    assert res.analysis["m"].partial_r == pytest.approx(ref["m"].partial_r, abs=1e-9)
    default = diagnose_table(_table_file(tmp_path, 'covariates = ["knob"]')[1])
    assert default.analysis.covariate_terms == ("knob=1.0", "knob=2.0", "knob=3.0")


def test_a_coded_column_must_be_a_covariate(tmp_path):
    _, path = _table_file(tmp_path, 'covariates = ["knob"]\ncovariate_coding = { kno = "factor" }')
    with pytest.raises(ConfigError, match="'kno' is not a covariate; the covariates are "
                       r"\['knob'\]") as info:
        diagnose_table(path)
    assert f"{path}:{_line(path, 'covariate_coding')}:" in str(info.value)
