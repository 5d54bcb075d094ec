"""Bad input round 4 (issue 59 item 2, patterns 1, 2, 4, 5, 8): ``--check`` as deep as the run,
a rule for every suite key, no colliding column names, causal treatments that are design knobs,
distinct list options.

Each row of :data:`CASES` is one input: ``id``, ``surface``, ``input``, ``message`` (a fragment of
the one error line) and ``setup`` (builds the input in a fresh folder holding a tiny checkpoint,
its data and a valid suite; returns the argv). The parametrized test runs ``probekit.cli.main``
in-process and asserts exit status 2, exactly one ``error:`` line holding the fragment, no
traceback, no model loaded and no population diagnosed, and that no file in the folder was
created, changed or removed (so an ``--out`` folder is never made). A case whose ``setup`` gives
no ``--check`` is the run itself: the same rule refuses it before any work. The rows are listed
in docs/reports.md ("Round 4").
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

ROOT = Path(__file__).resolve().parents[2]

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
{data}
[capture]
sites = {sites}

[[probe]]
kind = "logistic"
Cs = {Cs}
cv = 3

[stats]
n_permutations = 20
seed = {seed}
{extra}"""

DEFAULTS = {"data": "", "sites": '["resid_post@0"]', "Cs": 2, "seed": 0, "extra": ""}


def suite(root: Path, name: str = "s.toml", **changes: Any) -> str:
    """The tiny suite with ``changes`` written to ``root/name``; its path."""
    (root / name).write_text(SUITE.format(**{**DEFAULTS, **changes}))
    return str(root / name)


def claims(root: Path, claim: str, data: str = "") -> str:
    """A claim file on the tiny checkpoint holding one ``[[claim]]`` table."""
    path = Path(suite(root, "tmp.toml", data=data))
    text = path.read_text().split("[[probe]]")[0]
    path.unlink()
    (root / "c.toml").write_text(text + "[[claim]]\n" + claim)
    return str(root / "c.toml")


def diagnosis(root: Path, name: str = "d.toml", **replace: str) -> str:
    """The shipped smoke diagnosis (a grid, nothing trained by --check) with text replaced."""
    text = (ROOT / "probes" / "diagnose_modadd_smoke.toml").read_text()
    for old, new in replace.items():  # "LAST:" replaces the last occurrence only
        last = old.startswith("LAST:")
        old = old.removeprefix("LAST:")
        assert old in text, old
        head, sep, tail = text.rpartition(old)
        text = head + new + tail if last else text.replace(old, new)
    (root / name).write_text(text)
    return str(root / name)


OUTCOME = 'outcome = "id_accuracy"                 # held-out pairs (test_id) of each model\'s own task'
CROSSING = 'outcome = "id_step_0.5"\ncrossing = 0.5'


def table_diagnosis(root: Path, mediation: str) -> str:
    """The shipped HE regulariser table diagnosis with ``mediation`` as its mediation pairs."""
    text = (ROOT / "probes" / "diagnose_he_regulariser.toml").read_text()
    table = ROOT / "docs" / "diagnosis" / "he_regulariser" / "markers.csv"
    text = text.replace('"../docs/diagnosis/he_regulariser/markers.csv"', json.dumps(str(table)))
    old = 'mediation = [{ knob = "noise", marker = "modifier_he" }]'
    assert old in text
    (root / "t.toml").write_text(text.replace(old, f"mediation = {mediation}"))
    return str(root / "t.toml")


def patch(root: Path, *extra: str) -> list[str]:
    """``probekit patch`` on the tiny (2-block) checkpoint with three prompt pairs."""
    rows = []
    for pid in range(3):
        rows += [{"tokens": [1, 2, 3 + pid], "pair_id": pid, "role": "clean", "answer": 4},
                 {"tokens": [1, 2, 6 + pid], "pair_id": pid, "role": "corrupt", "answer": 5}]
    (root / "pairs.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    return ["patch", str(root / "ckpt"), str(root / "pairs.jsonl"), "--out", str(root / "o"),
            "--kinds", "resid_pre", *extra]


