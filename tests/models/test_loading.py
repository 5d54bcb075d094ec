"""load_model dispatch: registered names, probekit checkpoints, HF directories, bad input."""

import json
import os

import pytest
import torch

from probekit.models import (
    ModelConfig,
    build_model,
    list_models,
    load_model,
    save_checkpoint,
)
from probekit.models.hf import load_hf_dir

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")

TINY = ModelConfig(n_layers=2, d_model=16, n_heads=4, d_head=4, d_vocab=11, n_ctx=12,
                   n_key_value_heads=2, normalization_type="RMS",
                   positional_embedding_type="rotary", act_fn="silu")


def test_list_models():
    models = list_models()
    assert set(models) >= {"smollm2-135m", "gemma3-270m"}
    assert all(isinstance(v, str) and v for v in models.values())


@torch.no_grad()
def test_probekit_checkpoint(tmp_path):
    model = build_model(TINY)
    save_checkpoint(model, TINY, tmp_path / "ckpt")
    loaded = load_model(str(tmp_path / "ckpt"))
    assert loaded.probekit_config == TINY
    assert loaded.probekit_compatibility_mode is False
    assert loaded.probekit_source == str(tmp_path / "ckpt")
    tokens = torch.arange(10)[None] % TINY.d_vocab
    torch.testing.assert_close(loaded(tokens), model(tokens))


def test_checkpoint_rejects_compatibility_mode(tmp_path):
    save_checkpoint(build_model(TINY), TINY, tmp_path / "ckpt")
    with pytest.raises(ValueError, match="compatibility_mode=False"):
        load_model(tmp_path / "ckpt", compatibility_mode=True)


@pytest.mark.parametrize("kind", ["missing", "file", "empty_dir", "foreign_config"])
def test_bad_path_lists_valid_names(tmp_path, kind):
    target = tmp_path / "thing"
    if kind == "file":
        target.write_text("x")
    elif kind == "empty_dir":
        target.mkdir()
    elif kind == "foreign_config":
        target.mkdir()
        (target / "config.json").write_text(json.dumps({"hello": 1}))
    with pytest.raises(ValueError) as info:
        load_model(str(target))
    message = str(info.value)
    assert "smollm2-135m" in message and "gemma3-270m" in message
    assert "probekit-checkpoint/1" in message and "model_type" in message
    expected = {"missing": "neither a registered", "file": "is a file",
                "empty_dir": "without config.json", "foreign_config": "neither a probekit"}[kind]
    assert expected in message


def test_typo_name_is_rejected():
    with pytest.raises(ValueError, match=r"'smollm2'.*\['gemma3-270m', 'smollm2-135m'\]"):
        load_model("smollm2")


# ------------------------------------------------------------------ any local HF directory


@pytest.fixture(scope="module")
def tiny_hf_dir(tmp_path_factory):
    """A random 2-layer GQA Llama with a word-level tokenizer, saved like any HF model."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    directory = tmp_path_factory.mktemp("tinyhf")
    words = [f"w{i}" for i in range(60)]
    vocab = {w: i for i, w in enumerate([*words, "<unk>", "<s>", "</s>", "<pad>"])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>",
                                        bos_token="<s>", eos_token="</s>", pad_token="<pad>")
    tokenizer.save_pretrained(directory)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=32, bos_token_id=vocab["<s>"],
                         eos_token_id=vocab["</s>"], pad_token_id=vocab["<pad>"],
                         architectures=["LlamaForCausalLM"])
    LlamaForCausalLM(config).eval().save_pretrained(directory)
    return directory


@torch.no_grad()
def test_hf_dir_matches_transformers(tiny_hf_dir):
    from transformers import AutoModelForCausalLM

    bridge = load_model(str(tiny_hf_dir))
    assert bridge.probekit_hf_dir == str(tiny_hf_dir)
    assert bridge.probekit_compatibility_mode is False
    reference = AutoModelForCausalLM.from_pretrained(tiny_hf_dir, dtype=torch.float32).eval()
    tokens = bridge.to_tokens("w1 w2 w3 w4 w5", prepend_bos=False)
    assert tokens[0].tolist() == [1, 2, 3, 4, 5]
    diff = (bridge(tokens).log_softmax(-1) - reference(tokens).logits.log_softmax(-1)).abs().max()
    assert diff.item() <= 1e-4


def test_hf_dir_prepend_bos_override(tiny_hf_dir):
    bridge = load_hf_dir(tiny_hf_dir, prepend_bos=False)
    assert bridge.cfg.default_prepend_bos is False
    assert bridge.to_tokens("w7")[0].tolist() == [7]


def test_hf_dir_without_config(tmp_path):
    (tmp_path / "model.safetensors").write_bytes(b"")
    with pytest.raises(FileNotFoundError, match=r"config\.json not found.*model\.safetensors"):
        load_hf_dir(tmp_path)


def test_hf_dir_without_tokenizer(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "llama"}))
    with pytest.raises(FileNotFoundError, match="no tokenizer.*tokenizer.save_pretrained"):
        load_hf_dir(tmp_path)


def test_hf_loader_rejects_probekit_checkpoint(tmp_path):
    save_checkpoint(build_model(TINY), TINY, tmp_path)
    with pytest.raises(ValueError, match="probekit checkpoint.*load_checkpoint"):
        load_hf_dir(tmp_path)


def test_hf_loader_rejects_missing_dir(tmp_path):
    with pytest.raises(FileNotFoundError, match="not a directory"):
        load_hf_dir(tmp_path / "nope")


def test_safetensors_header_length_with_low_byte_0x80_is_not_taken_for_a_pickle(tmp_path):
    # the 8-byte header length opens the file; 0x80 as its low byte once made it look like a
    # raw pickle (protocol >= 2), refusing a real checkpoint
    from safetensors.torch import load_file, save_file

    from probekit.models.checkpoint import check_safetensors_file

    path = tmp_path / "w.safetensors"
    for pad in range(256):
        save_file({"w": torch.arange(3.0)}, str(path), metadata={"pad": "x" * pad})
        if path.read_bytes()[0] == 0x80:
            break
    assert path.read_bytes()[0] == 0x80 and path.read_bytes()[8:9] == b"{"
    check_safetensors_file(path)  # no error
    torch.testing.assert_close(load_file(str(path))["w"], torch.arange(3.0))
