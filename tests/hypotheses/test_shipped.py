"""The shipped hypothesis files: every claim PASSes on the model it describes (exit 0).

The FAIL path (verdict FAIL, exit 1) is checked on a copy of a shipped file with one claim's
comparison flipped.
"""

import json
from pathlib import Path

import pytest

from probekit.cli import main

ROOT = Path(__file__).resolve().parents[2]


def test_modadd_fourier_verdicts_and_report(tmp_path, capsys):
    code = main(["test", str(ROOT / "circuits" / "modadd_fourier.toml"), "--out", str(tmp_path),
                 "--quiet"])
    assert code == 0  # every claim passes
    out = capsys.readouterr().out
    report = json.loads((tmp_path / "report.json").read_text())
    verdicts = {c["name"]: c for c in report["claims"]}
    assert [c["verdict"] for c in report["claims"]] == ["PASS"] * 4
    neg = verdicts["the answer is not decodable at the embedding of '=' (chance 1/53)"]
    assert neg["ci"][1] < 0.1  # chance is 1/53: the CI lies entirely below the 0.1 bound
    logits = report["claims"][0]
    assert logits["effect"] > 0.9 and len(logits["details"]["key_frequencies"]) == 5
    assert report["passed"] is True and out.count("PASS") == 4 and "FAIL" not in out
    html = (tmp_path / "report.html").read_text()
    assert "INCONCLUSIVE" in html and "Fourier power of the logits" in html
    # one verdict table (Claims), not a second generic "Hypothesis tests" copy of it
    assert '<h2 id="claims">Claims</h2>' in html and "Hypothesis tests" not in html
    assert html.count('<table class="data">') == 1


def test_a_flipped_claim_fails_and_exits_1(tmp_path, capsys):
    """The shipped file with its last claim's comparison flipped: that claim FAILs, exit 1."""
    text = (ROOT / "circuits" / "modadd_fourier.toml").read_text()
    head, sep, last = text.rpartition("[[claim]]")
    assert 'compare = "<="' in last
    text = head + sep + last.replace('compare = "<="', 'compare = ">="')
    text = text.replace('"../probes/', f'"{ROOT / "probes"}/')  # the copy lives elsewhere
    (tmp_path / "flipped.toml").write_text(text)
    code = main(["test", str(tmp_path / "flipped.toml"), "--out", str(tmp_path / "o"), "--quiet"])
    assert code == 1
    report = json.loads((tmp_path / "o" / "report.json").read_text())
    assert [c["verdict"] for c in report["claims"]] == ["PASS", "PASS", "PASS", "FAIL"]
    assert report["claims"][3]["ci"][1] < 0.1 and report["passed"] is False
    out = capsys.readouterr().out
    assert out.count("PASS") == 3 and out.count("FAIL") == 1


@pytest.mark.slow
def test_smollm2_recall_subject_restores_and_last_token_does_not(tmp_path):
    from probekit.hypotheses import run

    res = run(ROOT / "circuits" / "smollm2_recall.toml", out=tmp_path)
    assert [c.verdict for c in res.claims] == ["PASS"] * 5
    assert res.claims[0].effect > 0.9 and res.claims[2].ci_high < 0.2
    assert res.claims[3].effect > 0.9 and res.claims[4].ci_high < 0.3  # early MLPs (window 0-7), not 8-15
    assert (tmp_path / "report.html").is_file()


