import json
import re

import numpy as np
import pytest

from probekit.capture import Site
from probekit.cli import main
from probekit.report import write_report
from probekit.suites import SuiteError, load_suite, run_suite
from tests.suites.conftest import SUITE


@pytest.fixture(scope="module")
def suite_result(suite_dir):
    return run_suite(load_suite(suite_dir / "suite.toml"), progress=False)


def test_planted_label_is_decodable_and_null_is_not(suite_result):
    planted, null, diffmeans = suite_result.probes
    assert planted["sweep"]["best"]["test"] >= 0.9
    assert planted["chance"] == pytest.approx(0.5, abs=0.15)
    h_planted, h_null, h_dm = suite_result.hypotheses
    assert h_planted.p_value <= 0.02 and h_planted.decision() == "reject H0 (decodable)"
    assert h_null.p_value > 0.05 and h_null.decision() == "do not reject H0"
    assert abs(null["sweep"]["best"]["test"] - 0.5) < 0.2
    assert h_dm.metric == "auroc" and h_dm.statistic > 0.9
    assert h_planted.site == Site.parse(planted["sweep"]["best"]["site"])
    # control task on token identity: the planted parity is a function of the control type,
    # so selectivity is small but the control accuracy is reported per site
    assert len(planted["selectivity"]) == len(planted["sweep"]["rows"]) == 3
    assert "ood" in planted["ood_gap_at_best"]
    assert planted["permutation"]["min_achievable_adjusted_p"] == pytest.approx(3 / 100)
    # 99 permutations, 3 sites: Holm can reach 0.03 < 0.05, so no permutation-floor warning
    assert not any("permutations" in w for w in planted.get("warnings", []))
    adj = np.array(planted["permutation"]["p_adjusted"])
    raw = np.array(planted["permutation"]["p_values"])
    assert np.all(adj >= raw - 1e-12)


def test_report_is_self_contained(suite_result, tmp_path):
    paths = write_report(suite_result, tmp_path / "rep")
    html = paths["html"].read_text()
    assert html.count("data:image/png;base64,") >= 4
    assert not re.search(r"<script[^>]+src=|<link[^>]+href=\"http", html)
    report = json.loads(paths["json"].read_text())
    assert report["versions"]["torch"] and report["versions"]["transformer-lens"].startswith("4.")
    assert report["model"]["compatibility_mode"] is False
    assert report["data"]["probe_device"] in ("cpu", "cuda")
    assert len(report["hypotheses"]) == 3
    assert json.loads(paths["config"].read_text())["name"] == "tiny"


def _write(tmp_path, text):
    path = tmp_path / "s.toml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "mutation, message",
    [
        (lambda s: s.replace("Cs = 3\ncv = 3\ncontrol", "Cs = 3\ncv = 3\ncontorl"), r"s.toml:\d+: \[probe\] contorl = .*unknown key \(did you mean 'control'\?\)|s.toml:\d+: \[probe\] contorl: unknown key \(did you mean 'control'\?\)"),
        (lambda s: s.replace("batch_size = 16", 'batch_size = "16"'), r"s.toml:19: \[capture\] batch_size = '16': expected an integer"),
        (lambda s: s.replace('padding_side = "left"', 'padding_side = "middle"'), r"must be one of \['left', 'right'\]"),
        (lambda s: s.replace('file = "data.jsonl"', 'file = "nope.jsonl"'), r"\[data\] file = 'nope.jsonl': .*nope.jsonl does not exist"),
        (lambda s: s.replace('[model]\ncheckpoint = "ckpt"', '[model]\ncheckpoint = "ckpt"\nname = "smollm2-135m"'), r"exactly one of name, checkpoint, train"),
        (lambda s: s.replace("[stats]", "[statz]"), r"unknown section; valid sections"),
        (lambda s: s.replace('label = "planted"\n', ""), r"missing required key\(s\) \['label'\]"),
        (lambda s: s.replace("[suite]\n", "[suite]\ndevice = \"gpu\"\n"), r"s.toml:\d+: \[suite\] device = 'gpu': use 'auto'"),
    ],
)
def test_invalid_suites_name_the_field_and_line(suite_dir, tmp_path, mutation, message):
    text = mutation(SUITE).replace('"ckpt"', f'"{suite_dir / "ckpt"}"').replace('"data.jsonl"', f'"{suite_dir / "data.jsonl"}"')
    with pytest.raises(SuiteError, match=message):
        load_suite(_write(tmp_path, text))


