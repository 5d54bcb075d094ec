"""An interrupted neuron experiment resumes from its finished blocks, with identical results."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import torch

from probekit.neurons import DeactivationConfig
from probekit.neurons import experiments as experiments_module
from probekit.neurons.experiments import relation_neuron_experiments
from probekit.neurons.resume import RelationRowCache

from .planted import PLANTED_SITES, RED, IdTokenizer, planted_study

_FIRST = experiments_module.first_token_correct_sets
_GENERATION = experiments_module.generation_correct_sets
SITES = list(PLANTED_SITES)
CFG = DeactivationConfig(k=RED, fraction=None, n_random=9, n_spread=3, shares=(0.5, 1.0),
                         n_single=2, post=True, generation=True, max_new_tokens=1)



@pytest.fixture(scope="module")
def planted():
    model, fs, stats = planted_study()
    model.tokenizer = IdTokenizer()
    return model, fs, stats


class _Interrupted(Exception):
    """Stands for a run killed mid-way (pytest reserves KeyboardInterrupt for itself)."""


def _same(a, b):
    da, db = a.to_dict(), b.to_dict()
    assert da == db


def _count_scores(monkeypatch):
    calls = {"first": 0, "generation": 0}
    first, gen = _FIRST, _GENERATION  # the real ones, whatever a test patched in before

    def counted_first(*a, **k):
        calls["first"] += 1
        return first(*a, **k)

    def counted_gen(*a, **k):
        calls["generation"] += 1
        return gen(*a, **k)

    monkeypatch.setattr(experiments_module, "first_token_correct_sets", counted_first)
    monkeypatch.setattr(experiments_module, "generation_correct_sets", counted_gen)
    return calls


def test_interrupted_run_resumes_with_identical_results(planted, tmp_path, monkeypatch):
    model, fs, stats = planted
    plain = relation_neuron_experiments(model, stats, fs, CFG, progress=False)

    def dies_on_relation_two(m, on, *a, **k):  # the second relation's generation block
        if set(on.relations) == {stats.relations[1]}:
            raise _Interrupted
        return _GENERATION(m, on, *a, **k)

    monkeypatch.setattr(experiments_module, "generation_correct_sets", dies_on_relation_two)
    with pytest.raises(_Interrupted):
        relation_neuron_experiments(model, stats, fs, CFG, progress=False, resume_dir=tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "baseline.safetensors", "relation-000.safetensors"]
    calls = _count_scores(monkeypatch)
    resumed = relation_neuron_experiments(model, stats, fs, CFG, progress=False,
                                          resume_dir=tmp_path)
    _same(resumed, plain)
    # relations 1 and 2 only: 2 first-token passes each (all facts, r's facts) + 1 post pass
    # + 1 post-random pass; one generation block each
    assert calls == {"first": 2 * 4, "generation": 2}
    calls = _count_scores(monkeypatch)
    again = relation_neuron_experiments(model, stats, fs, CFG, progress=False,
                                        resume_dir=tmp_path)
    _same(again, plain)
    assert calls == {"first": 0, "generation": 0}


def test_another_config_does_not_reuse_blocks(planted, tmp_path):
    model, fs, stats = planted
    relation_neuron_experiments(model, stats, fs, CFG, progress=False, resume_dir=tmp_path)
    other = dataclasses.replace(CFG, seed=CFG.seed + 1)  # other random sets
    with pytest.warns(UserWarning, match="written for another experiment"):
        got = relation_neuron_experiments(model, stats, fs, other, progress=False,
                                          resume_dir=tmp_path)
    _same(got, relation_neuron_experiments(model, stats, fs, other, progress=False))


@pytest.mark.parametrize("damage", ["truncate", "flip"])
def test_a_corrupted_block_is_detected_and_recomputed(planted, tmp_path, damage):
    model, fs, stats = planted
    plain = relation_neuron_experiments(model, stats, fs, CFG, progress=False,
                                        resume_dir=tmp_path)
    path = tmp_path / "relation-001.safetensors"
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        path.write_bytes(bytes(data[: len(data) // 2]))
        why = "does not load"
    else:  # one byte of the last tensor's payload
        data[-1] ^= 0x40
        path.write_bytes(bytes(data))
        why = "is corrupted"
    with pytest.warns(UserWarning, match=f"relation-001.safetensors {why}"):
        got = relation_neuron_experiments(model, stats, fs, CFG, progress=False,
                                          resume_dir=tmp_path)
    _same(got, plain)
    assert RelationRowCache(tmp_path, "x").load("nothing") is None


def test_cache_round_trip_is_exact(tmp_path):
    rows = {"a": torch.tensor([0.1, float("nan"), -2.0], dtype=torch.float64),
            "b": torch.zeros(2, 3, dtype=torch.float64), "c": torch.tensor([True, False])}
    cache = RelationRowCache(tmp_path, "k1")
    cache.save("block", rows)
    back = cache.load("block")
    for name, t in rows.items():
        np.testing.assert_array_equal(back[name].numpy(), t.numpy())
        assert back[name].dtype == t.dtype
    assert RelationRowCache(None, "k1").load("block") is None
