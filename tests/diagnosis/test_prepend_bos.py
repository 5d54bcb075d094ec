"""``prepend_bos`` in a population of real models follows each model's own default (issue 56.5).

A Hugging Face directory's default is its tokenizer's habit (a tokenizer that puts its BOS
token before a text by itself: ``True``; one that does not: ``False``), not the bridge's
``True`` for every model; ``[data] prepend_bos`` is unset by default; a value forced on a
population that mixes model families is warned about, naming the line and the families.
"""

from __future__ import annotations

import shutil
import warnings

from probekit.diagnosis.spec import load_diagnosis
from probekit.models.bos import DERIVED_FROM, own_prepend_bos, tokenizer_adds_bos
from probekit.models.hf import load_hf_dir
from probekit.suites.spec import DataSpec
from tests.diagnosis.test_real_models import _file, population  # noqa: F401 (fixture)


def _with_bos(src, dst):
    """A copy of a model directory whose tokenizer puts ``<s>`` before every text (as Gemma's)."""
    from tokenizers import Tokenizer
    from tokenizers.processors import TemplateProcessing

    shutil.copytree(src, dst)
    tok = Tokenizer.from_file(str(dst / "tokenizer.json"))
    bos = tok.token_to_id("<s>")
    tok.post_processor = TemplateProcessing(single="<s> $A", pair="<s> $A $B",
                                            special_tokens=[("<s>", bos)])
    tok.save(str(dst / "tokenizer.json"))
    return dst


def test_an_hf_directory_follows_its_tokenizers_bos_habit(population, tmp_path):  # noqa: F811
    """The fixture's tokenizer adds no BOS (as GPT-2's); with ``add_bos_token`` it does (Gemma)."""
    from transformers import AutoTokenizer

    without = load_hf_dir(population / "gpt-a")
    with_bos = load_hf_dir(_with_bos(population / "gpt-a", tmp_path / "bos"))
    bos = with_bos.tokenizer.bos_token_id
    assert not tokenizer_adds_bos(AutoTokenizer.from_pretrained(population / "gpt-a"))
    assert tokenizer_adds_bos(AutoTokenizer.from_pretrained(tmp_path / "bos"))
    assert without.cfg.default_prepend_bos is False and with_bos.cfg.default_prepend_bos is True
    assert with_bos.to_tokens("w1 w2")[0].tolist() == [bos, 1, 2]
    assert without.to_tokens("w1 w2")[0].tolist() == [1, 2]
    assert load_hf_dir(population / "gpt-a", prepend_bos=True).cfg.default_prepend_bos is True


def test_a_finetune_of_a_registered_model_takes_its_base_models_default(population, tmp_path):  # noqa: F811
    """SmolLM2's tokenizer adds <|im_start|>, but SmolLM2 is used without BOS: its fine-tunes too."""
    from probekit.models.real import MANIFEST_FILE
    from probekit.train.finetune import FINETUNE_META

    assert DERIVED_FROM == ((MANIFEST_FILE, "model"), (FINETUNE_META, "base_model"))
    ft = _with_bos(population / "gpt-a", tmp_path / "ft")
    assert own_prepend_bos(ft) is True  # its tokenizer's habit
    (ft / FINETUNE_META).write_text('{"base_model": "smollm2-135m"}')
    assert own_prepend_bos(ft) is False and own_prepend_bos("gemma3-270m") is True
    (ft / FINETUNE_META).write_text(f'{{"base_model": "{population / "gpt-a"}"}}')
    assert own_prepend_bos(ft) is False  # a directory base: that directory's own default


def test_data_prepend_bos_is_unset_by_default():
    assert DataSpec(label="y").prepend_bos is None


def _load(path):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        spec = load_diagnosis(path)
    return spec, [str(w.message) for w in caught if "prepend_bos" in str(w.message)]


def test_a_forced_value_on_mixed_families_is_warned(population):  # noqa: F811
    forced = '[data]\nfile = "examples.jsonl"\nlabel = "label"\nprepend_bos = false'
    _, (message,) = _load(_file(population, "bos_mixed", data=forced, outcome='[outcome]\nfile = "eval.jsonl"'))
    assert message.startswith("") and "bos_mixed.toml:" in message
    assert message.split(": ", 1)[1].startswith(
        "[data] prepend_bos = false is applied to every model, but the population mixes model "
        "families (GPT2LMHeadModel: gpt-a, gpt-b; LlamaForCausalLM: llama-a, llama-b)")
    assert message.endswith("remove prepend_bos to follow each model's own default")
    # unset everywhere, or one family: nothing to warn about
    spec, none = _load(_file(population, "bos_free", outcome='[outcome]\nfile = "eval.jsonl"'))
    assert none == [] and spec.suite.data.prepend_bos is None
    _, same = _load(_file(population, "bos_one", data=forced, models='["gpt-a", "gpt-b"]',
                          design='[population.design]\n"gpt-a" = { size = 1, seed = 0 }\n'
                          '"gpt-b" = { size = 2, seed = 1 }', outcome='[outcome]\nfile = "eval.jsonl"'))
    assert same == []


def test_a_forced_outcome_value_is_warned_too(population):  # noqa: F811
    _, (message,) = _load(_file(population, "bos_outcome"))  # [outcome] prepend_bos = false
    assert "[outcome] prepend_bos = false is applied to every model" in message


