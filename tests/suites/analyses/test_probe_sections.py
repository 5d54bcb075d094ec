"""``[[probe]]`` / ``[[correctness]]`` sections: the old spelling, kinds and not-testable outcomes."""

import json

import pytest

from probekit.cli import main
from probekit.suites import load_suite
from probekit.suites.spec import SuiteError
from tests.suites.conftest import SUITE


def _suite(suite_dir, tmp_path, sections, *, data_replace=None):
    text = SUITE.split("[[probe]]")[0].replace('label = "planted"', 'label = "planted"\nmax_new_tokens = 2')
    text = text.replace('"ckpt"', f'"{suite_dir / "ckpt"}"').replace('"data.jsonl"', f'"{suite_dir / "data.jsonl"}"')
    path = tmp_path / "s.toml"
    path.write_text(text + sections + "[stats]\nn_permutations = 19\n")
    return path


def test_old_correctness_spelling_is_one_line_naming_the_fix(suite_dir, tmp_path):
    path = _suite(suite_dir, tmp_path, '[[probe]]\nkind = "correctness"\ncv = 3\n\n')
    with pytest.raises(SuiteError) as err:
        load_suite(path)
    msg = str(err.value)
    assert "\n" not in msg and "[probe]" in msg and "write [[correctness]]" in msg


def test_unknown_probe_kind_lists_the_registered_kinds(suite_dir, tmp_path):
    path = _suite(suite_dir, tmp_path, '[[probe]]\nkind = "svm"\n\n')
    with pytest.raises(SuiteError, match=r"unknown probe kind 'svm'; registered probe kinds are "
                       r"\[.*'diffmeans', 'logistic'.*'ridge'.*\]"):  # + kinds other tests add
        load_suite(path)


def test_correctness_keys_are_checked(suite_dir, tmp_path):
    path = _suite(suite_dir, tmp_path, '[[correctness]]\ncv = 3\nCs = 3\n\n')
    with pytest.raises(SuiteError, match=r"\[correctness\] Cs.*unknown key"):
        load_suite(path)


def test_correctness_not_testable_in_api_cli_and_report(suite_dir, tmp_path, capsys):
    """Every answer correct (a constant 1 label column): "not testable" everywhere, no verdict."""
    rows = [json.loads(line) for line in (suite_dir / "data.jsonl").read_text().splitlines()]
    for r in rows:
        r["always"] = 1
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows))
    path = _suite(suite_dir, tmp_path, '[[correctness]]\nlabel = "always"\ncv = 3\nbaselines = false\n\n')
    path.write_text(path.read_text().replace(str(suite_dir / "data.jsonl"), str(data)))
    assert main(["report", str(path), "--out", str(tmp_path / "r"), "--quiet"]) == 0
    out = capsys.readouterr()
    lines = (out.out + out.err).splitlines()
    (line,) = [x for x in lines if "predictable from the question alone" in x]
    assert "not testable: all 150 answers are correct" in line and "reject" not in line
    report = json.loads((tmp_path / "r" / "report.json").read_text())
    (hyp,) = report["hypotheses"]
    assert hyp["testable"] is False and hyp["verdict"].startswith("not testable: all 150 answers")
    (sec,) = [a for a in report["analyses"] if a["section"] == "correctness"]
    assert sec["data"]["not_testable"].startswith("all 150 answers are correct")
    assert "sweep" not in sec["data"] and sec["data"]["n_correct"] == 150
    html = (tmp_path / "r" / "report.html").read_text()
    assert "not testable: all 150 answers are correct" in html
