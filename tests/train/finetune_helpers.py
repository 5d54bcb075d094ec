"""A tiny local Llama directory and prompt/answer rows for the fine-tune tests."""

from __future__ import annotations

import json
from pathlib import Path

import torch

WORDS = [f"w{i}" for i in range(20)]


def tiny_llama(directory: Path) -> Path:
    """A 3-block Llama (rotary, grouped KV heads) with a word-level tokenizer over w0..w19."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    vocab = {w: i for i, w in enumerate([*WORDS, "<unk>", "<s>", "</s>", "<pad>"])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<s>",
                            eos_token="</s>", pad_token="<pad>").save_pretrained(directory)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64,
                         num_hidden_layers=3, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=32, initializer_range=0.3,
                         architectures=["LlamaForCausalLM"], bos_token_id=21, eos_token_id=22,
                         pad_token_id=23, tie_word_embeddings=False)
    LlamaForCausalLM(config).eval().save_pretrained(directory)
    return directory


def data_file(path: Path) -> Path:
    """Six ``train`` rows (``"wi wi+1"`` -> ``" w3i mod 20"``) and one ``test_id`` row, as JSONL."""
    rows = [{"prompt": f"w{i} w{i + 1}", "answer": f" w{(3 * i) % 20}", "split": "train"}
            for i in range(6)]
    rows += [{"prompt": "w9", "answer": " w1", "split": "test_id"}]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path
