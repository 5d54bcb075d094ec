"""The SCAN causal diagnosis: noise x HE-regulariser weight x seeds, IV / mediation and the modifier necessity.

End to end (``probekit diagnose`` on probes/diagnose_scan_causal_smoke.toml: 12 tiny runs; slow
tier: 44 CPU-s under pytest on the shared 2-core box, 24 CPU-s as one ``probekit diagnose``
process, vs 30 CPU-s for the 6-run tests/diagnosis/test_scan_smoke.py) and the full design
(probes/diagnose_scan_causal.toml, 144 runs, not trained here) through the spec loader
(``probekit diagnose probes/diagnose_scan_causal.toml --check``, which builds the SCAN splits of
all 144 runs, passes; 90 runs took 78 CPU-s as one process and over 15 min under pytest's type checks, so
it is not a test). The default tier keeps the substrate's planted and trainer-equality tests
(tests/hypotheses/test_necessity_modifier.py) and the parse test of the full design.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from .population_helpers import run_smoke_diagnosis

ROOT = Path(__file__).resolve().parents[2]
SMOKE = ROOT / "probes" / "diagnose_scan_causal_smoke.toml"
FULL = ROOT / "probes" / "diagnose_scan_causal.toml"
MARKERS = ("modifier_he", "modifier_necessity")


@pytest.fixture(scope="module")
def smoke(tmp_path_factory):
    """The smoke diagnosis run once through the CLI into a fresh cache (trains 12 tiny runs)."""
    return run_smoke_diagnosis(SMOKE, tmp_path_factory.mktemp("diagnose_scan_causal_smoke"))


def _blocks(report, prefix):
    return [b for a in report["analyses"] for b in a["blocks"]
            if b["block"] == "table" and (b.get("title") or "").startswith(prefix)]


@pytest.mark.slow
def test_table_and_the_causal_section(smoke):
    assert smoke["code"] == 0
    rows = smoke["rows"]
    assert {(r["task.n_noise"], r["train.he_lambda"], r["seed"]) for r in rows} == {
        (n, w, s) for n in ("0", "6") for w in ("0.0", "0.1", "0.2") for s in ("0", "1")}
    for name in MARKERS:  # the necessity marker's column, every cell measured
        assert all(math.isfinite(float(r[name])) for r in rows), name
    assert all(-1.0 <= float(r["modifier_necessity"]) <= 1.0 for r in rows)
    report = json.loads((smoke["out"] / "report.json").read_text())
    records = report["diagnosis"]["causal"]["records"]
    arm = [r for r in records if r["kind"] == "arm"]
    assert len(arm) == 1 and (arm[0]["knob"], arm[0]["marker"]) == ("train.he_lambda", "modifier_he")
    assert arm[0]["first_stage_f"] > 0 and math.isfinite(arm[0]["iv_beta"]) and arm[0]["n"] == 12
    # 2SLS with one instrument is the Wald ratio: reduced form over first stage
    assert arm[0]["iv_beta"] == pytest.approx(arm[0]["reduced_beta"] / arm[0]["first_beta"], rel=1e-9)
    (first,) = _blocks(report, "Intervention arms: first stage")
    assert first["rows"][0]["arm"] == "train.he_lambda -> modifier_he"
    assert first["rows"][0]["F"] == pytest.approx(arm[0]["first_stage_f"])
    (iv,) = _blocks(report, "IV estimate")
    assert iv["rows"][0]["arm"] == "modifier_he (instrument train.he_lambda)"
    (med,) = _blocks(report, "Mediation")
    assert {r["path"] for r in med["rows"]} == {"train.he_lambda -> modifier_he", "task.n_noise -> modifier_he"}
    (ranking,) = _blocks(report, "Markers vs ood:ood_len")
    assert {r["marker"] for r in ranking["rows"]} == set(MARKERS)


@pytest.mark.slow
def test_necessity_cell_equals_a_direct_call_on_the_checkpoint(smoke):
    """The marker is necessity() on the run's own splits; its intact score is the outcome's token accuracy."""
    from probekit.hypotheses.necessity import (
        modifier_displacements,
        modifier_subspace_substrate,
        necessity,
    )
    from probekit.models import load_checkpoint
    from probekit.models.checkpoint import read_checkpoint_meta
    from probekit.sites import Site
    from probekit.testbeds import task_from_dict

    row = next(r for r in smoke["rows"] if (r["task.n_noise"], r["train.he_lambda"], r["seed"]) == ("6", "0.2", "1"))
    extra = read_checkpoint_meta(row["checkpoint"])["extra"]
    task = task_from_dict(extra["task"], extra["task_config"])
    splits = task.splits()
    train, ood = splits["train"], splits["ood_len_5"]
    assert len(train) <= 150 and len(ood) <= 150  # [data] max_per_split keeps whole splits, in order
    model = load_checkpoint(row["checkpoint"])
    site = Site(1, "resid_post")
    disp, X, _ = modifier_displacements(model, train, site, pad_id=task.vocab.pad_id)
    sub = modifier_subspace_substrate(site, disp, X, k=4)
    res = necessity(model, ood.tokens, [], sub, score="output_tokens", targets=ood.targets, n_random=5, seed=0)
    assert float(row["modifier_necessity"]) == pytest.approx(float(np.mean(res.drop - res.control)), abs=1e-9)
    # intact, the scored tokens are the trainer's: the outcome column of the same split
    assert float(res.base.mean()) == pytest.approx(float(row["ood:ood_len_5"]), abs=1e-9)


def test_full_design_parses():
    from probekit.diagnosis.spec import load_diagnosis

    d = load_diagnosis(FULL)
    pop = d.population
    assert pop.preset == "scan_he_paper" and pop.steps == 1450
    assert pop.grid == {"task.n_noise": [0, 3, 6, 9, 12, 15], "train.he_lambda": [0.0, 0.1, 0.2],
                        "seed": [0, 1, 2, 3, 4, 5, 6, 7]}
    assert [(p.knob, p.marker) for p in pop.interventions] == [("train.he_lambda", "modifier_he")]
    assert [(p.knob, p.marker) for p in d.diagnosis.mediation] == [("task.n_noise", "modifier_he")]
    nec = {m.name: m.spec for m in d.markers if m.measure == "necessity"}
    assert set(nec) == {"modifier_necessity", "modifier_necessity_id"}
    for spec in nec.values():
        assert (spec.substrate, spec.score, spec.site, spec.k, spec.excess) == (
            "modifier_subspace", "output_tokens", "resid_post@3", 8, True)
    text = FULL.read_text()
    assert "probekit diagnose probes/diagnose_scan_causal.toml" in text
    # issue 55: the batch-pair regulariser and one evaluation per run, the CPU-sized design
    assert {"train.he_source=batch", "train.n_evals=1"} <= set(pop.sets)

