"""Bad input, round 3 (issue 47 section 2): data silently coerced or dropped, a Python API that
trusted its arguments, diagnosis tables.

``CASES`` is one row per input: ``id``, ``surface`` (where a user meets it), ``input`` (what they
passed) and ``message`` (a fragment of the one line they get: the error, or the warning beside a
correct result). ``scripts/bad_input_table.py`` renders it into docs/reports.md. Each case's
behaviour is in ``RUNS[id]``: a call and the exception type it must raise, or ``"warns"`` (the
call returns a checked result and the message is in a warning or the probekit log).
"""

from __future__ import annotations

import dataclasses
import json
import math
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

from probekit.errors import ConfigError, DataError
from probekit.sites import Site
from probekit.stats.permutation import check_n_permutations
from tests.conftest import TINY_CONFIGS, random_sequences

CASES: list[dict[str, str]] = [
    # ------------------------------------------------------------ data silently coerced or dropped
    {"id": "label-1-and-1.0", "surface": "suite [data] file", "input": 'label y = 1 on some rows, 1.0 on others',
     "message": "holds whole numbers written both as ints and as floats"},
    {"id": "split-case", "surface": "suite [data] file", "input": 'split "Test" for test_split = "test"',
     "message": "read as the split 'test' (case or spaces differ"},
    {"id": "split-unknown", "surface": "suite [data] file", "input": 'split "validation" the suite does not name',
     "message": "rows with split values the suite does not name are not used: 'validation' (2 rows)"},
    {"id": "test-equals-train", "surface": "suite examples", "input": "test prompts identical to training prompts",
     "message": "are identical to a training prompt, so they are not held out (leakage)"},
    {"id": "ood-is-train", "surface": "suite [data]", "input": 'ood_splits = ["train"]',
     "message": "'train' is also the train_split"},
    {"id": "token-ids-column", "surface": "capture_to_store(metadata=)", "input": "a column named token_ids",
     "message": "metadata column 'token_ids' is reserved"},
    {"id": "load-layers-gap", "surface": "ActivationStore.load_layers", "input": 'load_layers("resid_post") on layers 0 and 2',
     "message": "holds resid_post at layers [0, 2], not 0..1"},
    # ------------------------------------------------------------ the Python API
    {"id": "site-bool-layer", "surface": "Site", "input": 'Site(True, "resid_post")',
     "message": "needs a block index layer >= 0, got True (bool)"},
    {"id": "site-parse-int", "surface": "Site.parse", "input": "Site.parse(3)",
     "message": "Site.parse expects a string like 'resid_post@3', got int 3"},
    {"id": "tokens-2d-numpy", "surface": "capture_to_store", "input": "tokens as a 2-D int numpy array",
     "message": "(accepted: one example per row)"},
    {"id": "tokens-float-tensor", "surface": "capture_to_store", "input": "tokens as a float tensor",
     "message": "tokens has dtype torch.float32; token ids must be integers"},
    {"id": "tokens-flat-list", "surface": "capture_to_store", "input": "tokens = [1, 2, 3]",
     "message": "tokens[0] is the single id 1, not a sequence"},
    {"id": "logistic-C-0", "surface": "LogisticProbe", "input": "LogisticProbe(C=0)",
     "message": "C (the inverse regularisation) must be a finite number > 0"},
    {"id": "train-idx-duplicated", "surface": "probe_permutation_test", "input": "train_idx lists row 0 twice",
     "message": "split 'train' lists index 0 2 times"},
    {"id": "train-idx-float", "surface": "probe_permutation_test", "input": "train_idx = [0.5, 1.5, ...]",
     "message": "split 'train' holds float64 values (0.5, 1.5, 2.5, ...), not integer indices"},
    {"id": "zero-features", "surface": "LogisticProbe.fit", "input": "X of shape (40, 0)",
     "message": "Found array with 0 feature(s) (shape=(40, 0))"},
    {"id": "one-training-class", "surface": "LogisticProbe.fit", "input": "every training label 0",
     "message": "the data contains only one class: 0"},
    {"id": "permutation-overlap", "surface": "probe_permutation_test", "input": "test_idx overlapping train_idx",
     "message": "train and test splits share 10 row(s)"},
    {"id": "answer-ids-float", "surface": "logit_diff", "input": "answer = torch.tensor([3., 4.])",
     "message": "answer holds torch.float32 values (3.0, 4.0, ...); token ids must be integers"},
    {"id": "n-permutations-float", "surface": "probe_permutation_test, marker_analysis", "input": "n_permutations = 200.5",
     "message": "n_permutations must be a whole number >= 1, got float 200.5"},
    {"id": "seed-negative", "surface": "probe_permutation_test", "input": "random_state = -1",
     "message": "random_state must be an integer >= 0 or None, got -1"},
    {"id": "table-complex", "surface": "marker_analysis(table)", "input": "a marker cell 1+2j",
     "message": "cells must be real numbers, strings or None"},
    {"id": "table-400-digits", "surface": "marker_analysis(table)", "input": "a 400-digit integer",
     "message": "beyond the range of a float (about 1.8e308)"},
    {"id": "tl-metric", "surface": "patching metric", "input": "metric(logits, answer_tokens=..., per_prompt=False)",
     "message": "(accepted: each row scored with its pair's answer tokens)"},
    {"id": "train-api-user-folder", "surface": "train(task, ..., out_dir)",
     "input": "out_dir holding the user's own run.json and history.csv",
     "message": "is not empty and was not written by probekit (it holds history.csv, run.json)"},
    {"id": "train-api-out-file", "surface": "train(task, ..., out_dir)",
     "input": "out_dir that is a regular file", "message": "is an existing file, not a folder"},
    {"id": "write-report-user-files", "surface": "write_report(result, out_dir)",
     "input": "out_dir holding the user's own report.html",
     "message": "holds report.html that probekit did not write"},
    {"id": "diagnose-table-user-markers", "surface": "diagnose_table(spec, out=)",
     "input": "out holding the user's own markers.csv",
     "message": "holds markers.csv that probekit did not write"},
    # ------------------------------------------------------------ unbounded requests, every API
    {"id": "api-permutation-test-1e9", "surface": "probe_permutation_test", "input": "n_permutations = 10**9",
     "message": "n_permutations = 1000000000 is above the bound 100000"},
    {"id": "api-bootstrap-1e9", "surface": "bootstrap_ci", "input": "n_resamples = 10**9",
     "message": "n_resamples=1000000000 is above the bound 100000"},
    {"id": "api-marker-analysis-bootstrap-1e9", "surface": "marker_analysis", "input": "n_bootstrap = 10**9",
     "message": "n_bootstrap=1000000000 is above the bound 100000"},
    {"id": "api-marker-analysis-max-permutations-1e9", "surface": "marker_analysis",
     "input": "max_permutations = 10**9", "message": "max_permutations = 1000000000 is above the bound 100000"},
    {"id": "api-calibrate-simulations-1e9", "surface": "calibrate", "input": "n_simulations = 10**9",
     "message": "n_simulations = 1000000000 is above the bound 10000"},
    {"id": "api-granulated-permutations-1e9", "surface": "granulated_kendall_tau",
     "input": "n_permutations = 10**9", "message": "n_permutations = 1000000000 is above the bound 100000"},
    {"id": "api-interaction-resamples-1e9", "surface": "interaction_test", "input": "n_resamples = 10**9",
     "message": "n_resamples = 1000000000 is above the bound 100000"},
    {"id": "api-causal-design-permutations-1e9", "surface": "build_design", "input": "n_permutations = 10**9",
     "message": "n_permutations = 1000000000 is above the bound 100000"},
    {"id": "api-rsa-permutations-1e9", "surface": "rsa_test", "input": "n_permutations = 10**9",
     "message": "n_permutations = 1000000000 is above the bound 100000"},
    {"id": "api-correctness-permutations-1e9", "surface": "CorrectnessConfig", "input": "n_permutations = 10**9",
     "message": "n_permutations = 1000000000 is above the bound 100000"},
    {"id": "claim-necessity-n-random-1e9", "surface": "[[claim]] necessity", "input": "n_random = 10**9",
     "message": "NecessitySpec.n_random must be <= 100000, got 1000000000"},
    {"id": "claim-capacity-n-shuffles-1e9", "surface": "[[claim]] manifold_capacity", "input": "n_shuffles = 10**9",
     "message": "CapacitySpec.n_shuffles must be <= 100000, got 1000000000"},
    {"id": "neurons-n-random-1e9", "surface": "[[neurons]] / DeactivationConfig", "input": "n_random = 10**9",
     "message": "DeactivationConfig.n_random must be <= 100000, got 1000000000"},
    # ------------------------------------------------------------ one rule for the configs' fields
    {"id": "api-train-config-lr-inf", "surface": "TrainConfig", "input": "TrainConfig(lr=float('inf'))",
     "message": "TrainConfig.lr must be a finite number, got inf"},
    {"id": "api-train-config-batch-0", "surface": "TrainConfig", "input": "TrainConfig(batch_size=0)",
     "message": "TrainConfig.batch_size must be >= 1 (or None for the full batch), got 0"},
    {"id": "api-model-config-layers-0", "surface": "ModelConfig", "input": "n_layers = 0",
     "message": "ModelConfig.n_layers must be >= 1, got 0"},
    {"id": "api-task-config-fraction", "surface": "get_task", "input": 'get_task("modular_addition", train_fraction=1.5)',
     "message": "ModularAdditionConfig.train_fraction must be in (0, 1), got 1.5"},
    # ------------------------------------------------------------ diagnosis tables
    {"id": "table-duplicate-rows", "surface": "marker_analysis(table)", "input": "one model's row given twice",
     "message": "rows 0, 3 (0-based) are identical in every column"},
    {"id": "covariate-numbers-as-text", "surface": "marker_analysis(covariates=)", "input": 'noise = ["0.1", "0.2", ...]',
     "message": "covariate 'noise' holds numbers written as text"},
    {"id": "covariate-mostly-text", "surface": "marker_analysis(covariates=)", "input": 'arch = ["a", "b", "7", ...]',
     "message": "covariate 'arch' is mostly text"},
    {"id": "csv-latin-1", "surface": "diagnose --table", "input": "a Latin-1 CSV (caf\\xe9)",
     "message": "byte 0xe9 is not UTF-8; read the file as Latin-1"},
    {"id": "csv-utf-16", "surface": "diagnose --table", "input": "a UTF-16 CSV with its byte-order mark",
     "message": "(accepted: the byte-order mark names the encoding)"},
    {"id": "three-models", "surface": "marker_analysis", "input": "3 models, no covariates",
     "message": "no p-value can reach alpha: the smallest attainable p is 0.167 with 3 models"},
    # ------------------------------------------------------------ remaining earlier cases
    {"id": "claim-p-mismatch", "surface": "[[claim]] fourier_key_share", "input": "p = 7 on a p = 53 checkpoint",
     "message": "p = 7 but"},
    {"id": "geometry-singular", "surface": "common_center_subspace", "input": "identical manifold centres",
     "message": "manifold centres are identical"},
    {"id": "he-states-list", "surface": "composition_he", "input": "a = [[1.0]] (a list)",
     "message": "a is a list; pass a (layer, pair, d) tensor"},
    {"id": "he-pairs-mismatched", "surface": "composition_he", "input": "a of 5 pairs, b of 4 pairs",
     "message": "a (2, 5, 3) and b (2, 4, 3) must both be (layer, pair, d)"},
    {"id": "he-pairs-negative", "surface": "PairIndex", "input": "example = [-1]",
     "message": "PairIndex.example holds -1; example indices must be >= 0"},
    {"id": "text-not-a-string", "surface": "suite / capture data", "input": '"text": 5',
     "message": "column 'text' holds int 5; expected a string"},
]


