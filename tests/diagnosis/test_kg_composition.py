"""``probekit diagnose`` on the KG-composition smoke population (Wang et al. 2024), trained on demand.

Six tiny runs (|E| = 30, 2 layers, 60 steps): the outcome columns are the testbed's own
evaluation (equal to a direct ``evaluate`` of the split on the checkpoint), the KG markers are
finite on every model and equal their direct computation.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from probekit.cli import main

from .population_helpers import run_smoke_diagnosis

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "probes" / "diagnose_kg_composition_smoke.toml"
MARKERS = ("bridge_rank_id", "bridge_probe_id", "circuit_faithfulness", "weight_norm")


@pytest.fixture(scope="module")
def kg(tmp_path_factory):
    """The smoke diagnosis run once through the CLI into a fresh cache (6 tiny trainings)."""
    return run_smoke_diagnosis(SMOKE, tmp_path_factory.mktemp("diagnose_kg"))


def test_kg_population_has_every_outcome_and_marker(kg):
    assert kg["code"] == 0
    rows = kg["rows"]
    assert len(rows) == 6 and all(r["final"] == "1" for r in rows)
    assert {(r["task.phi"], r["seed"]) for r in rows} == {
        (p, s) for p in ("1.0", "2.0") for s in ("0", "1", "2")}
    for col in ("train_accuracy", "id_accuracy", "ood:test_ood", *MARKERS):
        values = [float(r[col]) for r in rows]  # an empty (not applicable) cell fails here
        assert all(math.isfinite(v) for v in values), col
    for col in ("train_accuracy", "id_accuracy", "ood:test_ood", "bridge_rank_id", "bridge_probe_id"):
        assert all(0.0 <= float(r[col]) <= 1.0 for r in rows), col
    # 60 steps fit the tiny KG's training facts (train accuracy >= 0.9 on every run)
    assert min(float(r["train_accuracy"]) for r in rows) >= 0.9
    report = json.loads((kg["out"] / "report.json").read_text())
    assert set(report["diagnosis"]["analysis"]["sentences"]) == set(MARKERS)
    assert report["diagnosis"]["settings"]["groups"] == "seed"


def test_outcomes_and_bridge_marker_equal_their_direct_computation(kg):
    from probekit import load_checkpoint
    from probekit.kg import bridge_entity_lens
    from probekit.models.checkpoint import read_checkpoint_meta
    from probekit.testbeds import task_from_dict
    from probekit.train.trainer import evaluate

    row = kg["rows"][0]
    model = load_checkpoint(row["checkpoint"])
    extra = read_checkpoint_meta(row["checkpoint"])["extra"]
    task = task_from_dict(extra["task"], extra["task_config"])
    splits = task.splits()
    for split, col in (("train", "train_accuracy"), ("test_id", "id_accuracy"),
                       ("test_ood", "ood:test_ood")):
        want = evaluate(model, splits[split].to_tensors(task.vocab.pad_id))["acc"]
        assert float(row[col]) == pytest.approx(want, abs=1e-12), col
    # bridge top-1 rate at r1 after block 0 over every test_id two-hop query ([data] keeps all)
    ds = splits["test_id"]
    md = ds.metadata
    lens = bridge_entity_lens(model, [ds.prompt(i) for i in range(len(ds))],
                              [task.entity_id(b) for b in md["bridge"]],
                              [task.entity_id(t) for t in md["t"]], position=1)
    want = float((lens.bridge_rank[:, 0] < 1).double().mean())
    assert float(row["bridge_rank_id"]) == pytest.approx(want, abs=1e-12)
    # weight norm: the sum of squared weights of the model's parameters
    want = sum(float((p.detach().double() ** 2).sum()) for p in model.parameters())
    assert float(row["weight_norm"]) == pytest.approx(want, rel=1e-6)
    cells = json.loads((kg["out"] / "markers.json").read_text())
    assert not cells["not_applicable"]
    assert np.isfinite([float(r["circuit_faithfulness"]) for r in kg["rows"]]).all()


@pytest.mark.parametrize("name", ["diagnose_kg_composition.toml", "diagnose_kg_composition_id.toml"])
def test_shipped_kg_files_pass_check(name, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("PROBEKIT_CACHE", str(tmp_path / "cache"))
    assert main(["diagnose", str(ROOT / "probes" / name), "--check"]) == 0
    out = capsys.readouterr().out
    assert "diagnosis is valid" in out or "diagnosis file is valid" in out
    assert not (tmp_path / "cache").exists()  # nothing trained
