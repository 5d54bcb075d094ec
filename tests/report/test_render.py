"""Reports as a reader sees them: each renders in headless Chromium with every image loaded and
nothing cut off. Screenshots go to ``$PROBEKIT_SCREENSHOTS`` (default: the test's tmp dir)."""

import os
from pathlib import Path

import pytest

from probekit.cli import main
from tests.conftest import write_tiny_suite
from tests.report.chromium import find_chromium, render_report

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.skipif(
    find_chromium() is None,
    reason="headless Chromium not installed (Debian: apt-get install chromium; `make test-all` "
    "names it)",
)

SUITE = """
[suite]
name = "tiny"
description = "planted vs null labels on a tiny random model"
[model]
checkpoint = "ckpt"
[data]
file = "data.jsonl"
label = "planted"
train_split = "train"
test_split = "test"
ood_splits = ["ood"]
control_column = "last"
[capture]
include_embed = true
batch_size = 16
[[probe]]
kind = "logistic"
Cs = 3
cv = 3
control = true
[[probe]]
kind = "diffmeans"
[stats]
n_permutations = 19
n_bootstrap = 1000
"""


def _shots(tmp_path: Path) -> Path:
    out = Path(os.environ.get("PROBEKIT_SCREENSHOTS", tmp_path))
    out.mkdir(parents=True, exist_ok=True)
    return out


def _check(report: Path, shot: Path) -> None:
    if "PROBEKIT_SCREENSHOTS" in os.environ:  # keep the page beside its screenshot
        shot.with_suffix(".html").write_text(report.read_text())
    result = render_report(report, shot)
    assert result["images"] >= 1 and result["broken"] == [], result
    assert result["clipped"] == [], result
    if result["screenshot"] is not None:  # None: timed out, warned (tests/report/chromium.py)
        assert shot.is_file() and shot.stat().st_size > 10_000


def test_tiny_report_renders(tmp_path):
    write_tiny_suite(tmp_path, SUITE, n=60, hi=8, n_id=48)
    assert main(["report", str(tmp_path / "suite.toml"), "--out", str(tmp_path / "out"), "--quiet"]) == 0
    _check(tmp_path / "out" / "report.html", _shots(tmp_path) / "tiny.png")


@pytest.mark.slow
@pytest.mark.parametrize("suite", sorted(p.name for p in (ROOT / "probes").glob("*.toml")
                                         if not p.name.startswith("diagnose_")))
def test_shipped_report_renders(suite, tmp_path):
    """Every shipped suite renders (diagnosis files are `probekit diagnose` inputs: their reports
    are rendered in tests/diagnosis/test_cli.py and test_he_study.py)."""
    out = tmp_path / "out"
    assert main(["report", str(ROOT / "probes" / suite), "--out", str(out), "--quiet"]) == 0
    _check(out / "report.html", _shots(tmp_path) / f"{Path(suite).stem}.png")