# ============================================================================ fixtures, helpers

SUITE = """
[model]
checkpoint = "{ckpt}"
[data]
file = "data.jsonl"
label = "y"
train_split = "train"
test_split = "test"
{extra}
[[probe]]
kind = "logistic"
"""


@pytest.fixture(scope="module")
def small_model_module():
    from probekit.models import build_model

    return build_model(TINY_CONFIGS["ln_mha"])


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory, small_model_module):
    from probekit.models import save_checkpoint

    return save_checkpoint(small_model_module, TINY_CONFIGS["ln_mha"], tmp_path_factory.mktemp("m") / "ckpt")


#: sha256 of every input file a case wrote (path -> digest); the test checks them after the call
_INPUTS: dict[Path, str] = {}


def _input(*paths: Path) -> None:
    """Record the input files' sha256: the case's call must leave them byte for byte."""
    import hashlib

    for path in paths:
        for f in ([path] if path.is_file() else sorted(q for q in path.rglob("*") if q.is_file())):
            _INPUTS[f] = hashlib.sha256(f.read_bytes()).hexdigest()


def _suite(tmp_path: Path, ckpt: Path, rows: list[dict], extra: str = "") -> Path:
    (tmp_path / "data.jsonl").write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    (tmp_path / "s.toml").write_text(SUITE.format(ckpt=ckpt, extra=extra))
    _input(tmp_path / "data.jsonl", tmp_path / "s.toml", Path(ckpt))
    return tmp_path / "s.toml"


