"""A tiny Hugging Face Llama (GQA, rotary, RMSNorm) booted like any local HF directory.

TL-native testbed bridges take no KV cache; this model exercises patching's KV-prefix path.
"""

import pytest
import torch


@pytest.fixture(scope="session")
def tiny_hf_model(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    from probekit.models import load_model

    directory = tmp_path_factory.mktemp("tinyllama")
    vocab = {w: i for i, w in enumerate([*(f"w{i}" for i in range(20)), "<unk>", "<s>", "</s>", "<pad>"])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                            pad_token="<pad>").save_pretrained(directory)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                         num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=32,
                         bos_token_id=vocab["<s>"], eos_token_id=vocab["</s>"], pad_token_id=vocab["<pad>"],
                         architectures=["LlamaForCausalLM"])
    LlamaForCausalLM(config).eval().save_pretrained(directory)
    return load_model(str(directory))