def test_kg_bridge_verdicts(tmp_path, capsys):
    """Wang et al. 2024 on the shipped CPU-grokked KG-composition checkpoint: ID bridge mid-depth, OOD not."""
    code = main(["test", str(ROOT / "circuits" / "kg_bridge.toml"), "--out", str(tmp_path), "--quiet"])
    assert code == 0  # every claim passes, the OOD ones stated as the paper does ("not formed")
    report = json.loads((tmp_path / "report.json").read_text())
    claims = report["claims"]
    assert [c["verdict"] for c in claims] == ["PASS"] * 8
    assert [c["n"] for c in claims] == [180, 180, 99, 180, 180, 99, 99, 99]
    # measured once (scripts/kg_bridge_analysis.py, docs/kg_bridge/): exact rates on these queries
    assert abs(claims[0]["effect"] - 112 / 180) < 1e-9  # ID bridge top-1 after block 1
    assert abs(claims[6]["effect"] - 1 / 99) < 1e-9  # OOD bridge top-1 after block 1
    assert claims[4]["effect"] > 0.9 and claims[5]["ci"][1] < 0.2  # linear probe: ID vs OOD
    # the probe (probes.LogisticProbe since issue 43.3) scores exactly as the sklearn pipeline did
    assert abs(claims[4]["effect"] - 173 / 180) < 1e-9 and abs(claims[5]["effect"] - 4 / 99) < 1e-9
    ood, ident = claims[6]["details"], claims[0]["details"]
    assert ident["bridge_top_k_by_layer"][1] > 0.5 > ood["bridge_top_k_by_layer"][1] + 0.4
    assert ood["bridge_top_k_by_layer"][3] > 0.7  # the first hop itself is known at the top
    assert claims[7]["ci"][1] < 0.1  # OOD composition fails


def test_modadd_progress_file_is_valid():
    assert main(["test", "--check", str(ROOT / "circuits" / "modadd_progress.toml")]) == 0


@pytest.mark.slow  # trains the modular_addition_grokking preset into the cache on first use (~2.5 CPU-min)
def test_modadd_progress_restricted_loss_falls_before_test_loss(tmp_path):
    from probekit.hypotheses import run

    res = run(ROOT / "circuits" / "modadd_progress.toml", out=tmp_path)
    assert [c.verdict for c in res.claims] == ["PASS"] * 4
    lead = res.claims[0]
    details = lead.measurement.details
    assert lead.ci_low > 200 and details["restricted_step"] < details["test_step"]
    assert len(details["steps"]) == 41 and details["test_acc"][-1] > 0.99
    # circuit formation: the excluded loss rises while the training loss stays ~0
    mid = details["steps"].index(1000)
    assert details["train_loss"][mid] < 1e-3 and details["excluded_loss"][mid] > 5.0


@pytest.mark.slow  # about 1 CPU-minute: 600 held-out pairs under 5 op sets
def test_modadd_necessity_of_the_answer_directions(tmp_path):
    """The shipped necessity claim: the probe's 52 answer directions carry the answer, random ones do not."""
    code = main(["test", str(ROOT / "circuits" / "modadd_necessity.toml"), "--out", str(tmp_path),
                 "--quiet"])
    assert code == 0
    claims = json.loads((tmp_path / "report.json").read_text())["claims"]
    claim, freqs = claims[:2]
    assert freqs["verdict"] == "PASS" and freqs["details"]["key_frequencies"] == [2, 7, 12, 14, 20]
    assert freqs["details"]["ablated_accuracy"] < 0.03 and freqs["effect"] == pytest.approx(0.947, abs=0.01)
    d = claim["details"]
    assert claim["verdict"] == "PASS" and d["size"] == 52
    assert d["base_accuracy"] > 0.95 and d["ablated_accuracy"] < 0.2 and d["random_accuracy"] > 0.9
    assert claim["effect"] == pytest.approx(0.827, abs=0.01)  # the figure in the file's header
    assert d["train_drop"] > 0.5
    (steer,) = [c for c in claims if c["name"].startswith("steering the answer's probe directions")]
    s = steer["details"]
    assert steer["verdict"] == "PASS" and s["strength"] == 4.0 and s["steer_toward"] == 0
    assert s["ablated_accuracy"] < 0.05 and s["random_accuracy"] > 0.85  # random steps of the same norm
    assert steer["effect"] == pytest.approx(0.919, abs=0.01)  # the figure in the file's comment
