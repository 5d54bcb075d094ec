"""The layer table of docs/architecture.md, as import-linter contracts (``pyproject.toml``).

``lint-imports`` checks every import statement of probekit (function-level imports included;
``TYPE_CHECKING`` imports only for the contracts of type ``forbidden_annotated``,
``scripts/import_contracts.py``) against the contracts; this test runs it on the source tree,
and on a copy with one planted violation per contract, which must fail each of them.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

pytest.importorskip("importlinter")

ROOT = Path(__file__).resolve().parents[1]
LINT = Path(sys.executable).with_name("lint-imports")


def _lint(root: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(root)}  # this tree's probekit, not an installed one
    return subprocess.run([str(LINT), "--no-cache", "--no-logo"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=120)


def _contracts() -> list[dict]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]


def test_the_source_keeps_every_contract():
    out = _lint(ROOT)
    assert out.returncode == 0, out.stdout + out.stderr
    names = [c["name"] for c in _contracts()]
    for name in names:
        assert re.search(rf"^{re.escape(name)} KEPT", out.stdout, re.M), name
    assert f"Contracts: {len(names)} kept, 0 broken." in out.stdout


# (file, line appended to it, what lint-imports must then say): one violation per contract
PLANTED = [
    ("models/config.py", "from ..capture import runner", "probekit.models is not allowed to import probekit.capture"),
    ("suites/spec.py", "from ..executors import ray", "probekit.suites is not allowed to import probekit.executors"),
    ("store/reader.py", "from ..capture import collect", "probekit.store is not allowed to import probekit.capture"),
    ("probes/sweep.py", "from ..geometry import capacity", "probekit.probes is not allowed to import probekit.geometry"),
    ("circuits/lens.py", "from ..testbeds import registry",
     "probekit.circuits is not allowed to import probekit.testbeds"),
    ("grokking/fourier.py", "from ..kg import entities", "probekit.grokking is not allowed to import probekit.kg"),
    ("circuits/metrics.py", "from ..grokking import fourier",
     "probekit.circuits is not allowed to import probekit.grokking"),
    ("report/blocks.py", "from ..models import loading", "probekit.report is not allowed to import probekit.models"),
    ("stats/bootstrap.py", "from ..util import io", "probekit.stats is not allowed to import probekit.util"),
    ("optim/lbfgs.py", "from ..util import io", "probekit.optim is not allowed to import probekit.util"),
    ("train/population.py", "from . import cli", "Illegal imports of protected package probekit.train.cli"),
    ("capture/runner.py", "import ray", "probekit is not allowed to import ray"),
    ("store/manifest.py", "from . import writer", "No cycles are allowed in probekit.store"),
    ("train/trainer.py", "from ..homomorphism import regulariser",
     "probekit.train.trainer is not allowed to import probekit.homomorphism"),
    ("hypotheses/kinds/logit_lens_rank.py", "from ...suites.analyses import patching",
     "probekit.hypotheses.kinds is not allowed to import probekit.suites.analyses"),
    ("suites/analyses/geometry.py", "from . import neurons",
     "probekit.suites.analyses.geometry is not allowed to import probekit.suites.analyses.neurons"),
    # an annotation-only import: the statistics contract sees it (the shared graph does not)
    ("diagnosis/statistics/inference.py",
     "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from ..spec import DiagnosisFile",
     "probekit.diagnosis.statistics is not allowed to import probekit.diagnosis.spec"),
    ("hypotheses/kinds/attribution_patching.py", "from . import patching_effect",
     "probekit.hypotheses.kinds.attribution_patching is not allowed to import "
     "probekit.hypotheses.kinds.patching_effect"),
    ("context.py", "if TYPE_CHECKING:\n    from .suites.spec import Suite",   # annotation-only
     "probekit.context is not allowed to import probekit.suites"),
]


def test_a_copy_with_planted_violations_breaks_each_contract(tmp_path):
    pkg = tmp_path / "probekit"
    shutil.copytree(ROOT / "probekit", pkg, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "scripts").mkdir()  # the contract type that keeps annotation-only imports
    for name in ("__init__.py", "import_contracts.py"):
        shutil.copy(ROOT / "scripts" / name, tmp_path / "scripts" / name)
    for rel, line, _ in PLANTED:
        with (pkg / rel).open("a") as f:
            f.write(f"\n{line}  # planted\n")
    # diagnosis (an optional layer until the package lands) may import what is below it; nothing
    # below may import it
    (pkg / "diagnosis").mkdir(exist_ok=True)
    if not (pkg / "diagnosis" / "__init__.py").exists():
        (pkg / "diagnosis" / "__init__.py").write_text('"""Planted."""\n')
    (pkg / "diagnosis" / "planted_ok.py").write_text(
        "from ..hypotheses import verdict\nfrom ..suites import spec\nfrom ..train import population\n")
    with (pkg / "suites" / "run.py").open("a") as f:
        f.write("\nfrom ..diagnosis import planted_ok  # planted\n")
    (pkg / "newpkg").mkdir()  # a subpackage without a layer: the table must name every module
    (pkg / "newpkg" / "__init__.py").write_text('"""Not in the layer table."""\n')
    out = _lint(tmp_path)
    assert out.returncode == 1, out.stdout + out.stderr
    text = " ".join((out.stdout + out.stderr).split())
    for _, _, message in PLANTED:
        assert message in text, message
    assert "probekit.newpkg" in text
    assert "probekit.suites is not allowed to import probekit.diagnosis" in text
    assert "probekit.diagnosis is not allowed" not in text
    broken = {c["name"] for c in _contracts() if f"{c['name']} BROKEN" in out.stdout}
    assert broken == {c["name"] for c in _contracts()}  # every contract catches its own plant


def test_the_architecture_table_names_every_layer():
    """Each module of the layers contract has its row in docs/architecture.md, in that order."""
    layers = next(c for c in _contracts() if c["type"] == "layers")["layers"]
    table = (ROOT / "docs" / "architecture.md").read_text().split("## Layers", 1)[1].split("\n## ", 1)[0]
    rows = [r for r in table.splitlines() if r.startswith("| ") and not r.startswith("| layer")]
    firsts = [r.split("|")[1] for r in rows]
    position = []
    for layer in layers:
        for module in re.split(r"[|:]", layer.strip("()")):
            module = module.strip()
            hits = [i for i, first in enumerate(firsts) if re.search(rf"`{module}`", first)]
            assert hits, f"no row of the architecture table names `{module}`"
            position.append(hits[0])
    assert position == sorted(position), "the table lists the layers in the contract's order"
