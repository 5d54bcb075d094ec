"""The one settings resolver (question.resolve_settings) on both paths: defaults and refusals."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from probekit.diagnosis.question import MIN_GROUPS, Columns, resolve_settings
from probekit.diagnosis.spec import DiagnosisSettings
from probekit.errors import ConfigError

ROOT = Path(__file__).resolve().parents[2]


def _cols(seeds: list[int], default: str | None = "seed") -> Columns:
    design = ["noise", "seed"]
    return Columns(names=["id_accuracy", "m", "noise", "ood", "seed"], design=design,
                   knobs=lambda groups: ("noise",), levels=lambda c: seeds, source="the table",
                   default_groups=lambda: default)


def _at(key: str) -> str:
    return f"f.toml:1: [diagnosis] {key}"


def test_defaults_filled_in():
    s = resolve_settings(DiagnosisSettings(outcome="ood"), _cols([0, 1, 2]), _at)
    assert (s.covariates, s.groups, s.color_by, s.knobs) == (("noise", "id_accuracy"), "seed",
                                                             "noise", ("noise",))
    s = resolve_settings(DiagnosisSettings(outcome="id_accuracy", groups=""), _cols([0]), _at)
    assert (s.covariates, s.groups) == (("noise",), None)  # the outcome is no covariate; "": none


@pytest.mark.parametrize(("settings", "message"), [
    ({"covariates": ("nope",)}, r"\[diagnosis\] covariates: covariate 'nope' is not a column of "
                                r"the table"),
    ({"covariates": ("ood",)}, r"the outcome 'ood' cannot be a covariate of itself"),
    ({"groups": "run"}, r"\[diagnosis\] groups = 'run': not a design column"),
    ({"color_by": "m"}, r"\[diagnosis\] color_by = 'm': not a design column"),
    ({"covariate_coding": {"seed": "factor"}}, r"'seed' is not a covariate"),
])
def test_named_columns_are_checked(settings, message):
    with pytest.raises(ConfigError, match=message):
        resolve_settings(DiagnosisSettings(outcome="ood", **settings), _cols([0, 1, 2]), _at)


def test_fewer_than_three_groups_are_refused_on_both_paths(tmp_path):
    with pytest.raises(ConfigError, match=rf"2 group\(s\) of 'seed'.*needs >= {MIN_GROUPS}"):
        resolve_settings(DiagnosisSettings(outcome="ood"), _cols([0, 1, 0]), _at)
    # a table diagnosis: refused when the question is resolved, at the file's line
    from probekit.diagnosis.table_diagnosis import load_table_diagnosis, table_question

    path = tmp_path / "diag.toml"
    path.write_text('[suite]\nname = "t"\n\n[population]\ntable = "markers.csv"\n\n'
                    '[diagnosis]\noutcome = "ood"\nmarkers = ["m"]\n')
    (tmp_path / "markers.csv").write_text("ood\n1\n")
    table = {"ood": [0.1, 0.5, 0.3, 0.9], "m": [1.0, 2.0, 3.0, 4.0], "noise": [0.0, 0.1] * 2,
             "seed": [0, 0, 1, 1]}
    with pytest.raises(ConfigError, match=r"diag\.toml(:\d+)?: \[diagnosis\] groups: 2 group\(s\)"):
        table_question(load_table_diagnosis(path), table)
    table["seed"] = [0, 1, 2, 3]
    assert table_question(load_table_diagnosis(path), table)[0].groups == "seed"


def test_one_resolver_in_the_package():
    out = subprocess.run(["grep", "-rn", r"def .*_settings\|def resolve_settings",
                          str(ROOT / "probekit" / "diagnosis")], capture_output=True, text=True)
    assert [re.sub(r":\d+:.*", "", line).rsplit("/", 1)[-1]
            for line in out.stdout.splitlines()] == ["question.py"]
