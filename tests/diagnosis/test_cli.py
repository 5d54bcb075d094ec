"""``probekit diagnose`` on the shipped smoke population (trained on demand), --check, errors."""

from __future__ import annotations

import csv
import json
import time
from pathlib import Path

import pytest
import torch

from probekit.cli import main
from probekit.diagnosis.statistics.verdicts import VERDICTS

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "probes" / "diagnose_modadd_smoke.toml"


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """The smoke diagnosis run once through the CLI into a fresh cache (trains 12 tiny runs)."""
    root = tmp_path_factory.mktemp("diagnose_smoke")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny GEMMs on a shared 2-core box: one thread is fastest
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PROBEKIT_CACHE", str(root / "cache"))
        start = time.perf_counter()
        code = main(["diagnose", str(SMOKE), "--out", str(root / "out"), "--quiet"])
        seconds = time.perf_counter() - start
        start = time.perf_counter()
        again = main(["diagnose", str(SMOKE), "--out", str(root / "again"), "--quiet"])
        rerun = time.perf_counter() - start
    torch.set_num_threads(threads)
    return {"root": root, "out": root / "out", "code": code, "again": again, "seconds": seconds,
            "rerun": rerun}


def test_smoke_population_runs_end_to_end(smoke):
    out = smoke["out"]
    assert smoke["code"] == 0
    for name in ("markers.csv", "markers.json", "report.html", "report.json"):
        assert (out / name).is_file(), name
    with open(out / "markers.csv") as fh:
        rows = list(csv.DictReader(fh))
    assert len(rows) == 24  # 12 runs x (the checkpoint at step 30 and the final one at 120)
    assert sum(r["final"] == "1" for r in rows) == 12
    assert sorted({r["step"] for r in rows}) == ["120", "30"]
    design = {(r["train.weight_decay"], r["task.train_fraction"], r["seed"]) for r in rows}
    assert len(design) == 12
    for col in ("preset", "train_accuracy", "train_loss", "id_accuracy", "fourier_gini",
                "weight_norm", "restricted_loss", "probe_accuracy", "final_id_accuracy"):
        assert col in rows[0], col
        assert all(r[col] != "" for r in rows), col  # every marker applies to modular addition
    finals = [r for r in rows if r["final"] == "1"]
    # the model's held-out accuracy grows with the train fraction in this grid
    by_frac = {f: [float(r["id_accuracy"]) for r in finals if r["task.train_fraction"] == f]
               for f in ("0.4", "0.7")}
    assert min(by_frac["0.7"]) > max(by_frac["0.4"])


def test_report_has_the_ranking_table_and_one_sentence_per_marker(smoke):
    report = json.loads((smoke["out"] / "report.json").read_text())
    blocks = report["analyses"][-1]["blocks"]
    ranking = [b for b in blocks if b["block"] == "table" and b["title"].startswith("Markers vs id_accuracy")]
    assert len(ranking) == 1
    assert {r["marker"] for r in ranking[0]["rows"]} == {"fourier_gini", "weight_norm",
                                                         "restricted_loss", "probe_accuracy"}
    assert all(r["verdict"] in VERDICTS for r in ranking[0]["rows"])
    sentences = report["diagnosis"]["analysis"]["sentences"]
    assert set(sentences) == {"fourier_gini", "weight_norm", "restricted_loss", "probe_accuracy"}
    assert report["diagnosis"]["early_warning"]["steps"] == [30, 120]
    assert report["diagnosis"]["settings"]["groups"] == "seed"
    html = (smoke["out"] / "report.html").read_text()
    assert "Markers vs id_accuracy" in html and "partial r" in html
    # the header counts models, not "examples"; the answer (one line per marker + the forest
    # plot) comes first, then the Population section (= the grid), then the details
    assert "12 final checkpoints, 12 series checkpoints" in html and "24 examples" not in html
    assert [a["section"] for a in report["analyses"]] == ["answer", "population", "diagnosis"]
    design = {r["what"]: (r["value"], r["n"]) for r in report["analyses"][1]["blocks"][0]["rows"]}
    assert design["models analysed"] == ("4 knob cells x 3 seeds", 12)
    assert design["series checkpoints (early warning)"] == ("steps 30", 12)
    assert design["training"][0].endswith("120 steps")


def test_rerun_trains_nothing_and_measures_nothing(smoke):
    assert smoke["again"] == 0
    report = json.loads((smoke["root"] / "again" / "report.json").read_text())
    assert report["provenance"]["checkpoint_tasks"] == 0
    assert (smoke["root"] / "again" / "markers.csv").read_text() == \
        (smoke["out"] / "markers.csv").read_text()
    assert smoke["rerun"] < smoke["seconds"] / 3


def test_report_renders_in_chromium(smoke, tmp_path):
    from tests.report.chromium import find_chromium, render_report

    if find_chromium() is None:
        pytest.skip("headless Chromium not installed")
    result = render_report(smoke["out"] / "report.html", tmp_path / "diagnose.png")
    # every plot inline SVG (the early-warning curves too): no image file, nothing broken
    assert result["images"] == 0 and result["svgs"] >= 3 and result["broken"] == [], result
    assert result["clipped"] == [], result


def test_check_validates_without_training(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PROBEKIT_CACHE", str(tmp_path / "cache"))
    assert main(["diagnose", str(SMOKE), "--check"]) == 0
    out = capsys.readouterr().out
    assert "diagnosis file is valid" in out and "grid of 12 runs" in out
    assert not (tmp_path / "cache").exists()  # nothing trained, nothing cached


def test_errors_are_one_line_exit_2(tmp_path, capsys):
    bad = tmp_path / "bad.toml"
    bad.write_text(SMOKE.read_text().replace('"train.weight_decay" = [0.1, 1.0]',
                                             '"train.weight_decy" = [0.1, 1.0]'))
    assert main(["diagnose", str(bad), "--check"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "has no field 'weight_decy'" in err[0] and "bad.toml:" in err[0]
    assert main(["diagnose", str(tmp_path / "missing.toml")]) == 2
    assert "missing.toml not found" in capsys.readouterr().err
    assert main(["diagnose", str(SMOKE), "--check", "--executor", "nope"]) == 2
    assert "must be one of" in capsys.readouterr().err


@pytest.mark.parametrize("name", [
    "diagnose_modadd.toml",
    # builds the SCAN splits of each of the 6 noise levels: ~1 min on a loaded 2-core box
    pytest.param("diagnose_scan_noise.toml", marks=pytest.mark.slow),
    # ~25 CPU-s each (the SCAN splits of every run); default tier: test_shipped_scan_suites.py
    pytest.param("diagnose_scan_coverage.toml", marks=pytest.mark.slow),
    pytest.param("diagnose_scan_depth.toml", marks=pytest.mark.slow),
])
def test_shipped_full_populations_pass_check(name, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PROBEKIT_CACHE", str(tmp_path / "cache"))
    assert main(["diagnose", str(ROOT / "probes" / name), "--check"]) == 0
    assert "diagnosis file is valid" in capsys.readouterr().out
