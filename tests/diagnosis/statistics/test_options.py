"""AnalysisOptions: the marker analysis's options declared once; every surface derives from it."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from probekit.diagnosis.options import ANALYSIS_KEYS, BASE_KEYS, analysis_kwargs, base_kwargs
from probekit.diagnosis.spec import DiagnosisSettings
from probekit.diagnosis.statistics.analysis import marker_analysis
from probekit.diagnosis.statistics.options import DEFAULTS, AnalysisOptions, option_keys
from probekit.util.constraints import ConstraintError, constraints_of


def test_marker_analysis_defaults_are_the_declared_ones():
    params = inspect.signature(marker_analysis).parameters
    for key in option_keys():
        expected = None if key == "covariate_coding" else getattr(DEFAULTS, key)  # None: by kind
        assert params[key].default == expected, key


def test_the_file_keys_carry_the_declared_rules_and_defaults():
    ours, theirs = constraints_of(DiagnosisSettings), constraints_of(AnalysisOptions)
    for key in option_keys():
        assert ours[key][1] == theirs[key][1], key  # the same rule objects, declared once
    fields = {f.name: f for f in dataclasses.fields(DiagnosisSettings)}
    for key in BASE_KEYS:
        assert fields[key].default == getattr(DEFAULTS, key), key
    assert sorted(ANALYSIS_KEYS + BASE_KEYS) == sorted(option_keys())
    assert ANALYSIS_KEYS == ("covariate_coding", "spline_df", "inference", "equivalence_margin",
                             "max_permutations")  # the file's key order (report.json)
    assert BASE_KEYS == ("n_permutations", "n_bootstrap", "alpha", "seed")


def test_the_kwargs_a_file_hands_over():
    d = DiagnosisSettings(outcome="y", spline_df=3, n_permutations=99)
    assert analysis_kwargs(d) == {"spline_df": 3}  # unset keys keep marker_analysis's default
    assert base_kwargs(d) == {"n_permutations": 99, "n_bootstrap": 1000, "alpha": 0.05, "seed": 0}


@pytest.mark.parametrize(("key", "value", "rule"), [
    ("n_permutations", 0, ">= 1"), ("n_bootstrap", 999, ">= 1000"), ("alpha", 1.0, "in (0, 1)"),
    ("seed", -1, "in [0, 4294967296)"), ("spline_df", 1, ">= 2"),
    ("equivalence_margin", 0.0, "in (0, 1)"), ("max_permutations", 100_001, "<= 100000"),
])
def test_one_rule_refuses_on_both_surfaces(key, value, rule):
    for cls, extra in ((AnalysisOptions, {}), (DiagnosisSettings, {"outcome": "y"})):
        with pytest.raises(ConstraintError) as err:
            cls(**extra, **{key: value})
        assert err.value.key == key and err.value.rule.startswith(rule), (cls, err.value.rule)
