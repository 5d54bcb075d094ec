"""The runner: one task per checkpoint, the marker table, cached cells (resume, new markers)."""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

import probekit.diagnosis.runner as runner
from probekit.errors import NotApplicableError
from probekit.hypotheses.measurement import Measurement
from probekit.hypotheses.registry import register_measurement
from probekit.models import load_checkpoint
from probekit.testbeds import get_task
from probekit.train.trainer import evaluate

from .population_helpers import WEIGHT_NORM, write_checkpoint, write_file


@dataclass(frozen=True, kw_only=True)
class _NASpec:
    """Keys of the test kind that is never applicable."""


@register_measurement("diag_test_not_applicable", spec=_NASpec)
def _not_applicable(spec: _NASpec, ctx) -> Measurement:
    """Undefined on every model (like Fourier measures on SCAN)."""
    raise NotApplicableError("this test marker is undefined for modular addition")


_REAL_ANALYSE = runner._analyse
MARKERS = (WEIGHT_NORM + '\n\n[[marker]]\nname = "gini"\nmeasure = "fourier_gini"\n\n'
           '[[marker]]\nname = "na"\nmeasure = "diag_test_not_applicable"')


class Killed(Exception):
    """Stands in for a killed driver."""


@pytest.fixture
def population(tmp_path, monkeypatch, single_thread):
    """Six run directories (2 train fractions x 3 seeds) with checkpoints at steps 0, 10, 20."""
    monkeypatch.setenv("PROBEKIT_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(runner, "_analyse", lambda spec, s, table, markers, facts=None, **_: (None, {}, ()))
    for f in (0.4, 0.6):
        for seed in range(3):
            for step in (0, 10, 20):
                d = write_checkpoint(tmp_path / "runs" / f"f{f}-s{seed}" / "checkpoints" /
                                     f"step_{step:07d}", seed=seed + 10 * step, step=step,
                                     train_fraction=f)
                (d / "optimizer.json").write_text("{}")
    return tmp_path


@pytest.fixture
def calls(monkeypatch):
    """Names of the markers measured, in order; ``calls.kill_at = n`` kills the n-th call."""
    log: list[str] = []
    real = runner.measure_marker

    def counting(marker, ctx, **kw):
        if getattr(counting, "kill_at", None) == len(log):
            raise Killed()
        log.append(marker.name)
        return real(marker, ctx, **kw)

    monkeypatch.setattr(runner, "measure_marker", counting)
    counting.log = log
    return counting


def _file(root: Path, markers: str = MARKERS) -> Path:
    return write_file(root, 'checkpoints = "runs/*"\nseries = [10]\nout = "pop"', markers,
                      'outcome = "id_accuracy"\ncovariates = ["task.train_fraction", "train_loss"]')


def _read_csv(path: Path) -> list[dict[str, str]]:
    with open(path) as fh:
        return list(csv.DictReader(fh))


def test_table_rows_columns_outcomes_and_not_applicable(population, calls):
    out = population / "out"
    res = runner.diagnose(_file(population), out=out)
    rows = _read_csv(out / "markers.csv")
    assert len(rows) == 12  # 6 runs x (step 10 + final step 20)
    assert list(rows[0])[:6] == ["checkpoint", "run", "step", "final", "seed", "task.train_fraction"]
    for col in ("train_accuracy", "train_loss", "id_accuracy", "id_loss", "wn", "gini", "na",
                "final_id_accuracy"):
        assert col in rows[0]
    assert [(r["step"], r["final"]) for r in rows[:2]] == [("10", "0"), ("20", "1")]
    # the outcome is the testbed's own evaluation of the checkpoint's task: the same numbers
    for r in rows[:2]:
        model = load_checkpoint(r["checkpoint"])
        task = get_task("modular_addition", p=11, train_fraction=0.4,
                        seed=json.loads(Path(r["checkpoint"], "config.json").read_text())
                        ["extra"]["task_config"]["seed"])
        ref = evaluate(model, task.splits()["test_id"].to_tensors(task.vocab.pad_id))
        assert float(r["id_accuracy"]) == pytest.approx(ref["acc"], abs=1e-12)
        assert float(r["id_loss"]) == pytest.approx(ref["loss"], rel=1e-6)
        wn = sum(float((p.detach().double() ** 2).sum()) for p in model.parameters())
        assert float(r["wn"]) == pytest.approx(wn, rel=1e-9)
    # series rows carry their run's final outcome
    assert rows[0]["final_id_accuracy"] == rows[1]["id_accuracy"]
    # not applicable: an empty cell with its reason, never NaN
    assert all(r["na"] == "" for r in rows)
    cells = json.loads((out / "markers.json").read_text())
    assert cells["cells"][0]["na"]["reason"] == "this test marker is undefined for modular addition"
    assert cells["cells"][0]["gini"]["low"] <= cells["cells"][0]["gini"]["value"] <= \
        cells["cells"][0]["gini"]["high"]
    assert len(res.not_applicable) == 12
    report = json.loads((out / "report.json").read_text())
    assert report["not_applicable"][0]["marker"] == "na"
    assert "Markers not applicable" in (out / "report.html").read_text()
    assert "NaN" not in (out / "markers.csv").read_text()
    assert res.provenance["checkpoint_tasks"] == 12 and len(calls.log) == 36


def test_killed_run_resumes_without_redoing_finished_cells(population, calls):
    path = _file(population)
    calls.kill_at = 7  # killed during the third checkpoint's second marker
    with pytest.raises(Killed):
        runner.diagnose(path)
    assert calls.log == ["wn", "gini", "na"] * 2 + ["wn"]
    calls.kill_at = None
    calls.log.clear()
    res = runner.diagnose(path)
    assert calls.log == ["gini", "na"] + ["wn", "gini", "na"] * 9  # 12 checkpoints in all
    calls.log.clear()
    again = runner.diagnose(path)
    assert calls.log == [] and again.provenance["checkpoint_tasks"] == 0
    assert again.table == res.table


def test_new_marker_computes_only_itself(population, calls):
    runner.diagnose(_file(population))
    calls.log.clear()
    more = MARKERS + '\n\n[[marker]]\nname = "gini_logit"\nmeasure = "fourier_gini"\nsource = "neuron_logit"'
    res = runner.diagnose(_file(population, more))
    assert calls.log == ["gini_logit"] * 12
    assert np.isfinite(np.array(res.table["gini_logit"], dtype=float)).all()


def test_tasks_are_picklable_for_multiprocess_executors(population, calls):
    from probekit.executor import InProcessExecutor

    res = runner.diagnose(_file(population, WEIGHT_NORM),
                          executor=InProcessExecutor(check_picklable=True))
    assert res.provenance["checkpoint_tasks"] == 12 and calls.log == ["wn"] * 12


def _history(root: Path, cross: dict[tuple[float, int], float]) -> None:
    """history.json of each run: evaluations at 0, 10, 20; held-out accuracy 1 from ``cross``."""
    for f in (0.4, 0.6):
        for seed in range(3):
            at = cross.get((f, seed))
            recs = [{"step": s, "test_id/acc": 1.0 if at is not None and s >= at else 0.5}
                    for s in (0, 10, 20)]
            (root / "runs" / f"f{f}-s{seed}" / "history.json").write_text(json.dumps({"records": recs}))


def _crossing_file(root: Path, diagnosis: str) -> Path:
    return write_file(root, 'checkpoints = "runs/*"\nseries = [10]\nout = "pop"', WEIGHT_NORM,
                      'covariates = ["task.train_fraction", "train_loss"]\n' + diagnosis)


def test_crossing_step_outcome_is_censored_and_carried_to_series_rows(population, calls):
    _history(population, {(0.4, 0): 10, (0.4, 1): 20, (0.6, 0): 0, (0.6, 1): 10})
    res = runner.diagnose(_crossing_file(
        population, 'outcome = "id_step_0.9"\ncrossing = 0.9\ncensor = "next_eval"'))
    by_run = {Path(r).name: v for r, v in zip(res.table["run"], res.table["id_step_0.9"], strict=True)}
    assert by_run == {"f0.4-s0": 10, "f0.4-s1": 20, "f0.4-s2": None, "f0.6-s0": 0, "f0.6-s1": 10,
                      "f0.6-s2": None}  # the table keeps the raw column (empty: never crosses) ...
    # ... and final_id_step_0.9 (series rows too) is censored one evaluation past the last (20 + 10)
    assert res.table["final_id_step_0.9"] == [30.0 if v is None else v for v in res.table["id_step_0.9"]]
    assert res.blocks[0].level == "warning"
    assert res.blocks[0].text.startswith("2 of 6 runs never cross (id_step_0.9 empty): censored at 30.")
    number = runner.diagnose(_crossing_file(
        population, 'outcome = "id_step_0.9"\ncrossing = 0.9\ncensor = 100'))
    assert sorted(number.table["final_id_step_0.9"])[-4:] == [100.0] * 4


def test_crossing_step_outcome_runs_the_analysis_and_early_warning(population, calls, monkeypatch):
    monkeypatch.setattr(runner, "_analyse", _REAL_ANALYSE)
    _history(population, {(0.4, 0): 10, (0.4, 1): 20, (0.6, 0): 0, (0.6, 1): 10})
    res = runner.diagnose(_crossing_file(
        population, 'outcome = "id_step_0.9"\ncrossing = 0.9\ncensor = "next_eval"\n'
        'n_permutations = 100\nn_bootstrap = 1000'))
    early = res.extras["early_warning"]
    assert early["outcome"] == "final_id_step_0.9" and early["steps"] == [10.0, 20.0]
    from scipy.stats import spearmanr

    finals = [i for i, f in enumerate(res.table["final"]) if f]
    ref = spearmanr([res.table["wn"][i] for i in finals],
                    [res.table["final_id_step_0.9"][i] for i in finals])
    assert res.analysis.to_records()[0]["spearman"] == pytest.approx(ref.statistic, abs=1e-9)
    # the survival analysis beside it: Cox over the raw crossing column, the grid from 30 to 60
    surv = res.extras["survival"]
    assert surv["censors"] == [30.0, 38.0, 45.0, 52.0, 60.0] and surv["n_censored"] == 2
    assert [r["marker"] for r in surv["cox"]] == ["wn"] and surv["cox"][0]["n_events"] == 4
    assert surv["curve"][0]["spearman"] == pytest.approx(ref.statistic, abs=1e-9)
    titles = [getattr(b, "title", "") for b in res.blocks]
    assert "id_step_0.9 as a survival time: Cox proportional hazards and Harrell's C" in titles
    # ... and on the series step's markers, as the early warning reads them
    assert list(res.extras["survival_by_step"]) == ["10"]
    at10 = res.extras["survival_by_step"]["10"]
    assert at10["label"] == "markers at step 10" and at10["n_runs"] == 6
    assert ("id_step_0.9 as a survival time: Cox proportional hazards and Harrell's C "
            "(markers at step 10)") in titles


def test_crossing_step_outcome_errors(population, calls):
    from probekit.errors import ConfigError

    _history(population, {(0.4, 0): 10})
    with pytest.raises(ConfigError, match=r"outcome = 'id_step_0.9': a crossing-step outcome needs "
                                          r"\[diagnosis\] crossing = 0.9 \(now None\)"):
        runner.diagnose(_crossing_file(population, 'outcome = "id_step_0.9"'))
    with pytest.raises(ConfigError, match=r"5 of 6 runs never reach held-out accuracy 0.9 .*set "
                                          r"\[diagnosis\] censor = \"next_eval\""):
        runner.diagnose(_crossing_file(population, 'outcome = "id_step_0.9"\ncrossing = 0.9'))
    with pytest.raises(ConfigError, match=r"censor: only a crossing-step outcome .* not 'id_accuracy'"):
        runner.diagnose(_crossing_file(population, 'outcome = "id_accuracy"\ncensor = 5'))
    with pytest.raises(ConfigError, match=r"censor = 5 is not above the largest observed crossing"):
        runner.diagnose(_crossing_file(population, 'outcome = "id_step_0.9"\ncrossing = 0.9\n'
                                                   'censor = 5'))


def test_reference_checkpoints_match_one_final_row_per_row(tmp_path):
    import dataclasses

    from probekit.diagnosis.population import Checkpoint
    from probekit.diagnosis.spec import load_diagnosis
    from probekit.errors import ConfigError

    path = write_file(tmp_path, 'preset = "scan"\ngrid = { "task.n_noise" = [0, 3], seed = [0, 1, 2] }',
                      '[[marker]]\nname = "cka"\nmeasure = "representational_similarity"\n'
                      'site_a = "embed"\nsite_b = "embed"\n'
                      'reference = { "task.n_noise" = 0, seed = "same" }', 'outcome = "id_accuracy"')
    base = load_diagnosis(path)
    rows = [Checkpoint(path=f"n{n}s{s}", run=f"n{n}s{s}", step=10, final=True,
                       design={"task.n_noise": n, "seed": s}) for n in (0, 3) for s in (0, 1)]
    rows.append(Checkpoint(path="n3s1-early", run="n3s1", step=5, final=False,
                           design={"task.n_noise": 3, "seed": 1}))

    def spec(reference):
        return dataclasses.replace(base, markers=(dataclasses.replace(base.markers[0],
                                                                      reference=reference),))

    refs = runner.reference_checkpoints(base, rows)
    assert refs == {"cka": ["n0s0", "n0s1", "n0s0", "n0s1", "n0s1"]}
    line = next(i for i, t in enumerate(path.read_text().splitlines(), 1) if "reference" in t)
    with pytest.raises(ConfigError, match=rf"{path}:{line}: .*0 final checkpoints have "
                       r"\{'task.n_noise': 6, 'seed': 0\}"):
        runner.reference_checkpoints(spec({"task.n_noise": 6, "seed": "same"}), rows)
    with pytest.raises(ConfigError, match=r"2 final checkpoints have \{'task.n_noise': 0\}.*"
                       "seed = \"same\""):
        runner.reference_checkpoints(spec({"task.n_noise": 0}), rows)
    with pytest.raises(ConfigError, match="'noise' is not a design column"):
        runner.reference_checkpoints(spec({"noise": 0}), rows)


def test_markers_at_a_position_some_inputs_lack(tmp_path, monkeypatch, single_thread):
    """Coverage populations: single-clause commands have no second primitive (null position)."""
    import dataclasses

    from probekit.diagnosis.markers import checkpoint_fingerprint, marker_key
    from probekit.diagnosis.spec import load_diagnosis
    from probekit.suites.spec import ModelSpec

    monkeypatch.setenv("PROBEKIT_CACHE", str(tmp_path / "cache"))
    small = dict(max_samples=30, ood_lengths=(5,), n_ood_per_length=10, n_ood_combo=10)
    for k in (1, 2):
        write_checkpoint(tmp_path / "runs" / f"k{k}", task="scan", train_clauses=tuple(range(1, k + 1)),
                         **small)
    path = tmp_path / "diag.toml"
    path.write_text(
        '[suite]\nname = "t"\ndevice = "cpu"\n[population]\ncheckpoints = "runs/*"\n'
        '[data]\nlabel = "first_primitive"\nprompt_only = false\nmax_per_split = 60\n'
        '[capture]\nsites = ["resid_post@0"]\npositions = "column:second_prim_position"\n'
        '[stats]\nn_bootstrap = 1000\n'
        '[[marker]]\nname = "probe"\nmeasure = "probe_accuracy"\nsite = "resid_post@-1"\n'
        '[[marker]]\nname = "seq"\nmeasure = "homomorphism_error"\nlayer = -1\n'
        'composition = "sequence"\nfamilies = ["affine"]\nsolver = "closed_form_ridge"\n'
        '[diagnosis]\noutcome = "ood:ood_len"\ngroups = ""\n')
    spec = load_diagnosis(path)
    cells = {}
    for k in (1, 2):
        ckpt = str(tmp_path / "runs" / f"k{k}")
        task = runner.CheckpointTask(
            checkpoint=runner.Checkpoint(path=ckpt, run=ckpt, step=100, final=True),
            fingerprint=checkpoint_fingerprint(ckpt),
            suite=dataclasses.replace(spec.suite, model=ModelSpec(checkpoint=ckpt)),
            markers=tuple((m, marker_key(m, spec.suite)) for m in spec.markers),
            outcome_key=None, max_eval_examples=None, eval_seed=0, cells=str(tmp_path / "cells"))
        got = runner.checkpoint_cells(task)["cells"]
        cells[k] = {c["marker"]: c for c in got.values()}
    # 1 clause: no example has the position, no sequence pair: explicit not-applicable cells
    assert cells[1]["probe"]["value"] is None and cells[1]["seq"]["value"] is None
    assert "no 'train' example has a [capture] position" in cells[1]["probe"]["reason"]
    assert "all single clauses" in cells[1]["seq"]["reason"]
    # 1..2 clauses: the probe is fit and scored on the 2-clause commands only
    from probekit.testbeds import get_task

    splits = get_task("scan", train_clauses=(1, 2), seed=0, **small).splits()
    n_test = sum(p is not None for p in splits["test_id"].metadata["second_prim_position"])
    assert n_test < len(splits["test_id"].tokens)  # some single clauses are left out
    assert cells[2]["probe"]["value"] is not None and cells[2]["probe"]["n"] == n_test
    assert cells[2]["seq"]["value"] is not None
