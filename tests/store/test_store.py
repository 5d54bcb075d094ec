import json
import os
import select
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import torch

from probekit.capture import AllTokens, all_layers, capture_to_store, collect_activations
from probekit.models import ModelConfig, build_model, load_checkpoint, save_checkpoint
from probekit.store import ActivationStore, CorruptShardError
from tests.conftest import random_sequences

ROOT = Path(__file__).resolve().parents[2]


def test_store_round_trip_matches_in_memory(small_model, tmp_path):
    seqs = random_sequences(23, small_model.cfg.d_vocab, seed=4)
    labels = [i % 3 for i in range(len(seqs))]
    words = [f"w{i}" for i in range(len(seqs))]
    sites = all_layers(small_model)
    store = capture_to_store(
        small_model, seqs, tmp_path / "s", sites, metadata={"label": labels, "word": words},
        batch_size=4, examples_per_shard=8, progress=False,
    )
    mem = collect_activations(small_model, seqs, sites, batch_size=4, progress=False)
    assert len(store.manifest.shards) == 3  # 8 examples per shard -> 8, 8, 7
    assert [s.rows for s in store.manifest.shards] == [8, 8, 7]
    for site in sites:
        torch.testing.assert_close(store.load(site), mem[site], rtol=0, atol=0)
    assert store.load_layers().shape == (2, 23, 16)
    meta = store.metadata()
    np.testing.assert_array_equal(meta["label"], labels)
    assert meta["word"] == words
    assert store.examples().tolist() == list(range(23))
    store.verify()
    store.check_model(small_model)
    # mmap views are read-only and shard-sized
    parts = list(store.iter_shards(sites[0]))
    assert [p.shape[0] for p in parts] == [8, 8, 7]


def test_all_tokens_rows_carry_metadata(small_model, tmp_path):
    seqs = [[1, 2, 3], [4, 5], [6]]
    store = capture_to_store(
        small_model, seqs, tmp_path / "s", ["resid_post@0"], metadata={"y": [10, 20, 30]},
        positions=AllTokens(), progress=False,
    )
    assert store.n_rows == 6
    assert store.examples().tolist() == [0, 0, 0, 1, 1, 2]
    assert store.positions().tolist() == [0, 1, 2, 0, 1, 0]
    assert store.metadata()["y"].tolist() == [10, 10, 10, 20, 20, 30]


def test_python_capture_keeps_prompt_token_ids_and_text(small_model, tmp_path, monkeypatch):
    class Letters:  # a stub tokenizer: id i -> chr(ord("a") + i)
        def decode(self, ids):
            return "".join(chr(ord("a") + i) for i in ids)

    seqs = [[1, 2, 3], [4, 5]]
    store = capture_to_store(small_model, seqs, tmp_path / "s", ["resid_post@0"], progress=False)
    assert store.metadata()["token_ids"] == [[1, 2, 3], [4, 5]] and "text" not in store.metadata()
    monkeypatch.setattr(small_model, "tokenizer", Letters(), raising=False)
    store = capture_to_store(small_model, seqs, tmp_path / "t", ["resid_post@0"], progress=False)
    assert list(store.metadata()["text"]) == ["bcd", "ef"]
    given = capture_to_store(small_model, seqs, tmp_path / "u", ["resid_post@0"],
                             metadata={"text": ["x", "y"]}, progress=False)
    assert list(given.metadata()["text"]) == ["x", "y"]  # the caller's column wins


def test_rerun_is_noop_and_mismatch_is_refused(small_model, tmp_path):
    seqs = random_sequences(6, small_model.cfg.d_vocab, seed=5)
    capture_to_store(small_model, seqs, tmp_path / "s", ["resid_post@0"], progress=False)
    before = {p.name: p.stat().st_mtime_ns for p in (tmp_path / "s").iterdir()}
    capture_to_store(small_model, seqs, tmp_path / "s", ["resid_post@0"], progress=False)
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "s").iterdir()} == before
    other = build_model(ModelConfig(n_layers=2, d_model=16, n_heads=2, d_head=8, d_vocab=11, n_ctx=12, seed=1))
    with pytest.raises(ValueError, match="model_fingerprint: store has"):
        capture_to_store(other, seqs, tmp_path / "s", ["resid_post@0"], progress=False)
    with pytest.raises(ValueError, match="sites: store has"):
        capture_to_store(small_model, seqs, tmp_path / "s", ["resid_post@1"], progress=False)
    with pytest.raises(ValueError, match="not from this model"):
        ActivationStore(tmp_path / "s").check_model(other)
    assert {p.name: p.stat().st_mtime_ns for p in (tmp_path / "s").iterdir()} == before


