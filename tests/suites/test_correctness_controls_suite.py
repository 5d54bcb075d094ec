"""Issue 19 §3 wiring: the correctness analysis reports grouped, baseline-adjusted numbers."""

import json

import pytest

from probekit.report import write_report
from probekit.suites import load_suite, run_suite
from tests.suites.conftest import SUITE


def test_grouped_correctness_section_reports_controls(suite_dir, tmp_path):
    text = SUITE.split("[[probe]]")[0].replace('label = "planted"', 'label = "planted"\nmax_new_tokens = 2')
    text = text.replace('"ckpt"', f'"{suite_dir / "ckpt"}"').replace('"data.jsonl"', f'"{suite_dir / "data.jsonl"}"')
    text += (
        '[[correctness]]\ncv = 3\ngroup_column = "null"\n\n'
        "[stats]\nn_permutations = 99\n"
    )
    path = tmp_path / "s.toml"
    path.write_text(text)
    result = run_suite(load_suite(path), progress=False)
    (entry,) = [a.data for a in result.analyses if a.section == "correctness"]
    (hyp,) = result.hypotheses
    # Two random groups ('null' column): leave-one-group-out, the planted parity is read
    # within groups as well as pooled.
    assert entry["evaluation"] == "leave-one-group-out (2 groups)"
    best = entry["sweep"]["best"]["site"]
    (row,) = [r for r in entry["sweep"]["rows"] if r["site"] == best]
    assert row["within_group"] > 0.9 and row["pooled"] > 0.9
    # one CV figure per site, not the same number under "val" and "test"
    assert {"cv_auroc", "cv_auroc_ci"} <= row.keys() and not {"val", "test", "train"} & row.keys()
    assert entry["sweep"]["best"]["cv_auroc"] == row["cv_auroc"]
    names = {b["baseline"] for b in entry["baselines"]}
    assert names == {"group_base_rate", "confidence"}  # token data: no prompt text
    base = next(b for b in entry["baselines"] if b["baseline"] == "group_base_rate")
    assert base["within"] == pytest.approx(0.5) and base["diff_within_ci"][0] > 0.3
    assert entry["nested_selection"]["within_group_auroc"] > 0.9
    assert entry["max_statistic"]["p_value"] == pytest.approx(1 / 100)
    assert hyp.p_value == pytest.approx(1 / 100) and "best of" in hyp.name
    assert entry["survives_controls"] is True
    paths = write_report(result, tmp_path / "rep")
    html = paths["html"].read_text()
    assert "within-group AUROC" in html and "group_base_rate" in html
    (probe,) = [a for a in json.loads(paths["json"].read_text())["analyses"] if a["section"] == "correctness"]
    assert probe["data"]["survives_controls"] is True
