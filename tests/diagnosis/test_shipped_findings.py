"""docs/diagnosis/FINDINGS.md is what scripts/diagnosis_findings.py writes from the shipped outputs.

The README and docs/diagnosis.md quote that page; a rerun of a shipped population
(scripts/rerun_shipped_diagnoses.sh) that moves a figure fails here until the page is
regenerated, and the quoted figures are checked against it below.
"""

import re
from pathlib import Path

from scripts.diagnosis_findings import PAGE, POPULATIONS, render

ROOT = Path(__file__).resolve().parents[2]


def test_findings_page_is_up_to_date():
    assert PAGE.read_text() == render(), "run: python scripts/diagnosis_findings.py"


def test_every_shipped_population_has_a_section_with_its_calibration():
    text = PAGE.read_text()
    for folder, _toml, _description, _cpu in POPULATIONS:
        section = text.split(f"## `{folder}`\n", 1)[1].split("\n## ", 1)[0]
        assert "Calibration: With " in section, folder
        assert re.search(r"\| `\w+` \| (adds_beyond_covariates|partial_association|"
                         r"explained_by_covariates|no_association|inconclusive) \|", section), folder


def test_the_rows_quote_the_report_records():
    # one exact row, by hand from docs/diagnosis/he_noise/report.json
    import json

    rec = next(m for m in json.loads((ROOT / "docs/diagnosis/he_noise/report.json").read_text())
               ["diagnosis"]["analysis"]["markers"] if m["marker"] == "modifier_he")
    row = next(line for line in PAGE.read_text().splitlines()
               if line.startswith("| `modifier_he` | "))
    assert f"{rec['partial_r']:.2f} [{rec['partial_low']:.2f}, {rec['partial_high']:.2f}]" in row
    assert f"| {rec['mde_partial_r']:.2f} |" in row
    assert rec["verdict"] in row