def _rows(n_train: int = 12, n_test: int = 6, *, seed: int = 7) -> list[dict]:
    seqs = random_sequences(n_train + n_test, 11, lo=2, hi=6, seed=seed)
    return [{"tokens": s, "y": i % 2, "split": "train" if i < n_train else "test"}
            for i, s in enumerate(seqs)]


def _checked(path: Path):
    from probekit.suites import load_suite
    from probekit.suites.check import check_suite_data

    return check_suite_data(load_suite(path))


def _xy(n: int = 40, d: int = 3):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, d)), np.array([0, 1] * (n // 2))


def _perm(**kw):
    from probekit.probes import probe_permutation_test

    X, y = _xy()
    args = dict(train_idx=np.arange(30), test_idx=np.arange(30, 40), n_permutations=5, C=1.0)
    return probe_permutation_test(X, y, **{**args, **kw})


def _table(**extra):
    from probekit.diagnosis import marker_analysis

    rng = np.random.default_rng(1)
    base = {"y": rng.normal(size=12).tolist(), "m": rng.normal(size=12).tolist()}
    return marker_analysis({**base, **extra}, "y", groups=None, n_permutations=50)


# ============================================================================ each case's call


def run_label_mix(tmp_path, ckpt, caplog, **_):
    rows = _rows()
    for r in rows[::3]:
        r["y"] = float(r["y"])
    with caplog.at_level("WARNING", logger="probekit"):
        kept = _checked(_suite(tmp_path, ckpt, rows))
    assert {type(r.data["y"]) for r in kept} == {int}  # two classes, not three
    assert sorted({str(r.data["y"]) for r in kept}) == ["0", "1"]
    return caplog.text


def run_split_case(tmp_path, ckpt, caplog, **_):
    rows = _rows()
    rows[-1]["split"] = "Test"
    rows[-2]["split"] = " test"
    with caplog.at_level("WARNING", logger="probekit"):
        kept = _checked(_suite(tmp_path, ckpt, rows))
    assert sum(r.data["split"] == "test" for r in kept) == 6  # none left out
    return caplog.text


def run_split_unknown(tmp_path, ckpt, caplog, **_):
    rows = _rows()
    rows[0]["split"] = rows[1]["split"] = "validation"
    with caplog.at_level("WARNING", logger="probekit"):
        _checked(_suite(tmp_path, ckpt, rows))
    return caplog.text


def run_leakage(tmp_path, ckpt, caplog, small_model_module, **_):
    from probekit.suites import load_suite
    from probekit.suites.data import build_examples

    rows = _rows()
    for k in range(3):  # three test prompts copied from training prompts
        rows[12 + k]["tokens"] = rows[k]["tokens"]
    with caplog.at_level("WARNING", logger="probekit"):
        ex = build_examples(load_suite(_suite(tmp_path, ckpt, rows)), small_model_module)
    assert "3 of the 6 'test' prompts" in caplog.text
    assert len(ex.split("test")) == 6  # a visible warning, not a changed split
    return caplog.text


def run_ood_is_train(tmp_path, ckpt, **_):
    from probekit.suites import load_suite

    load_suite(_suite(tmp_path, ckpt, _rows(), extra='ood_splits = ["train"]'))


def run_token_ids_column(tmp_path, small_model_module, **_):
    from probekit.capture import capture_to_store

    capture_to_store(small_model_module, [[1, 2, 3]], tmp_path / "s", ["resid_post@0"],
                     metadata={"token_ids": [[9, 9]]}, progress=False)


def run_load_layers_gap(tmp_path, **_):
    from probekit.capture import capture_to_store
    from probekit.models import build_model

    cfg = dataclasses.replace(TINY_CONFIGS["ln_mha"], n_layers=3)
    store = capture_to_store(build_model(cfg), [[1, 2, 3], [4, 5]], tmp_path / "g",
                             ["resid_post@0", "resid_post@2"], progress=False)
    assert store.load_layers(["resid_post@0", "resid_post@2"]).shape[0] == 2  # explicit: fine
    store.load_layers("resid_post")


def run_tokens_2d(tmp_path, small_model_module, **_):
    from probekit.capture import capture_to_store

    store = capture_to_store(small_model_module, np.array([[1, 2, 3], [4, 5, 6]]), tmp_path / "s",
                             ["resid_post@0"], progress=False)
    assert store.metadata()["token_ids"] == [[1, 2, 3], [4, 5, 6]]


def _capture(tokens, tmp_path, model):
    from probekit.capture import capture_to_store

    capture_to_store(model, tokens, tmp_path / "s", ["resid_post@0"], progress=False)


def run_one_class(**_):
    from probekit.probes import LogisticProbe

    X, _ = _xy()
    LogisticProbe(C=1.0).fit(X, np.zeros(40, dtype=int))


def run_zero_features(**_):
    from probekit.probes import LogisticProbe

    X, y = _xy()
    LogisticProbe(C=1.0).fit(X[:, :0], y)


def run_answer_float(**_):
    # the answer check of logit_diff / answer_logprob (their Int[Tensor] annotation is enforced
    # by jaxtyping under pytest, so the check itself is called, as it is without the hook)
    from probekit.circuits.metrics import _pick

    _pick(torch.randn(2, 11), torch.arange(2), torch.tensor([3.0, 4.0]), "answer")


def run_tl_metric(**_):
    from probekit.circuits.metrics import as_pair_metric, logit_diff

    answer_tokens = torch.tensor([[3, 1], [4, 2]])

    def logits_to_ave_logit_diff(logits, answer_tokens=answer_tokens, per_prompt=False):
        final = logits[:, -1, :]
        ans = final.gather(dim=-1, index=answer_tokens)
        diff = ans[:, 0] - ans[:, 1]
        return diff if per_prompt else diff.mean()

    logits = torch.randn(4, 11)
    pair = torch.tensor([0, 1, 1, 0])
    got = as_pair_metric(logits_to_ave_logit_diff)(logits, pair)
    want = logit_diff(logits, pair, answer=answer_tokens[:, 0], foil=answer_tokens[:, 1])
    torch.testing.assert_close(got, want)


def _user_files(folder: Path, *names: str) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    for name in names:
        (folder / name).write_text(f"the user's own {name}\n")
    return {n: (folder / n).read_text() for n in names}


def _unchanged(folder: Path, before: dict[str, str]):
    """Call the guarded function; the user's files keep their bytes, nothing else appears."""
    assert sorted(p.name for p in folder.iterdir()) == sorted(before)
    assert {n: (folder / n).read_text() for n in before} == before


def run_train_user_folder(tmp_path, **_):
    from probekit.testbeds import get_task
    from probekit.train import TrainConfig
    from probekit.train.trainer import train

    mine = tmp_path / "mine"
    before = _user_files(mine, "run.json", "history.csv")
    task = get_task("modular_addition", p=7)
    try:
        train(task, task.model_config(d_model=8, d_mlp=8, n_heads=1, d_head=8),
              TrainConfig(steps=1, n_evals=1), mine, progress=False, plot=False)
    finally:
        _unchanged(mine, before)


def run_train_out_file(tmp_path, **_):
    from probekit.testbeds import get_task
    from probekit.train.trainer import train

    target = tmp_path / "f.txt"
    target.write_text("keep me\n")
    try:
        train(get_task("modular_addition", p=7), out_dir=target, progress=False)
    finally:
        assert target.read_text() == "keep me\n"


def run_write_report_user(tmp_path, **_):
    from probekit.report.write import write_report

    mine = tmp_path / "mine"
    before = _user_files(mine, "report.html")
    try:
        write_report({"suite": {"name": "x"}, "analyses": []}, mine)
    finally:
        _unchanged(mine, before)


def run_diagnose_table_user(tmp_path, **_):
    from probekit.diagnosis.table_diagnosis import diagnose_table

    mine = tmp_path / "mine"
    before = _user_files(mine, "markers.csv")
    try:
        diagnose_table(tmp_path / "no-such-file.toml", out=mine)  # refused before it is read
    finally:
        _unchanged(mine, before)


def _small_table(n: int = 12) -> dict:
    rng = np.random.default_rng(1)
    return {"y": rng.normal(size=n).tolist(), "m": rng.normal(size=n).tolist(),
            "k": [0.1, 0.2, 0.3] * (n // 3)}


def run_marker_bootstrap(**_):
    from probekit.diagnosis import marker_analysis

    marker_analysis(_small_table(), "y", groups=None, n_bootstrap=10**9)


def run_marker_max_perm(**_):
    from probekit.diagnosis import marker_analysis

    marker_analysis(_small_table(), "y", groups=None, max_permutations=10**9)


def run_calibrate(**_):
    from probekit.diagnosis.statistics.calibration import calibrate

    calibrate(_small_table(), "y", covariates=["k"], groups=None, n_simulations=10**9)


def run_granulated(**_):
    from probekit.diagnosis.statistics.granulated import granulated_kendall_tau

    granulated_kendall_tau(_small_table(), "y", "m", ["k"], n_permutations=10**9)


def run_interaction(**_):
    from probekit.diagnosis.statistics.compare import interaction_test

    interaction_test(_small_table(), _small_table(), "y", "m", groups=None, n_resamples=10**9)


def run_design(**_):
    from probekit.diagnosis.statistics.causal.design import build_design

    build_design(_small_table(), "y", "k", "m", n_permutations=10**9)


def run_rsa(**_):
    from probekit.similarity.rsa import rsa_test

    rdm = np.abs(np.subtract.outer(np.arange(6.0), np.arange(6.0)))
    rsa_test(rdm, rdm, n_permutations=10**9)


def run_duplicate_rows(**_):
    from probekit.diagnosis import marker_analysis

    t = {"y": [0.1, 0.5, 0.9, 0.1, 0.3], "m": [1.0, 2.0, 3.0, 1.0, 0.5]}
    marker_analysis(t, "y", groups=None, n_permutations=50)


def run_covariate_text(**_):
    rng = np.random.default_rng(1)
    with pytest.warns(UserWarning) as rec:
        _table(noise=[str(v) for v in rng.choice([0.1, 0.2, 0.3], size=12).tolist()])
    return " ".join(str(w.message) for w in rec)


def run_covariate_mostly_text(**_):
    from probekit.diagnosis import marker_analysis

    rng = np.random.default_rng(1)
    t = {"y": rng.normal(size=12).tolist(), "m": rng.normal(size=12).tolist(),
         "arch": ["a", "b", "c", "7"] * 3}
    with pytest.warns(UserWarning) as rec:
        marker_analysis(t, "y", covariates=["arch"], groups=None, n_permutations=50)
    return " ".join(str(w.message) for w in rec)


def run_covariate_numbers(**_):
    from probekit.diagnosis import marker_analysis

    rng = np.random.default_rng(1)
    t = {"y": rng.normal(size=12).tolist(), "m": rng.normal(size=12).tolist(),
         "noise": ["0.1", "0.2", "0.3"] * 4}
    with pytest.warns(UserWarning) as rec:
        marker_analysis(t, "y", covariates=["noise"], groups=None, n_permutations=50)
    return " ".join(str(w.message) for w in rec)


def run_latin1(tmp_path, **_):
    from probekit.diagnosis.table_io import read_marker_table, to_columns

    path = tmp_path / "t.csv"
    path.write_bytes("arch,y\ncafé,0.5\nthé,0.25\n".encode("latin-1"))
    _input(path)
    with pytest.warns(UserWarning) as rec:
        table = read_marker_table(path)
    assert to_columns(table) == {"arch": ["café", "thé"], "y": [0.5, 0.25]}
    return " ".join(str(w.message) for w in rec)


def run_utf16(tmp_path, **_):
    from probekit.diagnosis.table_io import read_marker_table, to_columns

    path = tmp_path / "t.csv"
    path.write_bytes("arch,y\ncafé,0.5\nthé,0.25\n".encode("utf-16"))  # with its BOM
    _input(path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert to_columns(read_marker_table(path)) == {"arch": ["café", "thé"], "y": [0.5, 0.25]}


def run_three_models(**_):
    from probekit.diagnosis import marker_analysis

    a = marker_analysis({"y": [0.1, 0.5, 0.9], "m": [1.0, 3.1, 2.0]}, "y", groups=None,
                        n_permutations=200)
    (s,) = a.markers
    assert s.verdict == "inconclusive"
    assert any(f.startswith("insufficient_permutations(smallest attainable p 0.167") for f in s.flags)
    assert any("too few models for a test at alpha 0.05" in w for w in a.warnings)
    return s.reason


def run_claim_p(monkeypatch, **_):
    from types import SimpleNamespace

    from probekit.grokking.modadd_checkpoints import check_modadd_model

    meta = {"extra": {"task": "modular_addition", "task_config": {"p": 53}}}
    monkeypatch.setattr("probekit.models.checkpoint.read_checkpoint_meta", lambda path: meta)
    model = SimpleNamespace(probekit_checkpoint="run/step_1", cfg=SimpleNamespace(d_vocab=54))
    check_modadd_model(model, kind="fourier_key_share", p=53)  # the checkpoint's own p passes
    check_modadd_model(model, kind="fourier_key_share", p=7)


def run_geometry(**_):
    from probekit.geometry.centers import common_center_subspace

    common_center_subspace(torch.ones(20, 6, dtype=torch.float64), n_reps=2, max_iter=20)


def run_he_list(**_):
    # composition_he's own check of its states (jaxtyping enforces the Tensor annotation under
    # pytest; a user without the hook reaches this check)
    from probekit.homomorphism.measure import _states

    _states([[1.0]], "a")


def run_he_mismatched(**_):
    # the check inside composition_he (jaxtyping's shape check of the annotation runs first
    # under pytest; a user without the hook reaches this one)
    import inspect

    from probekit.homomorphism.measure import composition_he

    inspect.unwrap(composition_he)(torch.randn(2, 5, 3, dtype=torch.float64),
                                   torch.randn(2, 4, 3, dtype=torch.float64))


def run_he_negative(**_):
    from probekit.homomorphism.pairs import PairIndex

    PairIndex(kind="modifier", example=np.array([-1]), a_span=np.array([[0, 1]]),
              b_span=np.array([[1, 2]]), label=("twice",))


def run_text(**_):
    from probekit.inputs import parse_jsonl_line, prompt_column

    prompt_column(parse_jsonl_line('{"text": 5, "y": 1}', path="d.jsonl", lineno=3))


RUNS = {
    "label-1-and-1.0": (run_label_mix, "warns"),
    "split-case": (run_split_case, "warns"),
    "split-unknown": (run_split_unknown, "warns"),
    "test-equals-train": (run_leakage, "warns"),
    "ood-is-train": (run_ood_is_train, ValueError),
    "token-ids-column": (run_token_ids_column, DataError),
    "load-layers-gap": (run_load_layers_gap, ConfigError),
    "site-bool-layer": (lambda **_: Site(True, "resid_post"), ConfigError),
    "site-parse-int": (lambda **_: Site.parse(3), ConfigError),
    "tokens-2d-numpy": (run_tokens_2d, None),
    "tokens-float-tensor": (lambda tmp_path, small_model_module, **_: _capture(
        torch.tensor([[1.0, 2.0, 3.0]]), tmp_path, small_model_module), DataError),
    "tokens-flat-list": (lambda tmp_path, small_model_module, **_: _capture(
        [1, 2, 3], tmp_path, small_model_module), DataError),
    "logistic-C-0": (lambda **_: __import__("probekit.probes", fromlist=["LogisticProbe"]).LogisticProbe(
        C=0).fit(*_xy()), ConfigError),
    "train-idx-duplicated": (lambda **_: _perm(train_idx=np.r_[0, np.arange(30)]), DataError),
    "train-idx-float": (lambda **_: _perm(train_idx=np.arange(30) + 0.5), DataError),
    "zero-features": (run_zero_features, DataError),
    "one-training-class": (run_one_class, DataError),
    "permutation-overlap": (lambda **_: _perm(test_idx=np.arange(20, 40)), DataError),
    "answer-ids-float": (run_answer_float, DataError),
    "n-permutations-float": (lambda **_: check_n_permutations(200.5), ConfigError),
    "seed-negative": (lambda **_: _perm(random_state=-1), ConfigError),
    "table-complex": (lambda **_: _table(m2=[1 + 2j] + [1.0] * 11), DataError),
    "table-400-digits": (lambda **_: _table(m2=[10 ** 400] + [1] * 11), DataError),
    "tl-metric": (run_tl_metric, None),
    "train-api-user-folder": (run_train_user_folder, ConfigError),
    "train-api-out-file": (run_train_out_file, ConfigError),
    "write-report-user-files": (run_write_report_user, ConfigError),
    "diagnose-table-user-markers": (run_diagnose_table_user, ConfigError),
    "api-permutation-test-1e9": (lambda **_: _perm(n_permutations=10**9), ConfigError),
    "api-bootstrap-1e9": (lambda **_: __import__("probekit.stats", fromlist=["bootstrap_ci"]).bootstrap_ci(
        np.mean, np.arange(10.0), n_resamples=10**9), ConfigError),
    "api-marker-analysis-bootstrap-1e9": (run_marker_bootstrap, ConfigError),
    "api-marker-analysis-max-permutations-1e9": (run_marker_max_perm, ConfigError),
    "api-calibrate-simulations-1e9": (run_calibrate, ConfigError),
    "api-granulated-permutations-1e9": (run_granulated, ConfigError),
    "api-interaction-resamples-1e9": (run_interaction, ConfigError),
    "api-causal-design-permutations-1e9": (run_design, ConfigError),
    "api-rsa-permutations-1e9": (run_rsa, ConfigError),
    "api-correctness-permutations-1e9": (lambda **_: __import__(
        "probekit.probes.correctness", fromlist=["CorrectnessConfig"]).CorrectnessConfig(
        n_permutations=10**9), ConfigError),
    "claim-necessity-n-random-1e9": (lambda **_: __import__(
        "probekit.hypotheses.kinds.necessity", fromlist=["NecessitySpec"]).NecessitySpec(
        site="resid_post@0", n_random=10**9), ConfigError),
    "claim-capacity-n-shuffles-1e9": (lambda **_: __import__(
        "probekit.hypotheses.kinds.manifold_capacity", fromlist=["CapacitySpec"]).CapacitySpec(
        site="resid_post@0", n_shuffles=10**9), ConfigError),
    "neurons-n-random-1e9": (lambda **_: __import__(
        "probekit.neurons.config", fromlist=["DeactivationConfig"]).DeactivationConfig(
        n_random=10**9), ConfigError),
    "api-train-config-lr-inf": (lambda **_: __import__("probekit.train", fromlist=["TrainConfig"]).TrainConfig(
        lr=float("inf")), ConfigError),
    "api-train-config-batch-0": (lambda **_: __import__("probekit.train", fromlist=["TrainConfig"]).TrainConfig(
        batch_size=0), ConfigError),
    "api-model-config-layers-0": (lambda **_: dataclasses.replace(TINY_CONFIGS["ln_mha"], n_layers=0),
                                  ConfigError),
    "api-task-config-fraction": (lambda **_: __import__("probekit.testbeds", fromlist=["get_task"]).get_task(
        "modular_addition", train_fraction=1.5), ConfigError),
    "table-duplicate-rows": (run_duplicate_rows, DataError),
    "covariate-numbers-as-text": (run_covariate_numbers, "warns"),
    "covariate-mostly-text": (run_covariate_mostly_text, "warns"),
    "csv-latin-1": (run_latin1, "warns"),
    "csv-utf-16": (run_utf16, None),
    "three-models": (run_three_models, "warns"),
    "claim-p-mismatch": (run_claim_p, ConfigError),
    "geometry-singular": (run_geometry, DataError),
    "he-states-list": (run_he_list, DataError),
    "he-pairs-mismatched": (run_he_mismatched, DataError),
    "he-pairs-negative": (run_he_negative, DataError),
    "text-not-a-string": (run_text, DataError),
}


def test_every_case_has_a_run_and_the_agreed_shape():
    assert [c["id"] for c in CASES] == list(RUNS)
    for case in CASES:
        assert set(case) == {"id", "surface", "input", "message"}, case
        assert all(isinstance(v, str) and v for v in case.values()), case


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_round3_case(case, tmp_path, ckpt, caplog, monkeypatch, small_model_module, single_thread):
    import hashlib

    run, outcome = RUNS[case["id"]]
    _INPUTS.clear()
    try:
        _run_case(case, run, outcome, tmp_path, ckpt, caplog, monkeypatch, small_model_module)
    finally:  # no input file changed (sha256 before and after the call)
        changed = [str(f) for f, digest in _INPUTS.items()
                   if not f.is_file() or hashlib.sha256(f.read_bytes()).hexdigest() != digest]
        assert not changed, f"input files changed: {changed}"


def _run_case(case, run, outcome, tmp_path, ckpt, caplog, monkeypatch, small_model_module):
    kw = dict(tmp_path=tmp_path, ckpt=ckpt, caplog=caplog, monkeypatch=monkeypatch,
              small_model_module=small_model_module)
    if outcome is None:  # accepted: a correct result, nothing to say
        assert case["message"].startswith("(accepted")
        run(**kw)
        return
    if outcome == "warns":
        text = run(**kw)
        assert case["message"] in text, text
        return
    with pytest.raises(outcome) as err:
        run(**kw)
    message = str(err.value)
    assert case["message"] in message, message
    assert "\n" not in message  # one line


# ============================================================================ scale-free markers


def test_marker_statistics_are_scale_free():
    """A marker in units of 1e300 or 1e-170 gets the verdict and p-values of the same marker in
    units of 1 (every statistic is scale-free; before the fix 1e300 overflowed and 1e-170
    underflowed to a constant marker)."""
    from probekit.diagnosis import marker_analysis

    rng = np.random.default_rng(0)
    n = 40
    m, c = rng.normal(size=n), rng.normal(size=n)
    y = 0.5 * m + 0.5 * c + rng.normal(size=n)
    out = {}
    for scale in (1.0, 1e300, 1e-170):
        a = marker_analysis({"y": y, "m": m * scale, "c": c}, "y", covariates=["c"], groups=None,
                            n_permutations=200)
        out[scale] = a.markers[0]
    ref = out[1.0]
    assert ref.verdict == "adds_beyond_covariates"  # the planted effect is found at unit 1
    for scale in (1e300, 1e-170):
        s = out[scale]
        assert s.verdict == ref.verdict
        for key in ("p", "partial_p", "oos_p"):
            assert getattr(s, key) == getattr(ref, key), (scale, key)
        for key in ("pearson", "spearman", "partial_r", "partial_t", "delta_r2"):
            assert math.isclose(getattr(s, key), getattr(ref, key), rel_tol=1e-9, abs_tol=1e-12)
        # the partial-residual plot keeps the marker's own unit
        assert math.isclose(s.marker_residuals[0] / scale, ref.marker_residuals[0], rel_tol=1e-9)


def test_implicit_layer_stack_is_the_layer_index(tmp_path, small_model_module):
    """A contiguous store still stacks by kind: index i is layer i."""
    from probekit.capture import capture_to_store

    seqs = random_sequences(4, 11, seed=3)
    store = capture_to_store(small_model_module, seqs, tmp_path / "s",
                             ["resid_post@1", "resid_post@0"], progress=False)
    stacked = store.load_layers("resid_post")
    torch.testing.assert_close(stacked[1], store.load("resid_post@1"))