CASES: list[dict[str, Any]] = [
    # ------------------------------------------------ pattern 1: --check as deep as the run
    {"id": "diagnose-check-censor-0", "surface": "probekit diagnose --check",
     "input": "[diagnosis] censor = 0 (crossing-step outcome)",
     "message": "[diagnosis] censor: censor = 0: a censoring step must be a finite number > 0",
     "setup": lambda r: ["diagnose", diagnosis(r, **{OUTCOME: CROSSING + "\ncensor = 0"}),
                         "--check"]},
    {"id": "diagnose-check-censor-negative", "surface": "probekit diagnose --check",
     "input": "[diagnosis] censor = -5", "message": "censor = -5: a censoring step must be",
     "setup": lambda r: ["diagnose", diagnosis(r, **{OUTCOME: CROSSING + "\ncensor = -5"}),
                         "--check"]},
    {"id": "diagnose-run-censor-negative", "surface": "probekit diagnose (the run)",
     "input": "[diagnosis] censor = -5, --out DIR", "message": "censor = -5: a censoring step must be",
     "setup": lambda r: ["diagnose", diagnosis(r, **{OUTCOME: CROSSING + "\ncensor = -5"}),
                         "--out", str(r / "out")]},
    {"id": "diagnose-check-mediation-bootstrap", "surface": "probekit diagnose --check",
     "input": "[diagnosis] n_bootstrap = 200 with a mediation",
     "message": "n_bootstrap = 200: must be >= 1000 (the wild cluster bootstrap "
                "and the mediation's percentile intervals need it)",
     "setup": lambda r: ["diagnose", diagnosis(r, **{
         "LAST:n_bootstrap = 1000\n": 'n_bootstrap = 200\nmediation = [{ knob = "train.weight_decay", '
                                 'marker = "weight_norm" }]\n'}), "--check"]},
    {"id": "diagnose-compare-outcomes", "surface": "probekit diagnose A B --check",
     "input": "two files asking different outcomes",
     "message": "asks outcome 'train_accuracy' given",
     "setup": lambda r: ["diagnose", diagnosis(r, "a.toml"), diagnosis(r, "b.toml", **{
         OUTCOME: 'outcome = "train_accuracy"'}), "--check"]},
    {"id": "diagnose-compare-outcomes-run", "surface": "probekit diagnose A B (the run)",
     "input": "two files asking different outcomes, --out DIR",
     "message": "a comparison needs the same question",
     "setup": lambda r: ["diagnose", diagnosis(r, "a.toml"), diagnosis(r, "b.toml", **{
         OUTCOME: 'outcome = "train_accuracy"'}), "--out", str(r / "out")]},
    {"id": "diagnose-compare-no-shared-marker", "surface": "probekit diagnose A B",
     "input": "two files sharing no marker, --out DIR", "message": "share no marker",
     "setup": lambda r: ["diagnose", diagnosis(r, "a.toml", **{
         'name = "weight_norm"': 'name = "wn"', 'name = "fourier_gini"': 'name = "fg"',
         'name = "restricted_loss"': 'name = "rl"', 'name = "probe_accuracy"\n': 'name = "pa"\n'}),
         diagnosis(r, "b.toml"), "--out", str(r / "out")]},
    {"id": "report-check-task-vocab", "surface": "probekit report --check",
     "input": '[data] task = "modular_addition" (p = 113: 115 tokens) on an 11-token model',
     "message": "[data] task 'modular_addition': 115 tokens, but the vocabulary of the model has "
                "11 (ids 0..10)",
     "setup": lambda r: ["report", _task_suite(r), "--check"]},
    {"id": "diagnose-check-task-vocab", "surface": "probekit diagnose --check",
     "input": "[data] task_options = { p = 113 } on the p = 53 checkpoint (55 tokens)",
     "message": "[data] task 'modular_addition' with {'p': 113}: 115 tokens, but the vocabulary of "
                "checkpoint",
     "setup": lambda r: ["diagnose", _vocab_diagnosis(r), "--check"]},
    {"id": "test-check-claim-split", "surface": "probekit test --check",
     "input": '[[claim]] split = "tset"', "message": "[claim] split = 'tset': not a split of the "
     "examples (did you mean 'test'?)",
     "setup": lambda r: ["test", claims(r, 'name = "c"\nmeasure = "logit_lens_rank"\nlayer = 0\nsplit = "tset"\n'
                                        'compare = "<="\nthreshold = 5\n'), "--check"]},
    {"id": "test-check-claim-split-ood", "surface": "probekit test --check",
     "input": '[[claim]] select_split = "ood" without [data] ood_splits',
     "message": "[claim] select_split = 'ood': not a split of the examples",
     "setup": lambda r: ["test", claims(r, 'name = "c"\nmeasure = "necessity"\nsite = "resid_post@0"\n'
                                        'select_split = "ood"\ncompare = ">="\nthreshold = 0.1\n'),
                         "--check"]},
    {"id": "test-check-fourier-k-0", "surface": "probekit test --check",
     "input": "[[claim]] fourier_key_share k = 0", "message": "[claim] k = 0: must be >= 1",
     "setup": lambda r: ["test", claims(r, 'name = "c"\nmeasure = "fourier_key_share"\np = 5\nk = 0\n'
                                        'compare = ">="\nthreshold = 0.5\n'), "--check"]},
    {"id": "test-check-fourier-k-above-p", "surface": "probekit test --check",
     "input": "[[claim]] fourier_key_share p = 5, k = 3",
     "message": "k = 3 with p = 5: k=3: choose 1 <= k <= 2",
     "setup": lambda r: ["test", claims(r, 'name = "c"\nmeasure = "fourier_key_share"\np = 5\nk = 3\n'
                                        'compare = ">="\nthreshold = 0.5\n'), "--check"]},
    {"id": "test-check-faithfulness-k-0", "surface": "probekit test --check",
     "input": "[[claim]] circuit_faithfulness k = 0", "message": "[claim] k = 0: must be >= 1",
     "setup": lambda r: ["test", claims(r, 'name = "c"\nmeasure = "circuit_faithfulness"\nk = 0\n'
                                        'compare = ">="\nthreshold = 0.5\n'), "--check"]},
    # ------------------------------------------------ pattern 2: a rule for every suite key
    {"id": "check-max-per-split-negative", "surface": "probekit report --check",
     "input": "[data] max_per_split = -1",
     "message": "[data] max_per_split = -1: must be >= 1 (or unset for every example)",
     "setup": lambda r: ["report", suite(r, data="max_per_split = -1\n"), "--check"]},
    {"id": "check-sites-empty", "surface": "probekit report --check", "input": "[capture] sites = []",
     "message": "[capture] sites = []: must be non-empty",
     "setup": lambda r: ["report", suite(r, sites="[]"), "--check"]},
    {"id": "check-Cs-0", "surface": "probekit report --check", "input": "[[probe]] Cs = 0",
     "message": "[probe] Cs = 0: must be >= 1 (values of the C grid)",
     "setup": lambda r: ["report", suite(r, Cs=0), "--check"]},
    {"id": "check-stats-seed-negative", "surface": "probekit report --check",
     "input": "[stats] seed = -1", "message": "[stats] seed = -1: must be in [0, 4294967296)",
     "setup": lambda r: ["report", suite(r, seed=-1), "--check"]},
    {"id": "check-max-new-tokens-0", "surface": "probekit report --check",
     "input": "[data] max_new_tokens = 0", "message": "[data] max_new_tokens = 0: must be >= 1",
     "setup": lambda r: ["report", suite(r, data="max_new_tokens = 0\n"), "--check"]},
    {"id": "check-data-seed-huge", "surface": "probekit report --check",
     "input": "[data] seed = 2**32", "message": "[data] seed = 4294967296: must be in [0, 4294967296)",
     "setup": lambda r: ["report", suite(r, data="seed = 4294967296\n"), "--check"]},
    {"id": "check-ood-splits-twice", "surface": "probekit report --check",
     "input": 'ood_splits = ["ood", "ood"]',
     "message": "[data] ood_splits = ['ood', 'ood']: must be distinct (each value once)",
     "setup": lambda r: ["report", suite(r, data='ood_splits = ["ood", "ood"]\n'), "--check"]},
    {"id": "check-capture-batch-0", "surface": "probekit report --check",
     "input": "[capture] batch_size = 0", "message": "[capture] batch_size = 0: must be >= 1",
     "setup": lambda r: ["report", suite(r, sites='["resid_post@0"]\nbatch_size = 0'), "--check"]},
    {"id": "check-correctness-label-empty", "surface": "probekit report --check",
     "input": '[[correctness]] label = ""', "message": "[correctness] label = '': must be non-empty",
     "setup": lambda r: ["report", suite(r, extra='\n[[correctness]]\nlabel = ""\n'), "--check"]},
    {"id": "check-similarity-split-unknown", "surface": "probekit report --check",
     "input": '[[similarity]] split = "validation"',
     "message": "[similarity] split = 'validation': not a split of the examples",
     "setup": lambda r: ["report", suite(r, extra='\n[[similarity]]\nsplit = "validation"\n'),
                         "--check"]},
    # ------------------------------------------------ pattern 4: generated column names
    {"id": "diagnose-design-named-like-outcome", "surface": "probekit diagnose --check",
     "input": "a [[marker]] named id_accuracy (an outcome column)",
     "message": "the marker column 'id_accuracy' is also an outcome column of the marker table",
     "setup": lambda r: ["diagnose", diagnosis(r, **{'name = "weight_norm"': 'name = "id_accuracy"',
                                                     OUTCOME: 'outcome = "train_accuracy"'}),
                         "--check"]},
    # ------------------------------------------------ pattern 5: treatments are design knobs
    {"id": "table-mediation-measured-knob", "surface": "probekit diagnose --check (table)",
     "input": 'mediation = [{ knob = "id_accuracy", marker = "modifier_he" }]',
     "message": "knob 'id_accuracy' is a measured column, not a design knob",
     "setup": lambda r: ["diagnose", table_diagnosis(
         r, '[{ knob = "id_accuracy", marker = "modifier_he" }]'), "--check"]},
    {"id": "table-mediation-measured-knob-run", "surface": "probekit diagnose (table, the run)",
     "input": 'mediation knob = "id_accuracy", --out DIR',
     "message": "a causal estimate needs a knob the design sets",
     "setup": lambda r: ["diagnose", table_diagnosis(
         r, '[{ knob = "id_accuracy", marker = "modifier_he" }]'), "--out", str(r / "out")]},
    {"id": "grid-mediation-measured-knob", "surface": "probekit diagnose --check",
     "input": 'mediation = [{ knob = "train_loss", marker = "weight_norm" }]',
     "message": "knob 'train_loss' is a measured column, not a design knob",
     "setup": lambda r: ["diagnose", diagnosis(r, **{
         "LAST:n_bootstrap = 1000\n": 'n_bootstrap = 1000\nmediation = [{ knob = "train_loss", '
                                 'marker = "weight_norm" }]\n'}), "--check"]},
    # ------------------------------------------------ pattern 8: list options, degenerate input
    {"id": "patch-layers-twice", "surface": "probekit patch", "input": "--layers 0,0",
     "message": "--layers [0, 0]: block index 0 is given twice; give each block index once",
     "setup": lambda r: patch(r, "--layers", "0,0")},
    {"id": "patch-edge-ks-twice", "surface": "probekit patch", "input": "--edge-ks 10,10",
     "message": "--edge-ks [10, 10]: circuit size 10 is given twice",
     "setup": lambda r: patch(r, "--edge-ks", "10,10")},
    {"id": "patch-window-above-blocks", "surface": "probekit patch",
     "input": "--window 100 on a 2-block model",
     "message": "window = 100 exceeds the model's 2 block(s)",
     "setup": lambda r: patch(r, "--window", "100")},
    {"id": "diagnose-check-series-twice", "surface": "probekit diagnose --check",
     "input": "[population] series = [30, 30]",
     "message": "[population] series: series [30, 30]: step 30 is given twice; give each step once",
     "setup": lambda r: ["diagnose", diagnosis(r, **{"series = [30]": "series = [30, 30]"}),
                         "--check"]},
    {"id": "diagnose-check-covariates-twice", "surface": "probekit diagnose --check",
     "input": '[diagnosis] covariates naming "train_loss" twice',
     "message": "covariate 'train_loss' is given twice; give each covariate once",
     "setup": lambda r: ["diagnose", diagnosis(r, **{
         '"task.train_fraction", "train_loss"]': '"train_loss", "train_loss"]'}), "--check"]},
    {"id": "capture-sites-twice", "surface": "probekit capture",
     "input": "--sites resid_post@0,blocks.0.hook_resid_post (one site, two spellings)",
     "message": "--sites ['resid_post@0', 'resid_post@0']: site 'resid_post@0' is given twice",
     "setup": lambda r: ["capture", str(r / "ckpt"), str(r / "data.jsonl"), "--out", str(r / "o"),
                         "--sites", "resid_post@0,blocks.0.hook_resid_post"]},
    {"id": "check-patching-layers-twice", "surface": "probekit report --check",
     "input": "[[patching]] layers = [1, 1]",
     "message": "[patching] layers = [1, 1]: must be distinct (each value once)",
     "setup": lambda r: ["report", suite(r, extra="\n[[patching]]\nlayers = [1, 1]\n"), "--check"]},
    {"id": "test-check-steer-strength-0", "surface": "probekit test --check",
     "input": '[[claim]] necessity method = "steer", strength = 0',
     "message": "strength = 0 steers by zero standard deviations (the identity)",
     "setup": lambda r: ["test", claims(r, 'name = "c"\nmeasure = "necessity"\nsite = "resid_post@0"\n'
                                        'method = "steer"\nstrength = 0.0\ncompare = ">="\n'
                                        'threshold = 0.1\n'), "--check"]},
]


