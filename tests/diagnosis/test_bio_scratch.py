"""``probekit diagnose`` on the from-scratch biographies smoke population (Allen-Zhu & Li 2023).

Eight tiny runs (40 people, 2 layers d_model 32, 40 steps, augmentation 1 vs 5 x 4 seeds):
the QA outcome columns are the testbed's own evaluation with the expected example counts, the
P-probe layer families and the weight norm are finite on every model and equal their direct
computation where that is cheap.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from .population_helpers import run_smoke_diagnosis

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "probes" / "diagnose_bio_scratch_smoke.toml"
PROBES = tuple(f"p_probe_{a}@L{layer}" for a in ("birth_month", "employer") for layer in (0, 1))


@pytest.fixture(scope="module")
def bio(tmp_path_factory):
    """The smoke diagnosis run once through the CLI into a fresh cache (8 tiny trainings)."""
    return run_smoke_diagnosis(SMOKE, tmp_path_factory.mktemp("diagnose_bio_scratch"))


def test_bio_scratch_population_counts_columns_and_ranges(bio):
    assert bio["code"] == 0
    rows = bio["rows"]
    assert len(rows) == 8 and all(r["final"] == "1" for r in rows)
    assert {(r["task.augmentation"], r["seed"]) for r in rows} == {
        (a, s) for a in ("1", "5") for s in ("0", "1", "2", "3")}
    # 40 people, 20 ID and 20 OOD, six questions each
    for r in rows:
        assert r["id_accuracy__n"] == r["ood:test_ood__n"] == "120"
        assert int(r["ood:probe_train__n"]) + int(r["ood:probe_test__n"]) == 40
    for col in ("train_accuracy", "id_accuracy", "ood:test_ood", *PROBES):
        values = [float(r[col]) for r in rows]  # an empty (not applicable) cell fails here
        assert all(0.0 <= v <= 1.0 for v in values), col
    # 40 steps already move QA above chance (1/3) on some models: the outcome is not constant
    assert len({r["ood:test_ood"] for r in rows}) > 1
    assert all(math.isfinite(float(r["weight_norm"])) for r in rows)
    report = json.loads((bio["out"] / "report.json").read_text())
    assert report["diagnosis"]["settings"]["groups"] == "seed"
    assert set(report["diagnosis"]["analysis"]["sentences"]) >= {*PROBES, "weight_norm"}


def test_bio_scratch_outcomes_equal_direct_evaluation(bio):
    from probekit import load_checkpoint
    from probekit.models.checkpoint import read_checkpoint_meta
    from probekit.testbeds import task_from_dict
    from probekit.train.trainer import evaluate

    row = bio["rows"][-1]
    model = load_checkpoint(row["checkpoint"])
    extra = read_checkpoint_meta(row["checkpoint"])["extra"]
    task = task_from_dict(extra["task"], extra["task_config"])
    assert task.config.augmentation == int(row["task.augmentation"])
    splits = task.splits()
    for split, col in (("test_id", "id_accuracy"), ("test_ood", "ood:test_ood")):
        want = evaluate(model, splits[split].to_tensors(task.vocab.pad_id))["acc"]
        assert float(row[col]) == pytest.approx(want, abs=1e-12), col
    want = sum(float((p.detach().double() ** 2).sum()) for p in model.parameters())
    assert float(row["weight_norm"]) == pytest.approx(want, rel=1e-6)