def test_unknown_split_lists_available(suite_dir, tmp_path):
    text = SUITE.replace('ood_splits = ["ood"]', 'ood_splits = ["oodd"]').replace('"ckpt"', f'"{suite_dir / "ckpt"}"').replace('"data.jsonl"', f'"{suite_dir / "data.jsonl"}"')
    with pytest.raises(SuiteError, match=r"split 'oodd' has no rows .* holds \['ood', 'test', 'train'\]"):
        run_suite(load_suite(_write(tmp_path, text)), progress=False)


def test_cli_report_and_one_line_errors(suite_dir, tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["report", str(suite_dir / "suite.toml"), "--out", str(out), "--quiet", "--device", "cpu"]) == 0
    assert (out / "report.html").is_file()
    assert json.loads((out / "report.json").read_text())["data"]["probe_device"] == "cpu"
    assert main(["report", str(tmp_path / "missing.toml"), "--out", str(tmp_path / "r2")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "suite file" in err[0] and "not found" in err[0]
    assert main(["report", str(suite_dir / "suite.toml"), "--out", str(tmp_path / "r3"), "--device", "tpu"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "unknown device 'tpu'" in err[0]


def test_correctness_probe_kind(suite_dir, tmp_path):
    text = SUITE.split("[[probe]]")[0].replace('label = "planted"', 'label = "planted"\nmax_new_tokens = 2')
    text = text.replace('"ckpt"', f'"{suite_dir / "ckpt"}"').replace('"data.jsonl"', f'"{suite_dir / "data.jsonl"}"')
    text += "[[correctness]]\ncv = 3\n\n[stats]\nn_permutations = 99\n"
    result = run_suite(load_suite(_write(tmp_path, text)), progress=False)
    (entry,) = [a.data for a in result.analyses if a.section == "correctness"]
    (hyp,) = result.hypotheses
    assert entry["sweep"]["metric"] == "auroc" and entry["n_correct"] + entry["n_incorrect"] == 150
    assert entry["sweep"]["best"]["cv_auroc"] > 0.9  # planted parity: diff-of-means recovers it
    assert "ood" in entry["ood_gap_at_best"]
    assert hyp.p_value <= 0.02
    write_report(result, tmp_path / "rep")  # the correctness layout renders too


def test_permutation_sites_best_matches_all(suite_dir, suite_result, tmp_path):
    text = SUITE.replace("n_permutations = 99", 'n_permutations = 99\npermutation_sites = "best"')
    text = text.replace('"ckpt"', f'"{suite_dir / "ckpt"}"').replace('"data.jsonl"', f'"{suite_dir / "data.jsonl"}"')
    best_only = run_suite(load_suite(_write(tmp_path, text)), progress=False)
    assert [h.p_value for h in best_only.hypotheses] == [h.p_value for h in suite_result.hypotheses]
    assert "permutation" not in best_only.probes[0]
    write_report(best_only, tmp_path / "rep")


def test_underpowered_permutation_family_warns(suite_dir, tmp_path):
    text = SUITE.replace("n_permutations = 99", "n_permutations = 20")
    text = text.replace('"ckpt"', f'"{suite_dir / "ckpt"}"').replace('"data.jsonl"', f'"{suite_dir / "data.jsonl"}"')
    result = run_suite(load_suite(_write(tmp_path, text)), progress=False)
    (warning,) = [w for w in result.probes[0]["warnings"] if "permutations" in w]
    assert "smallest achievable holm-adjusted p is 0.143 > alpha=0.05" in warning
    assert "n_permutations >= 60" in warning
    assert "Warning: with 20 permutations" in write_report(result, tmp_path / "r")["html"].read_text()
