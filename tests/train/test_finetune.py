"""Fine-tuning a Hugging Face LM (probekit.train.finetune) on a tiny local Llama directory."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from probekit.errors import ConfigError, DataError
from probekit.train import finetune as ft
from probekit.train.finetune_config import FinetuneConfig
from probekit.train.finetune_data import batch_rows
from probekit.train.finetune_presets import build_finetune
from tests.train.finetune_helpers import data_file as _data
from tests.train.finetune_helpers import tiny_llama as _tiny_llama


@pytest.fixture(autouse=True)
def _one_thread(single_thread):
    """Tiny GEMMs on a shared 2-core box: one torch thread is fastest (tests/conftest.py)."""


@pytest.fixture(scope="module")
def tiny_dir(tmp_path_factory) -> Path:
    return _tiny_llama(tmp_path_factory.mktemp("tiny-base"))


def _config(tiny_dir: Path, data: Path, **kw) -> FinetuneConfig:
    base = dict(base_model=str(tiny_dir), data=str(data), method="lora", rank=4, alpha=8.0,
                target_modules=("q_proj", "down_proj"), trainable_layers=(-1,), steps=25,
                lr=2e-2, batch_size=3, max_length=8)
    return FinetuneConfig(**{**base, **kw})


def _changed(base: Path, ckpt: Path) -> set[str]:
    a, b = load_file(str(base / "model.safetensors")), load_file(str(ckpt / "model.safetensors"))
    assert set(a) == set(b)
    return {k for k in a if not torch.equal(a[k], b[k])}


def test_answer_only_labels_mask_the_prompt(tiny_dir):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(tiny_dir))
    rows = [{"prompt": "w1 w2", "answer": " w3"}, {"prompt": "", "answer": "w4 w5"}]
    enc = ft.encode_rows(tok, rows, max_length=8, answer_only=True, add_eos=True)
    assert enc == [([1, 2, 3, 22], [-100, -100, 3, 22]), ([4, 5, 22], [4, 5, 22])]
    full = ft.encode_rows(tok, rows[:1], max_length=3, answer_only=False, add_eos=True)
    assert full == [([1, 2, 3], [1, 2, 3])]  # truncated on the right, prompt scored
    with pytest.raises(DataError, match="max_length=2 leaves no answer token"):
        ft.encode_rows(tok, rows[:1], max_length=2, answer_only=True, add_eos=False)


def test_lora_learns_and_merged_weights_differ_only_in_targeted_modules(tiny_dir, tmp_path):
    cfg = _config(tiny_dir, _data(tmp_path / "d.jsonl"), checkpoint_steps=(10,))
    hist = ft.finetune(cfg, tmp_path / "run")
    losses = [r["batch_loss"] for r in hist.records]
    assert len(losses) == 25 and losses[-1] < 0.5 * losses[0]
    ckpts = ft.list_finetune_checkpoints(tmp_path / "run")
    assert [s for s, _ in ckpts] == [10, 25]
    for step, d in ckpts:  # LoRA merged: a plain model, changed only where adapters were
        assert _changed(tiny_dir, d) == {"model.layers.2.self_attn.q_proj.weight",
                                         "model.layers.2.mlp.down_proj.weight"}
        meta = ft.read_finetune_meta(d)
        assert meta["step"] == step and meta["final"] == (step == 25)
        assert len(meta["history"]) == step and meta["base_model"] == str(tiny_dir)
        assert not any("lora" in k for k in load_file(str(d / "model.safetensors")))
    # the merged checkpoint computes what the trained adapters did: its loss on the batch
    # rows is the low loss the run ended with, not the base model's
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(ckpts[-1][1]))
    rows = ft.read_rows(cfg.data, "train")
    ids, labels, mask = batch_rows(ft.encode_rows(tok, rows, max_length=8, answer_only=True,
                                                 add_eos=True), 23)

    def loss(path: Path) -> float:
        m = AutoModelForCausalLM.from_pretrained(str(path), dtype=torch.float32).eval()
        with torch.no_grad():
            logits = m(input_ids=ids, attention_mask=mask).logits[:, :-1]
        return float(torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                                                       labels[:, 1:].reshape(-1)))

    assert loss(ckpts[-1][1]) < 0.5 * loss(tiny_dir)


def test_full_finetune_trains_only_the_targeted_blocks(tiny_dir, tmp_path):
    cfg = _config(tiny_dir, _data(tmp_path / "d.jsonl"), method="full", steps=3,
                  trainable_layers=(0, 2), target_modules=("up_proj",))
    ft.finetune(cfg, tmp_path / "run")
    (_, d), = ft.list_finetune_checkpoints(tmp_path / "run")
    assert _changed(tiny_dir, d) == {"model.layers.0.mlp.up_proj.weight",
                                     "model.layers.2.mlp.up_proj.weight"}


def test_same_seed_same_history_other_seed_differs(tiny_dir, tmp_path):
    data = _data(tmp_path / "d.jsonl")
    runs = [ft.finetune(_config(tiny_dir, data, steps=4, seed=s), tmp_path / f"r{i}")
            for i, s in enumerate((0, 0, 1))]
    loss = [[r["batch_loss"] for r in h.records] for h in runs]
    assert loss[0] == loss[1] and loss[0] != loss[2]


def test_finished_run_is_cached_interrupted_restarts_other_config_refused(tiny_dir, tmp_path,
                                                                          monkeypatch):
    cfg = _config(tiny_dir, _data(tmp_path / "d.jsonl"), steps=3)
    first = ft.finetune(cfg, tmp_path / "run")

    def boom(*a, **k):
        raise AssertionError("a finished run must not load its model again")

    monkeypatch.setattr(ft, "_load_base", boom)
    assert ft.finetune(cfg, tmp_path / "run").records == first.records
    monkeypatch.undo()
    # killed before its last save: a half-written temp dir and no final checkpoint
    final = ft.list_finetune_checkpoints(tmp_path / "run")[-1][1]
    tmp = final.parent / ".tmp-step_0000003-999"
    final.rename(tmp)
    again = ft.finetune(cfg, tmp_path / "run")
    assert [r["batch_loss"] for r in again.records] == [r["batch_loss"] for r in first.records]
    assert not tmp.exists() and [s for s, _ in ft.list_finetune_checkpoints(tmp_path / "run")] == [3]
    with pytest.raises(ConfigError, match="holds a fine-tune of another config"):
        ft.finetune(_config(tiny_dir, Path(cfg.data), steps=4), tmp_path / "run")


def test_bad_configs_and_data_are_named(tiny_dir, tmp_path):
    with pytest.raises(ConfigError, match=r"FinetuneConfig.rank must be >= 1, got 0"):
        FinetuneConfig(rank=0)
    with pytest.raises(ConfigError, match=r"FinetuneConfig.method must be one of \['lora', 'full'\], got 'qlora'"):
        build_finetune("smollm2_bio_smoke", sets=["train.method=qlora"])
    with pytest.raises(ConfigError, match="checkpoint_steps must be <= steps=5"):
        FinetuneConfig(steps=5, checkpoint_steps=(6,))
    data = _data(tmp_path / "d.jsonl")
    with pytest.raises(ConfigError, match=r"block 3 does not exist; the model has 3 blocks"):
        ft.finetune(_config(tiny_dir, data, trainable_layers=(3,)), tmp_path / "a")
    with pytest.raises(ConfigError, match=r"no such linear layer.*'gate_proj'"):
        ft.finetune(_config(tiny_dir, data, target_modules=("c_attn",)), tmp_path / "b")
    if not torch.cuda.is_available():
        from probekit.errors import DeviceError

        with pytest.raises(DeviceError):
            ft.finetune(_config(tiny_dir, data, device="cuda"), tmp_path / "d")
        assert not (tmp_path / "d").exists()
    with pytest.raises(ConfigError, match="neither a registered model"):
        ft.finetune(_config(tmp_path, data), tmp_path / "c")
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"prompt": "w1", "answer": " w2", "split": "train"}\n{"prompt": 3}\n')
    with pytest.raises(DataError, match=r"bad.jsonl:2: key 'prompt' must be a string"):
        ft.read_rows(bad, "train")
    with pytest.raises(DataError, match=r"no row has split 'dev' \(splits: \['test_id', 'train'\]\)"):
        ft.read_rows(data, "dev")


def test_presets_take_train_and_task_keys(tmp_path):
    s = build_finetune("smollm2_bio_smoke", seed=3, steps=2,
                       sets=["task.augmentation=3", "train.rank=2", "lr=1e-2"])
    assert (s.config.seed, s.config.steps, s.config.rank, s.config.lr) == (3, 2, 2, 0.01)
    # the run seed seeds the fine-tune, not the people (one evaluation file for the population)
    assert s.testbed_config.augmentation == 3 and s.testbed_config.seed == 0
    assert s.extra()["task_config"]["n_people"] == 16
    with pytest.raises(ConfigError, match=r"FinetuneConfig.rank must be >= 1, got 0"):
        build_finetune("smollm2_bio_smoke", sets=["train.rank=0"])
    with pytest.raises(ConfigError, match=r"'task.n_peple=3': not a key of this fine-tune preset"):
        build_finetune("smollm2_bio_smoke", sets=["task.n_peple=3"])
    with pytest.raises(ConfigError, match=r"FinetuneConfig.steps must be an int, got 'x'"):
        build_finetune("smollm2_bio_smoke", sets=["train.steps=x"])
    with pytest.raises(ConfigError, match="reads train.data"):
        build_finetune("smollm2_finetune")
    with pytest.raises(ConfigError, match=r"unknown preset 'nope'; registered presets are \["):
        build_finetune("nope")
    with pytest.raises(ConfigError, match=r"preset 'scan' trains a testbed model from scratch; this "
                       r"needs a fine-tune preset: one of \['smollm2_bio', 'smollm2_bio_smoke', "
                       r"'smollm2_finetune'\]"):
        build_finetune("scan")


def test_probekit_train_runs_a_finetune_preset_and_reruns_it_from_cache(tiny_dir, tmp_path, capsys,
                                                                       monkeypatch):
    from probekit.cli import main

    data = _data(tmp_path / "d.jsonl")
    argv = ["train", "smollm2_finetune", "--out", str(tmp_path / "run"), "--steps", "2",
            "--set", f"train.base_model={tiny_dir}", "--set", f"train.data={data}",
            "--set", 'train.target_modules=["q_proj"]', "--set", "train.trainable_layers=[-1]",
            "--set", "train.max_length=8", "--no-progress"]
    assert main(argv) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == {"out": str(tmp_path / "run"),
                                                                    "step": 2}
    (step, ckpt), = ft.list_finetune_checkpoints(tmp_path / "run")
    assert step == 2 and ft.read_finetune_meta(ckpt)["config"]["target_modules"] == ["q_proj"]
    monkeypatch.setattr(ft, "_load_base", lambda *a: pytest.fail("retrained a finished run"))
    assert main(argv) == 0
    capsys.readouterr()
    assert main([*argv[:4], "--set", "train.rank=0"]) == 2
    assert "FinetuneConfig.rank must be >= 1, got 0" in capsys.readouterr().err


def _weights(ckpt: Path) -> dict[str, torch.Tensor]:
    return load_file(str(ckpt / "model.safetensors"))


@pytest.mark.parametrize("method", ["lora", "full"])
def test_top_blocks_fast_path_trains_as_the_full_forward_does(tiny_dir, tmp_path, monkeypatch,
                                                             method):
    """trainable_blocks = 1 (cached block-2 input, packed rows) vs the same block through the
    full forward: the same losses and weights, the cache computed once for two seeds."""
    from probekit.train import block_inputs as bi

    computed: list[int] = []
    real = bi.compute_block_inputs
    monkeypatch.setattr(bi, "compute_block_inputs",
                        lambda m, ids, first, batch_size=16: computed.append(first)
                        or real(m, ids, first, batch_size))
    data = _data(tmp_path / "d.jsonl")
    full = ft.finetune(_config(tiny_dir, data, method=method, steps=6), tmp_path / "full")
    cfg = _config(tiny_dir, data, method=method, steps=6, trainable_layers=None,
                  trainable_blocks=1)
    fast = ft.finetune(cfg, tmp_path / "fast", input_cache=tmp_path / "cache")
    a = [r["batch_loss"] for r in full.records]
    b = [r["batch_loss"] for r in fast.records]
    assert b == pytest.approx(a, rel=1e-5) and b[-1] < b[0] - 0.5
    (_, d_full), = ft.list_finetune_checkpoints(tmp_path / "full")
    (_, d_fast), = ft.list_finetune_checkpoints(tmp_path / "fast")
    assert _changed(tiny_dir, d_fast) == _changed(tiny_dir, d_full) == {
        "model.layers.2.self_attn.q_proj.weight", "model.layers.2.mlp.down_proj.weight"}
    base, w_full, w_fast = _weights(tiny_dir), _weights(d_full), _weights(d_fast)
    for name in _changed(tiny_dir, d_full):
        step = w_full[name] - base[name]
        assert float((w_fast[name] - w_full[name]).norm() / step.norm()) < 1e-4
    meta = ft.read_finetune_meta(d_fast)
    assert meta["first_cached_block"] == 2 and meta["block_input_cache"] == str(tmp_path / "cache")
    ft.finetune(dataclasses.replace(cfg, seed=1, lr=1e-2), tmp_path / "fast_s1",
                input_cache=tmp_path / "cache")
    assert computed == [2]  # one computation shared by both seeds and learning rates


def test_bfloat16_autocast_trains_close_to_float32(tiny_dir, tmp_path):
    data = _data(tmp_path / "d.jsonl")
    kw = dict(steps=6, trainable_layers=None, trainable_blocks=2)
    f32 = ft.finetune(_config(tiny_dir, data, **kw), tmp_path / "a", input_cache=tmp_path / "c")
    b16 = ft.finetune(_config(tiny_dir, data, dtype="bfloat16", **kw), tmp_path / "b",
                      input_cache=tmp_path / "c")
    a = [r["batch_loss"] for r in f32.records]
    b = [r["batch_loss"] for r in b16.records]
    assert b != a and b == pytest.approx(a, rel=5e-2) and b[-1] < b[0] - 0.5


def test_config_keys_of_runs_recorded_before_the_fast_path_are_unchanged(tmp_path):
    """The new fields enter a run's identity only when set: earlier runs stay cached."""
    from probekit.util.io import sha256_bytes, sha256_file

    data = _data(tmp_path / "d.jsonl")
    cfg = FinetuneConfig(data=str(data), trainable_layers=(-1,))
    old = {k: v for k, v in cfg.to_dict().items() if k not in ("trainable_blocks", "dtype")}
    payload = {"config": {**old, "data": sha256_file(data)}, "extra": {}, "format": ft.FORMAT}
    assert ft.config_key(cfg) == sha256_bytes(json.dumps(payload, sort_keys=True).encode())[:16]
    keys = {ft.config_key(c) for c in (cfg, dataclasses.replace(cfg, dtype="bfloat16"),
                                        dataclasses.replace(cfg, trainable_layers=None,
                                                            trainable_blocks=1))}
    assert len(keys) == 3


