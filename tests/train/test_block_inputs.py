"""The block-input cache (probekit.train.block_inputs): values, sharing, resumption, checksums."""

from __future__ import annotations

import pytest
import torch

from probekit.store.manifest import Manifest
from probekit.train import block_inputs as bi
from tests.train.finetune_helpers import tiny_llama as _tiny_llama

ROWS = [[1, 2, 3, 4, 5, 6], [4, 5], [7], [3, 9, 11, 2, 5], [12, 13, 14], [0, 19]]


@pytest.fixture(autouse=True)
def _one_thread(single_thread):
    """Tiny GEMMs on a shared 2-core box: one torch thread is fastest (tests/conftest.py)."""


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    from transformers import AutoModelForCausalLM

    directory = _tiny_llama(tmp_path_factory.mktemp("tiny-base"))
    return AutoModelForCausalLM.from_pretrained(str(directory), dtype=torch.float32).eval()


@pytest.fixture
def counted(monkeypatch) -> list[int]:
    """Rows computed by the cache (a list of batch sizes, one per computation)."""
    calls: list[int] = []
    real = bi.compute_block_inputs

    def compute(model, ids, first, batch_size=16):
        calls.append(len(ids))
        return real(model, ids, first, batch_size)

    monkeypatch.setattr(bi, "compute_block_inputs", compute)
    return calls


def _same(a: list[torch.Tensor], b: list[torch.Tensor]) -> bool:
    return len(a) == len(b) and all(torch.equal(x, y) for x, y in zip(a, b))


def test_values_are_the_models_hidden_state_entering_the_block(model):
    got = bi.compute_block_inputs(model, ROWS, 2, batch_size=4)
    for row, h in zip(ROWS, got):
        with torch.no_grad():
            ref = model(input_ids=torch.tensor([row]), output_hidden_states=True).hidden_states[2][0]
        assert h.shape == (len(row), 32) and h.dtype == torch.float32
        assert float((h - ref).abs().max() / ref.abs().max()) < 1e-6
    assert not model.training  # the model's mode is restored


def test_computed_once_and_shared_keyed_by_model_rows_and_block(model, tmp_path, counted):
    first = bi.block_inputs(model, ROWS, 1, tmp_path, model_id="tiny")
    again = bi.block_inputs(model, ROWS, 1, tmp_path)
    assert counted == [6] and _same(first, again)
    (entry,) = tmp_path.iterdir()
    manifest = Manifest.load(entry)
    assert manifest.complete and manifest.n_examples == 6 and manifest.model_id == "tiny"
    assert manifest.sites == ["blocks.1.hook_resid_pre"] and manifest.n_rows == 19
    bi.block_inputs(model, ROWS, 2, tmp_path)           # another block: another entry
    bi.block_inputs(model, ROWS[:5], 1, tmp_path)       # other rows: another entry
    assert counted == [6, 6, 5] and len(list(tmp_path.iterdir())) == 3
    # a weight of a block at or above the cached one does not change h_1: same entry
    with torch.no_grad():
        model.model.layers[1].mlp.up_proj.weight.add_(1.0)
        assert _same(bi.block_inputs(model, ROWS, 1, tmp_path), first) and counted == [6, 6, 5]
        model.model.layers[1].mlp.up_proj.weight.sub_(1.0)
        model.model.layers[0].mlp.up_proj.weight.add_(1.0)   # one below it does
        try:
            changed = bi.block_inputs(model, ROWS, 1, tmp_path)
        finally:
            model.model.layers[0].mlp.up_proj.weight.sub_(1.0)
    assert counted == [6, 6, 5, 6] and not _same(changed, first)


def test_interrupted_cache_resumes_after_its_last_shard(model, tmp_path, counted, monkeypatch):
    monkeypatch.setattr(bi, "ROWS_PER_SHARD", 2)
    whole = bi.compute_block_inputs(model, ROWS, 1)
    counted.clear()
    real = bi._write

    def killed(writer, model, ids, first, start, index=None):
        if start == 4:
            raise KeyboardInterrupt
        real(writer, model, ids, first, start, index)

    monkeypatch.setattr(bi, "_write", killed)
    with pytest.raises(KeyboardInterrupt):
        bi.block_inputs(model, ROWS, 1, tmp_path)
    (entry,) = tmp_path.iterdir()
    assert not Manifest.load(entry).complete and len(Manifest.load(entry).shards) == 2
    monkeypatch.setattr(bi, "_write", real)
    got = bi.block_inputs(model, ROWS, 1, tmp_path)
    assert counted == [2, 2, 2] and Manifest.load(entry).complete  # the last shard only
    assert all(float((a - b).abs().max()) < 1e-6 for a, b in zip(got, whole))


def test_a_damaged_shard_is_recomputed(model, tmp_path, counted, monkeypatch):
    monkeypatch.setattr(bi, "ROWS_PER_SHARD", 2)
    first = bi.block_inputs(model, ROWS, 1, tmp_path)
    (entry,) = tmp_path.iterdir()
    shard = entry / "shard-00001.safetensors"
    data = bytearray(shard.read_bytes())
    data[-3] ^= 0xFF  # a flipped byte in the values
    shard.write_bytes(bytes(data))
    counted.clear()
    again = bi.block_inputs(model, ROWS, 1, tmp_path)
    assert counted == [2] and _same(first, again)


def test_entry_names_say_block_and_key(model, tmp_path):
    bi.block_inputs(model, ROWS, 2, tmp_path)
    (entry,) = tmp_path.iterdir()
    assert entry.name.startswith("resid_pre2-") and len(entry.name) == len("resid_pre2-") + 16