def test_corrupt_and_truncated_shards_are_named(small_model, tmp_path):
    seqs = random_sequences(8, small_model.cfg.d_vocab, seed=6)
    store = capture_to_store(small_model, seqs, tmp_path / "s", ["resid_post@0"], examples_per_shard=4, batch_size=4, progress=False)
    shard = tmp_path / "s" / store.manifest.shards[1].file
    data = bytearray(shard.read_bytes())
    data[-3] ^= 0xFF
    shard.write_bytes(bytes(data))
    with pytest.raises(CorruptShardError, match="shard-00001.safetensors fails its checksum"):
        ActivationStore(tmp_path / "s").verify()
    with pytest.raises(CorruptShardError, match="shard-00001.safetensors does not match"):
        capture_to_store(small_model, seqs, tmp_path / "s", ["resid_post@0"], examples_per_shard=4, batch_size=4, progress=False)
    shard.write_bytes(bytes(data[:-10]))
    with pytest.raises(CorruptShardError, match="shard-00001.safetensors is truncated"):
        ActivationStore(tmp_path / "s")


def test_metadata_length_mismatch(small_model, tmp_path):
    with pytest.raises(ValueError, match="'label' has 1 values but there are 2 examples"):
        capture_to_store(small_model, [[1], [2]], tmp_path / "s", ["resid_post@0"], metadata={"label": [0]}, progress=False)


SCRIPT = textwrap.dedent(
    """
    import sys, time
    from probekit.capture import all_layers, capture_to_store
    from probekit.models import load_checkpoint
    from probekit.store import StoreWriter
    model = load_checkpoint(sys.argv[1])
    seqs = [[int(t) for t in line.split()] for line in open(sys.argv[3])]
    orig = StoreWriter.write_shard
    def stall(self, *a, **k):  # stall after the first shard so the parent can kill us mid-run
        info = orig(self, *a, **k)
        print("SHARD", info.file, flush=True)
        time.sleep(600)
        return info
    StoreWriter.write_shard = stall
    capture_to_store(model, seqs, sys.argv[2], all_layers(model), metadata={"i": list(range(len(seqs)))},
                     batch_size=5, examples_per_shard=10, progress=False)
    print("DONE", flush=True)
    """
)


def test_killed_capture_resumes_to_identical_store(small_model, tmp_path):
    """SIGKILL a capture subprocess after its first shard; resuming gives the uninterrupted store.

    Only the killed run needs a process of its own; the reference and the resume run here, from
    the same checkpoint, so shard bytes must also agree across processes.
    """
    ckpt = save_checkpoint(small_model, small_model_config(), tmp_path / "ckpt")
    model = load_checkpoint(ckpt)
    seqs = random_sequences(30, 11, seed=5)
    (tmp_path / "seqs.txt").write_text("\n".join(" ".join(map(str, s)) for s in seqs))
    script = tmp_path / "cap.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    run = tmp_path / "run"
    proc = subprocess.Popen(
        [sys.executable, str(script), str(ckpt), str(run), str(tmp_path / "seqs.txt")],
        stdout=subprocess.PIPE, text=True, env=env,
    )
    try:  # wait until the first shard is on disk (or the child dies)
        ready, _, _ = select.select([proc.stdout], [], [], 240)
        line = proc.stdout.readline() if ready else "timed out"
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait()
    assert line == "SHARD shard-00000.safetensors\n"
    partial = json.loads((run / "manifest.json").read_text())
    assert not partial["complete"] and len(partial["shards"]) == 1
    with pytest.raises(ValueError, match="incomplete \\(10 of 30 examples\\)"):
        ActivationStore(run)
    kw = dict(metadata={"i": list(range(30))}, batch_size=5, examples_per_shard=10, progress=False)
    first = (run / "shard-00000.safetensors").stat().st_ino
    capture_to_store(model, seqs, run, all_layers(model), **kw)  # resumes after shard 0
    assert (run / "shard-00000.safetensors").stat().st_ino == first  # kept, not rewritten
    capture_to_store(model, seqs, tmp_path / "ref", all_layers(model), **kw)
    ref = json.loads((tmp_path / "ref" / "manifest.json").read_text())
    got = json.loads((run / "manifest.json").read_text())
    assert got["complete"] and len(got["shards"]) == 3
    assert got["shards"] == ref["shards"]  # same files, rows and sha256
    for shard in ref["shards"]:
        assert (run / shard["file"]).read_bytes() == (tmp_path / "ref" / shard["file"]).read_bytes()


def small_model_config():
    from tests.conftest import TINY_CONFIGS

    return TINY_CONFIGS["ln_mha"]