def test_trainable_blocks_is_a_grid_key_and_exclusive_with_trainable_layers(tiny_dir, tmp_path):
    s = build_finetune("smollm2_finetune", sets=["train.data=x.jsonl", "train.trainable_blocks=2",
                                                 "train.dtype=bfloat16"])
    assert (s.config.trainable_blocks, s.config.dtype, s.config.trainable_layers) == (2, "bfloat16",
                                                                                      None)
    with pytest.raises(ConfigError, match=r"trainable_blocks = 2 and trainable_layers = \[-2, -1\] "
                                          r"both choose.*add trainable_layers=null"):
        build_finetune("smollm2_bio_smoke", sets=["train.trainable_blocks=2"])
    s = build_finetune("smollm2_bio_smoke", sets=["train.trainable_blocks=2",
                                                  "train.trainable_layers=null"])
    assert s.config.trainable_blocks == 2
    with pytest.raises(ConfigError, match=r"FinetuneConfig.trainable_blocks must be >= 1, got 0"):
        FinetuneConfig(trainable_blocks=0)
    with pytest.raises(ConfigError, match=r"dtype must be one of \['float32', 'bfloat16'\]"):
        build_finetune("smollm2_bio_smoke", sets=["train.dtype=float16"])
    with pytest.raises(ConfigError, match=r"trainable_blocks = 4: the model has 3 blocks"):
        ft.finetune(_config(tiny_dir, _data(tmp_path / "d.jsonl"), trainable_layers=None,
                            trainable_blocks=4), tmp_path / "r", input_cache=tmp_path / "c")
