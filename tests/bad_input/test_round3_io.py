"""Bad input round 3 (issue 47 section 2), the I/O and command-line half: output folders, --check
depth, ``train --set``, locks, unbounded requests.

Each row of :data:`CASES` is one input a user can give: ``id``, ``surface`` (the command),
``input`` (what was given, in words), ``message`` (a fragment of the one error line) and
``setup`` (builds the input in a fresh folder holding a tiny checkpoint, its data and a valid
suite; returns the argv, and optionally an environment). The parametrized test runs
``probekit.cli.main`` in-process and asserts exit status 2, exactly one ``error:`` line holding
the fragment, no traceback, no model loaded, and that no file in the folder was created, changed
or removed (sha256 of every file before and after). ``scripts/bad_input_table.py`` renders the
rows into docs/reports.md.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from probekit.cli import main
from tests.conftest import write_tiny_suite

SUITE = """\
[suite]
name = "tiny"

[model]
checkpoint = "ckpt"

[data]
file = "data.jsonl"
label = "planted"
train_split = "train"
test_split = "test"

[capture]
sites = {sites}
positions = "{positions}"

[[probe]]
kind = "logistic"
Cs = 2
cv = {cv}

[stats]
n_permutations = {n_permutations}
n_bootstrap = {n_bootstrap}
"""

DEFAULTS = {"sites": '["resid_post@0"]', "positions": "last", "cv": 3, "n_permutations": 20,
            "n_bootstrap": 1000}


def suite(root: Path, name: str = "s.toml", **changes: Any) -> str:
    """Write the tiny suite with ``changes`` to ``root/name``; return its path."""
    (root / name).write_text(SUITE.format(**{**DEFAULTS, **changes}))
    return str(root / name)


def user_folder(root: Path, *names: str) -> str:
    """A folder of the user's own files (not probekit output)."""
    folder = root / "mine"
    folder.mkdir()
    for n in names:
        (folder / n).write_text(f"the user's own {n}\n")
    return str(folder)


def marked(root: Path, command: str, name: str) -> str:
    """A folder holding probekit output of ``command`` for ``name`` (its marker and report)."""
    folder = root / "out"
    folder.mkdir()
    (folder / ".probekit-output").write_text(json.dumps({"command": command, "name": name}))
    (folder / "report.json").write_text(json.dumps({"suite": {"name": name}}) + "\n")
    return str(folder)


