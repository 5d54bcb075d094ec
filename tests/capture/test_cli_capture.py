import json

import torch

from probekit.capture import Site, TokenIndex, collect_activations
from probekit.cli import main
from probekit.models import save_checkpoint
from probekit.store import ActivationStore
from tests.conftest import TINY_CONFIGS, random_sequences


def test_cli_capture_matches_collect_activations(small_model, tmp_path, capsys):
    ckpt = save_checkpoint(small_model, TINY_CONFIGS["ln_mha"], tmp_path / "ckpt")
    seqs = random_sequences(7, small_model.cfg.d_vocab, lo=3, seed=9)
    rows = [{"tokens": s, "idx": 1, "label": i % 2} for i, s in enumerate(seqs)]
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(json.dumps(r) for r in rows))
    args = ["capture", str(ckpt), str(data), "--out", str(tmp_path / "s"), "--sites", "resid_post@1"]
    assert main([*args, "--positions", "idx", "--padding-side", "left"]) == 0
    store = ActivationStore(tmp_path / "s")
    want = collect_activations(small_model, seqs, [Site(1, "resid_post")], positions=TokenIndex([1] * 7), progress=False)
    torch.testing.assert_close(store.load("resid_post@1"), want[Site(1, "resid_post")], atol=1e-5, rtol=1e-5)
    assert store.metadata()["label"].tolist() == [i % 2 for i in range(7)]
    assert main([*args[:4], str(tmp_path / "s2"), "--positions", "nope"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1:] == ["probekit capture: error: positions 'nope': use 'last' (last token), 'all' (every "
                   "token) or 'column:NAME' (an integer column holding the token index); columns "
                   "here: 'column:idx', 'column:label'"]


def test_cli_capture_with_executor_writes_the_same_store(small_model, tmp_path, capsys):
    from tests.capture.test_sharded import store_bytes

    ckpt = save_checkpoint(small_model, TINY_CONFIGS["ln_mha"], tmp_path / "ckpt")
    seqs = random_sequences(9, small_model.cfg.d_vocab, lo=3, seed=2)
    data = tmp_path / "data.jsonl"
    data.write_text("\n".join(json.dumps({"tokens": s, "y": i}) for i, s in enumerate(seqs)))
    args = ["capture", str(ckpt), str(data), "--sites", "resid_post@0,resid_post@1", "--quiet",
            "--batch-size", "2", "--examples-per-shard", "4"]
    assert main([*args, "--out", str(tmp_path / "plain")]) == 0
    assert main([*args, "--out", str(tmp_path / "sharded"), "--executor", "inprocess",
                 "--shards-per-task", "2"]) == 0
    assert len(store_bytes(tmp_path / "plain")) == 4  # manifest + 3 shards
    assert store_bytes(tmp_path / "sharded") == store_bytes(tmp_path / "plain")
    capsys.readouterr()
    assert main([*args, "--out", str(tmp_path / "x"), "--executor", "inprocess",
                 "--ray-address", "auto"]) == 2
    assert "--ray-address 'auto' given with --executor 'inprocess'" in capsys.readouterr().err
