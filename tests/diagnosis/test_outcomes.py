"""Outcome columns: the trainer's evaluation on every split, group means, crossing steps."""

from __future__ import annotations

import json

import numpy as np
import pytest

from probekit.diagnosis.outcomes import (
    crossing_step,
    outcome_columns,
    outcome_names,
    split_column,
)
from probekit.models import build_model
from probekit.testbeds import get_task
from probekit.train.trainer import evaluate


def test_split_columns():
    assert [split_column(s) for s in ("train", "test_id", "ood_len_7")] == \
        ["train_accuracy", "id_accuracy", "ood:ood_len_7"]
    assert split_column("test_id", "loss") == "id_loss"


def test_scan_outcomes_equal_the_trainer_evaluation(single_thread):
    task = get_task("scan", ood_lengths=(5, 6), n_ood_per_length=20, max_samples=60, n_ood_combo=10)
    model = build_model(task.model_config(n_layers=1, d_model=16, n_heads=2, d_head=8, d_mlp=32))
    got = outcome_columns(model, task)
    assert set(got) == outcome_names(list(task.splits()))
    pad = task.vocab.pad_id
    for name, ds in task.splits().items():
        ref = evaluate(model, ds.to_tensors(pad))
        assert got[split_column(name)] == pytest.approx(ref["token_acc"], abs=1e-12)  # SCAN's metric
    assert got["ood:ood_len"] == pytest.approx((got["ood:ood_len_5"] + got["ood:ood_len_6"]) / 2)
    for name, ds in task.splits().items():  # the number of examples behind each accuracy
        assert got[f"{split_column(name)}__n"] == len(ds)
    assert got["ood:ood_len__n"] == got["ood:ood_len_5__n"] + got["ood:ood_len_6__n"]
    assert got["train_loss"] == pytest.approx(evaluate(model, task.splits()["train"].to_tensors(pad))["loss"])


def test_subset_is_fixed_and_the_same_for_every_model(single_thread):
    task = get_task("modular_addition", p=11, train_fraction=0.5)
    a, b = (build_model(task.model_config(n_layers=1, d_model=16, n_heads=2, d_head=8, d_mlp=32,
                                          seed=s)) for s in (0, 1))
    full = outcome_columns(a, task)
    sub = outcome_columns(a, task, max_examples=20)
    assert sub == outcome_columns(a, task, max_examples=20)  # deterministic subset
    assert sub["id_accuracy"] != full["id_accuracy"] or sub["id_loss"] != full["id_loss"]
    # the subset is a property of the task, not of the model: b sees the same examples
    ds = task.splits()["test_id"]
    rng = np.random.default_rng([0, __import__("zlib").crc32(b"test_id")])
    idx = np.sort(rng.choice(len(ds), size=20, replace=False)).tolist()
    ref = evaluate(b, ds.subset(idx).to_tensors(task.vocab.pad_id))
    assert outcome_columns(b, task, max_examples=20)["id_accuracy"] == ref["acc"]
    assert sub["id_accuracy__n"] == 20 and full["id_accuracy__n"] == len(ds)


def test_crossing_step_reads_the_history(tmp_path):
    records = [{"step": s, "test_id/acc": a} for s, a in ((0, 0.0), (50, 0.5), (100, 0.92), (150, 0.8))]
    (tmp_path / "history.json").write_text(json.dumps({"records": records}))
    (tmp_path / "run.json").write_text(json.dumps({"task": "modular_addition"}))
    assert crossing_step(tmp_path, 0.9) == 100
    assert crossing_step(tmp_path, 0.95) is None
    assert crossing_step(tmp_path / "nowhere", 0.9) is None


def test_data_task_gives_the_same_examples_for_every_checkpoint():
    from types import SimpleNamespace

    from probekit.diagnosis.outcomes import checkpoint_task

    own = {"extra": {"task": "modular_addition",
                     "task_config": {"p": 11, "train_fraction": 0.7, "seed": 4}}}
    named = checkpoint_task(SimpleNamespace(task="modular_addition",
                                            task_options={"p": 11, "train_fraction": 0.5}), own)
    assert (named.config.train_fraction, named.config.seed) == (0.5, 0)  # the file's, not the model's
    mine = checkpoint_task(SimpleNamespace(task=None, task_options={}), own)
    assert (mine.config.train_fraction, mine.config.seed) == (0.7, 4)