def with_positions(root: Path) -> list[str]:
    """Data whose ``pos`` column points beyond row 5's tokens."""
    rows = [json.loads(line) for line in (root / "data.jsonl").read_text().splitlines()]
    for i, row in enumerate(rows):
        row["pos"] = 40 if i == 5 else 0
    (root / "data.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return ["report", suite(root, positions="column:pos"), "--check"]


def held_lock(root: Path, command: str = "report") -> list[str]:
    """``--out`` of a second report (diagnosis) while a first one holds the folder's lock."""
    from probekit.util.lock import DirectoryLock

    out = marked(root, command, "tiny" if command == "report" else "d")
    lock = DirectoryLock(out, what="output folder")
    lock.acquire()
    _HELD.append(lock)  # released by the test
    if command == "report":
        return ["report", suite(root), "--out", out, "--quiet"]
    return ["diagnose", _diagnosis(root, "n_permutations = 200", "n_permutations = 200"), "--out",
            out, "--quiet"]


_HELD: list[Any] = []

Setup = Callable[[Path], Any]

#: one row per bad input (id, surface, input, message, setup)
CASES: list[dict[str, Any]] = [
    # ---- user files are never overwritten
    {"id": "train-out-user-folder", "surface": "probekit train",
     "input": "--out DIR where DIR is the user's folder holding run.json and history.csv",
     "message": "is not empty and was not written by probekit (it holds history.csv, run.json)",
     "setup": lambda r: ["train", "modular_addition", "--out",
                         user_folder(r, "run.json", "history.csv"), "--steps", "2"]},
    {"id": "report-out-user-folder", "surface": "probekit report",
     "input": "--out DIR holding the user's own files",
     "message": "pass --force to write into it",
     "setup": lambda r: ["report", suite(r), "--out", user_folder(r, "notes.txt", "report.html")]},
    {"id": "report-out-other-suite", "surface": "probekit report",
     "input": "--out DIR holding the report of another suite",
     "message": "holds the output of `probekit report` of 'other'; pass --force to replace it",
     "setup": lambda r: ["report", suite(r), "--out", marked(r, "report", "other")]},
    {"id": "report-out-legacy-other-suite", "surface": "probekit report",
     "input": "--out DIR holding another suite's report.json written before the marker existed",
     "message": "holds the output of `probekit report` of 'other'",
     "setup": lambda r: ["report", suite(r), "--out", _legacy_report(r, "other")]},
    {"id": "diagnose-out-report", "surface": "probekit diagnose",
     "input": "--out DIR holding a report of `probekit report`",
     "message": "holds the output of `probekit report` of 'tiny'",
     "setup": lambda r: ["diagnose", suite(r, "d.toml"), "--out", marked(r, "report", "tiny")]},
    # ---- output paths checked before any work
    {"id": "capture-out-file", "surface": "probekit capture",
     "input": "--out that is an existing regular file",
     "message": "is an existing file, not a folder",
     "setup": lambda r: ["capture", str(r / "ckpt"), str(r / "data.jsonl"), "--out",
                         str(r / "ckpt" / "config.json")]},
    {"id": "capture-out-is-input", "surface": "probekit capture",
     "input": "--out that is the input data file itself",
     "message": "is the input file itself",
     "setup": lambda r: ["capture", str(r / "ckpt"), str(r / "data.jsonl"), "--out", str(r / "data.jsonl")]},
    {"id": "capture-out-read-only", "surface": "probekit capture",
     "input": "--out inside a directory that cannot be written (/proc)",
     "message": "cannot write in /proc",
     "setup": lambda r: ["capture", str(r / "ckpt"), str(r / "data.jsonl"), "--out", "/proc/probekit-out/s"]},
    {"id": "train-out-file", "surface": "probekit train", "input": "--out that is a regular file",
     "message": "is an existing file, not a folder",
     "setup": lambda r: ["train", "modular_addition", "--out", str(r / "data.jsonl")]},
    {"id": "train-out-read-only", "surface": "probekit train",
     "input": "--out inside a read-only directory", "message": "cannot write in /proc",
     "setup": lambda r: ["train", "modular_addition", "--out", "/proc/probekit-run"]},
    {"id": "report-out-is-suite", "surface": "probekit report",
     "input": "--out that is the suite file itself", "message": "is the input file itself",
     "setup": lambda r: ["report", suite(r), "--out", str(r / "s.toml")]},
    {"id": "report-out-file", "surface": "probekit report", "input": "--out that is a regular file",
     "message": "is an existing file, not a folder",
     "setup": lambda r: ["report", suite(r), "--out", str(r / "data.jsonl")]},
    {"id": "report-out-read-only", "surface": "probekit report",
     "input": "--out inside a read-only directory", "message": "cannot write in /proc",
     "setup": lambda r: ["report", suite(r), "--out", "/proc/probekit-report"]},
    {"id": "report-check-out-file", "surface": "probekit report --check",
     "input": "--check with an --out that is a regular file",
     "message": "is an existing file, not a folder",
     "setup": lambda r: ["report", suite(r), "--check", "--out", str(r / "data.jsonl")]},
    {"id": "test-out-file", "surface": "probekit test", "input": "--out that is a regular file",
     "message": "is an existing file, not a folder",
     "setup": lambda r: ["test", _claims(r), "--out", str(r / "data.jsonl")]},
    {"id": "test-out-is-input", "surface": "probekit test",
     "input": "--out that is the claim file itself", "message": "is the input file itself",
     "setup": lambda r: ["test", _claims(r), "--out", str(r / "c.toml")]},
    {"id": "test-out-read-only", "surface": "probekit test",
     "input": "--out inside a read-only directory", "message": "cannot write in /proc",
     "setup": lambda r: ["test", _claims(r), "--out", "/proc/probekit-test"]},
    {"id": "diagnose-out-file", "surface": "probekit diagnose",
     "input": "--out that is a regular file", "message": "is an existing file, not a folder",
     "setup": lambda r: ["diagnose", suite(r, "d.toml"), "--out", str(r / "data.jsonl")]},
    {"id": "diagnose-out-is-input", "surface": "probekit diagnose",
     "input": "--out that is the diagnosis file itself", "message": "is the input file itself",
     "setup": lambda r: ["diagnose", suite(r, "d.toml"), "--out", str(r / "d.toml")]},
    {"id": "diagnose-out-read-only", "surface": "probekit diagnose",
     "input": "--out inside a read-only directory", "message": "cannot write in /proc",
     "setup": lambda r: ["diagnose", suite(r, "d.toml"), "--out", "/proc/probekit-diagnose"]},
    {"id": "patch-out-user-folder", "surface": "probekit patch",
     "input": "--out DIR holding the user's own report.html",
     "message": "is not empty and was not written by probekit (it holds notes.txt, report.html)",
     "setup": lambda r: ["patch", str(r / "ckpt"), str(r / "data.jsonl"), "--out",
                         user_folder(r, "notes.txt", "report.html")]},
    {"id": "patch-out-other-report", "surface": "probekit patch",
     "input": "--out DIR holding the report of a suite",
     "message": "holds the output of `probekit report` of 'tiny'; pass --force to replace it",
     "setup": lambda r: ["patch", str(r / "ckpt"), str(r / "data.jsonl"), "--out",
                         marked(r, "report", "tiny")]},
    {"id": "patch-out-file", "surface": "probekit patch", "input": "--out that is a regular file",
     "message": "is an existing file, not a folder",
     "setup": lambda r: ["patch", str(r / "ckpt"), str(r / "data.jsonl"), "--out",
                         str(r / "ckpt" / "config.json")]},
    {"id": "patch-out-is-input", "surface": "probekit patch",
     "input": "--out that is the pairs file itself", "message": "is the input file itself",
     "setup": lambda r: ["patch", str(r / "ckpt"), str(r / "data.jsonl"), "--out",
                         str(r / "data.jsonl")]},
    {"id": "patch-out-read-only", "surface": "probekit patch",
     "input": "--out inside a read-only directory", "message": "cannot write in /proc",
     "setup": lambda r: ["patch", str(r / "ckpt"), str(r / "data.jsonl"), "--out", "/proc/probekit-patch"]},
    {"id": "demo-out-user-folder", "surface": "probekit demo",
     "input": "--out DIR holding the user's own files",
     "message": "pass --force to write into it",
     "setup": lambda r: ["demo", "--out", user_folder(r, "report.json")]},
    {"id": "examples-copy-file", "surface": "probekit examples copy",
     "input": "DIR that is a regular file", "message": "examples copy DIR",
     "setup": lambda r: ["examples", "copy", "all", str(r / "data.jsonl")]},
    {"id": "examples-copy-read-only", "surface": "probekit examples copy",
     "input": "DIR inside a read-only directory", "message": "cannot write in /proc",
     "setup": lambda r: ["examples", "copy", "all", "/proc/probekit-examples"]},
    # ---- --check runs every validation of the run
    {"id": "check-duplicate-site", "surface": "probekit report --check",
     "input": 'sites = ["resid_post@0", "resid_post@0"]',
     "message": "s.toml:14: [capture] sites: 'resid_post@0' is given twice",
     "setup": lambda r: ["report", suite(r, sites='["resid_post@0", "resid_post@0"]'), "--check"]},
    {"id": "check-same-site-two-spellings", "surface": "probekit report --check",
     "input": 'sites = ["resid_post@0", "blocks.0.hook_resid_post"]',
     "message": "is the same site as 'resid_post@0'",
     "setup": lambda r: ["report", suite(r, sites='["resid_post@0", "blocks.0.hook_resid_post"]'),
                         "--check"]},
    {"id": "check-misspelt-kind", "surface": "probekit report --check",
     "input": 'sites = ["mlp_psot@0"]',
     "message": "s.toml:14: [capture] sites: 'mlp_psot@0': unknown site kind 'mlp_psot'",
     "setup": lambda r: ["report", suite(r, sites='["mlp_psot@0"]'), "--check"]},
    {"id": "check-cv-0", "surface": "probekit report --check", "input": "[[probe]] cv = 0",
     "message": "s.toml:20: [probe] cv = 0: must be >= 2",
     "setup": lambda r: ["report", suite(r, cv=0), "--check"]},
    {"id": "check-checkpoint-file", "surface": "probekit report --check",
     "input": "[model] checkpoint naming a file",
     "message": "s.toml:5: [model] checkpoint = 'data.jsonl'",
     "setup": lambda r: ["report", _checkpoint_file(r), "--check"]},
    {"id": "check-column-position", "surface": "probekit report --check",
     "input": "positions = \"column:pos\" with a position beyond the prompt length",
     "message": "data.jsonl:6:",
     "setup": with_positions},
    {"id": "check-n-permutations-1e9", "surface": "probekit report --check",
     "input": "[stats] n_permutations = 1000000000",
     "message": "n_permutations = 1000000000: must be <= 100000",
     "setup": lambda r: ["report", suite(r, n_permutations=1_000_000_000), "--check"]},
    {"id": "check-n-bootstrap-1e9", "surface": "probekit report --check",
     "input": "[stats] n_bootstrap = 1000000000",
     "message": "n_bootstrap = 1000000000: must be <= 100000",
     "setup": lambda r: ["report", suite(r, n_bootstrap=1_000_000_000), "--check"]},
    {"id": "diagnose-check-n-permutations-1e9", "surface": "probekit diagnose --check",
     "input": "[diagnosis] n_permutations = 1000000000",
     "message": "n_permutations = 1000000000: must be <= 100000",
     "setup": lambda r: ["diagnose", _diagnosis(r, "n_permutations = 200", "n_permutations = 1000000000"),
                         "--check"]},
    {"id": "diagnose-check-n-bootstrap-1e9", "surface": "probekit diagnose --check",
     "input": "[diagnosis] n_bootstrap = 1000000000",
     "message": "n_bootstrap = 1000000000: must be <= 100000",
     "setup": lambda r: ["diagnose", _diagnosis(r, "\nn_bootstrap = 1000\n", "\nn_bootstrap = 1000000000\n",
                                                last=True), "--check"]},
    {"id": "diagnose-check-max-permutations-1e9", "surface": "probekit diagnose --check",
     "input": "[diagnosis] max_permutations = 1000000000",
     "message": "max_permutations = 1000000000: must be <= 100000 (p resolved to 1e-5; more only costs time)",
     "setup": lambda r: ["diagnose", _diagnosis(r, "calibration_simulations = 40",
                                                "calibration_simulations = 40\nmax_permutations = 1000000000"),
                         "--check"]},
    {"id": "diagnose-check-calibration-1e9", "surface": "probekit diagnose --check",
     "input": "[diagnosis] calibration_simulations = 1000000000",
     "message": "calibration_simulations = 1000000000: must be in [0, 10000] (0 leaves the calibration out)",
     "setup": lambda r: ["diagnose", _diagnosis(r, "calibration_simulations = 40",
                                                "calibration_simulations = 1000000000"), "--check"]},
    # ---- train --set goes through the configs' rules
    {"id": "train-set-float-p", "surface": "probekit train", "input": "--set task.p=23.0",
     "message": "--set task.p=23.0: ModularAdditionConfig.p must be an int, got 23.0",
     "setup": lambda r: ["train", "modular_addition", "--out", str(r / "run"), "--set", "task.p=23.0"]},
    {"id": "train-set-fraction", "surface": "probekit train", "input": "--set train_fraction=1.5",
     "message": "--set train_fraction=1.5: ModularAdditionConfig.train_fraction must be in (0, 1), got 1.5",
     "setup": lambda r: ["train", "modular_addition", "--out", str(r / "run"),
                         "--set", "train_fraction=1.5"]},
    {"id": "train-seed-negative", "surface": "probekit train", "input": "--seed -1",
     "message": "--seed -1: a seed must be in [0, 4294967296); e.g. --seed 0",
     "setup": lambda r: ["train", "modular_addition", "--out", str(r / "run"), "--seed", "-1"]},
    {"id": "train-set-lr-inf", "surface": "probekit train", "input": "--set train.lr=1e400 (inf)",
     "message": "--set train.lr=1e400: TrainConfig.lr must be a finite number, got inf",
     "setup": lambda r: ["train", "modular_addition", "--out", str(r / "run"),
                         "--set", "train.lr=1e400"]},
    {"id": "train-set-lr-nan", "surface": "probekit train", "input": "--set train.lr=NaN",
     "message": "--set train.lr=NaN: TrainConfig.lr must be a finite number, got nan",
     "setup": lambda r: ["train", "modular_addition", "--out", str(r / "run"), "--set", "train.lr=NaN"]},
    {"id": "train-set-batch-size-0", "surface": "probekit train", "input": "--set train.batch_size=0",
     "message": "--set train.batch_size=0: TrainConfig.batch_size must be >= 1 (or None for the full batch), got 0",
     "setup": lambda r: ["train", "modular_addition", "--out", str(r / "run"),
                         "--set", "train.batch_size=0"]},
    {"id": "train-set-n-layers-0", "surface": "probekit train", "input": "--set model.n_layers=0",
     "message": "--set model.n_layers=0: ModelConfig.n_layers must be >= 1, got 0",
     "setup": lambda r: ["train", "modular_addition", "--out", str(r / "run"),
                         "--set", "model.n_layers=0"]},
    {"id": "train-set-rotary-odd-head", "surface": "probekit train",
     "input": "--set model.positional_embedding_type=rotary --set model.d_head=3",
     "message": "--set model.d_head=3: ModelConfig.d_head=3: rotary embeddings rotate pairs of dimensions",
     "setup": lambda r: ["train", "modular_addition", "--out", str(r / "run"), "--set",
                         "model.positional_embedding_type=rotary", "--set", "model.d_head=3"]},
    {"id": "train-set-task-seed", "surface": "probekit train", "input": "--set task.seed=-1",
     "message": "--set task.seed=-1: ModularAdditionConfig.seed must be in [0, 4294967296), got -1",
     "setup": lambda r: ["train", "modular_addition", "--out", str(r / "run"), "--set", "task.seed=-1"]},
    {"id": "train-set-act-fn", "surface": "probekit train", "input": "--set model.act_fn=tanh",
     "message": "ModelConfig.act_fn must be one of ['relu', 'gelu', 'gelu_new', 'silu'], got 'tanh'",
     "setup": lambda r: ["train", "modular_addition", "--out", str(r / "run"), "--set", "model.act_fn=tanh"]},
    {"id": "diagnose-grid-fraction", "surface": "probekit diagnose --check",
     "input": "[population] grid train_fraction = [0.4, 1.5]",
     "message": "ModularAdditionConfig.train_fraction must be in (0, 1), got 1.5",
     "setup": lambda r: ["diagnose", _diagnosis(r, '"task.train_fraction" = [0.4, 0.7]',
                                                '"task.train_fraction" = [0.4, 1.5]'), "--check"]},
    {"id": "diagnose-grid-lr-inf", "surface": "probekit diagnose --check",
     "input": "[population] sets = [\"train.lr=1e400\"]",
     "message": "--set train.lr=1e400: TrainConfig.lr must be a finite number, got inf",
     "setup": lambda r: ["diagnose", _diagnosis(r, '"train.n_evals=10"]', '"train.n_evals=10", "train.lr=1e400"]'),
                         "--check"]},
    {"id": "train-set-lr-zero", "surface": "probekit train", "input": "--set train.lr=0",
     "message": "TrainConfig.lr must be > 0",
     "setup": lambda r: ["train", "modular_addition", "--out", str(r / "run"), "--set", "train.lr=0"]},
    # ---- locks, cache, repeated inputs, capture options
    {"id": "report-concurrent", "surface": "probekit report",
     "input": "a second report into an --out another run is writing",
     "message": "is being written by another process",
     "setup": held_lock},
    {"id": "diagnose-concurrent", "surface": "probekit diagnose",
     "input": "a second diagnosis into an --out another run is writing",
     "message": "is being written by another process",
     "setup": lambda r: held_lock(r, "diagnose")},
    {"id": "cache-is-file", "surface": "any command", "input": "PROBEKIT_CACHE naming a regular file",
     "message": "is a file, not a folder; point PROBEKIT_CACHE to a folder",
     "setup": lambda r: (["report", suite(r), "--check"], {"PROBEKIT_CACHE": str(r / "data.jsonl")})},
    {"id": "test-same-file-twice", "surface": "probekit test",
     "input": "the same claim file given twice with one --out",
     "message": "is given twice",
     "setup": lambda r: ["test", _claims(r), _claims(r), "--out", str(r / "o")]},
    {"id": "capture-repair-no-store", "surface": "probekit capture",
     "input": "--repair on a folder that holds no store",
     "message": "--repair: ", "setup": lambda r: ["capture", str(r / "ckpt"), str(r / "data.jsonl"),
                                                  "--out", str(r / "none"), "--repair"]},
    {"id": "capture-batch-size-0", "surface": "probekit capture", "input": "--batch-size 0",
     "message": "--batch-size 0: must be >= 1",
     "setup": lambda r: ["capture", str(r / "ckpt"), str(r / "data.jsonl"), "--out", str(r / "o"),
                         "--batch-size", "0"]},
]


def _diagnosis(root: Path, old: str, new: str, *, last: bool = False) -> str:
    """The shipped smoke diagnosis with ``old`` replaced by ``new`` (the last occurrence if ``last``)."""
    text = (Path(__file__).resolve().parents[2] / "probes" / "diagnose_modadd_smoke.toml").read_text()
    assert old in text
    head, sep, tail = text.rpartition(old) if last else text.partition(old)
    (root / "d.toml").write_text(head + new + tail)
    return str(root / "d.toml")


def _legacy_report(root: Path, name: str) -> str:
    folder = root / "old"
    folder.mkdir()
    (folder / "report.json").write_text(json.dumps({"suite": {"name": name}, "versions": {}}))
    (folder / "report.html").write_text("<html></html>\n")
    return str(folder)


def _checkpoint_file(root: Path) -> str:
    path = Path(suite(root))
    path.write_text(path.read_text().replace('checkpoint = "ckpt"', 'checkpoint = "data.jsonl"'))
    return str(path)


def _claims(root: Path) -> str:
    path = root / "c.toml"
    if not path.exists():
        path.write_text(Path(suite(root, "tmp.toml")).read_text())
        (root / "tmp.toml").unlink()
    return str(path)


def tree(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` by relative path."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A tiny checkpoint and its data (copied into each case's folder)."""
    return write_tiny_suite(tmp_path_factory.mktemp("tiny"), "", n=60, n_id=60)


@pytest.fixture
def no_model_load(monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the input was validated")

    monkeypatch.setattr("probekit.models.loading.load_model", refuse)
    monkeypatch.setattr("probekit.suites.run.run_suite", refuse)
    monkeypatch.setattr("probekit.diagnosis.runner.diagnose", refuse)


def test_cases_have_the_table_keys():
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids))
    for case in CASES:
        assert {"id", "surface", "input", "message"} <= set(case), case["id"]


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_bad_io_input(case, template, tmp_path, capsys, monkeypatch, no_model_load):
    root = tmp_path / "w"
    shutil.copytree(template, root)
    (root / "suite.toml").unlink()
    made = case["setup"](root)
    argv, env = made if isinstance(made, tuple) else (made, {})
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("PROBEKIT_DEBUG", raising=False)
    before = tree(root)
    try:
        code = main(argv)
    finally:
        while _HELD:
            _HELD.pop().release()
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert code == 2 and len(lines) == 1, err
    assert case["message"] in lines[0], lines[0]
    after = tree(root)
    after.pop("out/.probekit.lock.json", None)  # the lock holder's own record (held_lock)
    before.pop("out/.probekit.lock.json", None)
    assert after == before, "a file was created, changed or removed"
    assert not Path("/proc/probekit-out").exists()


# ------------------------------------------------------------------ what is accepted


def test_own_output_is_reused_and_force_writes_into_a_user_folder(template, tmp_path, capsys,
                                                                   monkeypatch):
    """A rerun into probekit's own folder passes the check; --force passes a foreign one."""
    from probekit.util.outdir import check_out_dir, claim_out_dir, read_marker

    out = tmp_path / "o"
    with claim_out_dir(out, command="report", name="tiny") as folder:
        (folder / "report.json").write_text("{}")
    assert read_marker(out) == {"command": "report", "name": "tiny"}
    assert check_out_dir(out, command="report", name="tiny") == out.resolve()
    assert not (out / ".probekit.lock.json").exists()  # released
    mine = Path(user_folder(tmp_path, "run.json"))
    assert check_out_dir(mine, command="train", force=True) == mine.resolve()


def test_a_failed_run_leaves_no_folder(tmp_path):
    from probekit.util.outdir import claim_out_dir

    out = tmp_path / "new"
    with pytest.raises(RuntimeError), claim_out_dir(out, command="report", name="x"):
        raise RuntimeError("the run failed")
    assert not out.exists()


def test_examples_per_shard_rounding_is_announced(template, tmp_path, capsys):
    root = tmp_path / "w"
    shutil.copytree(template, root)
    code = main(["capture", str(root / "ckpt"), str(root / "data.jsonl"), "--out", str(root / "st"),
                 "--sites", "resid_post@0", "--batch-size", "32", "--examples-per-shard", "8",
                 "--quiet"])
    err = capsys.readouterr().err
    assert code == 0, err
    assert "--examples-per-shard 8 is rounded up to 32" in err
    manifest = json.loads((root / "st" / "manifest.json").read_text())
    assert manifest["examples_per_shard"] == 32


def test_capture_to_store_refuses_a_file(small_model, tmp_path):
    from probekit.capture import capture_to_store
    from probekit.errors import ConfigError

    target = tmp_path / "f"
    target.write_text("keep me\n")
    with pytest.raises(ConfigError, match="is an existing file, not a folder"):
        capture_to_store(small_model, [[1, 2, 3]], target, ["resid_post@0"])
    assert target.read_text() == "keep me\n"


def test_train_rerun_into_its_own_folder_resumes(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["train", "modular_addition", "--out", str(out), "--steps", "2", "--no-progress",
            "--set", "task.p=7", "--set", "model.d_model=8", "--set", "model.d_mlp=8",
            "--set", "model.n_heads=1", "--set", "model.d_head=8"]
    assert main(args) == 0, capsys.readouterr().err
    assert json.loads((out / ".probekit-output").read_text())["command"] == "train"
    assert main(args) == 0, capsys.readouterr().err  # its own folder: resumed, not refused


def test_max_permutations_is_the_api_bound():
    from probekit.errors import ConfigError
    from probekit.stats.limits import MAX_PERMUTATIONS
    from probekit.stats.permutation import check_n_permutations

    check_n_permutations(MAX_PERMUTATIONS)
    with pytest.raises(ConfigError, match="above the bound 100000"):
        check_n_permutations(MAX_PERMUTATIONS + 1)



def test_docs_table_lists_every_case():
    """docs/reports.md carries the generated table (scripts/bad_input_table.py) with these rows."""
    doc = (Path(__file__).resolve().parents[2] / "docs" / "reports.md").read_text()
    section = doc.split("<!-- bad-input-table:start", 1)[1].split("<!-- bad-input-table:end", 1)[0]
    for case in CASES:
        assert f"| `{case['id']}` |" in section, case["id"]