def _task_suite(root: Path) -> str:
    path = Path(suite(root, data='task = "modular_addition"\n'))
    path.write_text(path.read_text().replace('file = "data.jsonl"\n', "").replace(
        'label = "planted"', 'label = "answer"').replace('test_split = "test"',
                                                         'test_split = "test_id"'))
    return str(path)


def _vocab_diagnosis(root: Path) -> str:
    ckpt = ROOT / "probes" / "checkpoints" / "modadd-p53"
    (root / "v.toml").write_text(
        f'[suite]\nname = "v"\n\n[population]\ncheckpoints = {json.dumps(str(ckpt))}\n\n'
        '[data]\nlabel = "answer"\ntask = "modular_addition"\ntask_options = { p = 113 }\n\n'
        '[[marker]]\nname = "weight_norm"\nmeasure = "weight_norm"\n\n'
        '[diagnosis]\noutcome = "id_accuracy"\ngroups = ""\n')
    return str(root / "v.toml")


def tree(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` by relative path."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """A tiny checkpoint (2 blocks, 11 tokens) and its data, copied into each case's folder."""
    return write_tiny_suite(tmp_path_factory.mktemp("tiny4"), "", n=60, n_id=60)


@pytest.fixture
def nothing_runs(monkeypatch):
    """Fail loudly if a command loads a model, runs a suite or claims, or diagnoses a population.

    (A table diagnosis trains and loads nothing: its rules open ``diagnose_table`` itself.)
    """
    def refuse(*args, **kwargs):
        raise AssertionError("work started before the input was validated")

    monkeypatch.setattr("probekit.models.loading.load_model", refuse)
    monkeypatch.setattr("probekit.suites.run.run_suite", refuse)
    monkeypatch.setattr("probekit.diagnosis.runner.diagnose", refuse)
    monkeypatch.setattr("probekit.hypotheses.runner.run", refuse)


def test_cases_have_the_table_keys():
    ids = [c["id"] for c in CASES]
    assert len(ids) == len(set(ids))
    for case in CASES:
        assert {"id", "surface", "input", "message", "setup"} <= set(case), case["id"]
        assert isinstance(case["setup"], Callable)


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_bad_input_round4(case, template, tmp_path, capsys, monkeypatch, nothing_runs):
    root = tmp_path / "w"
    shutil.copytree(template, root)
    (root / "suite.toml").unlink()
    argv = case["setup"](root)
    monkeypatch.delenv("PROBEKIT_DEBUG", raising=False)
    before = tree(root)
    code = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err, err
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert code == 2 and len(lines) == 1, err
    assert case["message"] in lines[0], lines[0]
    assert tree(root) == before, "a file was created, changed or removed"
    assert not (root / "out").exists() and not (root / "o").exists()


def test_docs_table_lists_every_case():
    """docs/reports.md's round-4 section lists every case."""
    doc = (ROOT / "docs" / "reports.md").read_text()
    section = doc.split("<!-- bad-input-round4:start", 1)[1].split("<!-- bad-input-round4:end", 1)[0]
    for case in CASES:
        assert f"| `{case['id']}` |" in section, case["id"]
