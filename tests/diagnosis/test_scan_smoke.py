"""``probekit diagnose`` on the SCAN smoke population: HE ([C] and separate-pass), probe, CKA to noise 0."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest
import torch

from .population_helpers import run_smoke_diagnosis

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "probes" / "diagnose_scan_smoke.toml"
MARKERS = ("modifier_he", "modifier_he_separate", "sequence_he_separate", "probe_primitive_b1",
           "cka_noise0")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """The smoke diagnosis run once through the CLI into a fresh cache (trains 6 tiny runs)."""
    return run_smoke_diagnosis(SMOKE, tmp_path_factory.mktemp("diagnose_scan_smoke"))


def _row(smoke, noise, seed):
    return next(r for r in smoke["rows"] if (r["task.n_noise"], r["seed"]) == (str(noise), str(seed)))


def test_table_has_every_marker_finite_and_the_ranking(smoke):
    assert smoke["code"] == 0
    rows = smoke["rows"]
    assert len(rows) == 6 and {(r["task.n_noise"], r["seed"]) for r in rows} == {
        (n, s) for n in ("0", "6") for s in ("0", "1", "2")}
    for name in MARKERS:
        values = [float(r[name]) for r in rows]  # no empty (not-applicable) cell
        assert all(math.isfinite(v) for v in values), name
    assert all(0.0 < float(r["modifier_he"]) < 1.0 for r in rows)
    assert all(0.0 <= float(r["probe_primitive_b1"]) <= 1.0 for r in rows)
    report = json.loads((smoke["out"] / "report.json").read_text())
    ranking = [b for b in report["analyses"][-1]["blocks"]
               if b["block"] == "table" and b["title"].startswith("Markers vs ood:ood_len")]
    assert len(ranking) == 1 and {r["marker"] for r in ranking[0]["rows"]} == set(MARKERS)
    assert set(report["diagnosis"]["analysis"]["sentences"]) == set(MARKERS)
    levels = {r["marker"] for r in report["diagnosis"]["level_mean_r2"]}
    assert levels == set(MARKERS)  # the paper's unit, beside the per-model numbers


def test_he_cells_equal_the_homomorphism_api_on_the_same_checkpoint(smoke):
    from probekit.homomorphism import HEConfig, modifier_he, sequence_he
    from probekit.models import load_checkpoint
    from probekit.models.checkpoint import read_checkpoint_meta
    from probekit.testbeds import task_from_dict

    row = _row(smoke, 6, 0)
    extra = read_checkpoint_meta(row["checkpoint"])["extra"]
    train = task_from_dict(extra["task"], extra["task_config"]).splits()["train"]
    assert len(train) <= 150  # [data] max_per_split keeps the whole split, in order
    model = load_checkpoint(row["checkpoint"])
    separate = HEConfig(parts="separate", families=("affine",), solver="closed_form_ridge")
    got = modifier_he(model, train, config=separate)
    assert float(row["modifier_he_separate"]) == pytest.approx(
        float(got.he_normalised[got.layers.index(1)]), rel=1e-9, abs=1e-12)
    got = sequence_he(model, train, config=separate)
    assert float(row["sequence_he_separate"]) == pytest.approx(
        float(got.he_normalised[got.layers.index(1)]), rel=1e-9, abs=1e-12)
    got = modifier_he(model, train, config=HEConfig())  # [C]: Adam fits, held-out MSE
    assert float(row["modifier_he"]) == pytest.approx(float(got.he[got.layers.index(1)]),
                                                      rel=1e-9, abs=1e-12)


def _states(path, tokens, positions):
    """Block 1's residual stream at one position per example, one TransformerLens pass each."""
    from probekit.models import load_checkpoint

    model = load_checkpoint(path)
    out = []
    with torch.no_grad():
        for toks, pos in zip(tokens, positions):
            _, cache = model.run_with_cache(torch.tensor([toks]))
            out.append(cache["blocks.1.hook_resid_post"][0, pos].double().numpy())
    return np.stack(out)


def test_cka_to_the_same_seed_noise_0_model_on_the_same_inputs(smoke):
    from probekit.models.checkpoint import read_checkpoint_meta
    from probekit.similarity import cka
    from probekit.testbeds import task_from_dict

    for seed in (0, 1, 2):
        assert float(_row(smoke, 0, seed)["cka_noise0"]) == pytest.approx(1.0, abs=1e-9)
    row, ref = _row(smoke, 6, 1), _row(smoke, 0, 1)
    extra = read_checkpoint_meta(row["checkpoint"])["extra"]
    ood = task_from_dict(extra["task"], extra["task_config"]).splits()["ood_len_5"]
    pos = ood.metadata["second_prim_position"]
    X = _states(row["checkpoint"], ood.tokens, pos)
    Y = _states(ref["checkpoint"], ood.tokens, pos)
    want = cka(X, Y)
    assert 0.0 < want < 0.99
    assert float(row["cka_noise0"]) == pytest.approx(want, abs=1e-5)  # float32 captures
