"""The shipped SCAN coverage and depth diagnosis files: valid, and their markers fit every model.

The full ``probekit diagnose FILE --check`` builds every run's SCAN splits (~25 CPU-s per file:
slow tier, tests/diagnosis/test_cli.py); here the file itself, its grid's designs and the
markers' blocks against the depths, without building any task.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from probekit.diagnosis.block_index import block_indices, check_block_indices
from probekit.diagnosis.population import Checkpoint, list_lengths, varying_knobs
from probekit.diagnosis.runner import reference_checkpoints
from probekit.diagnosis.spec import load_diagnosis
from probekit.errors import ConfigError

PROBES = Path(__file__).resolve().parents[2] / "probes"


def _rows(spec):
    """Final rows of the grid's design (no training, no task build)."""
    keys = list(spec.population.grid)
    return [Checkpoint(path=str(i), run=str(i), step=450, final=True,
                       design=list_lengths({"preset": spec.population.preset, **dict(zip(keys, c))}))
            for i, c in enumerate(itertools.product(*spec.population.grid.values()))]


def test_coverage_suite():
    spec = load_diagnosis(PROBES / "diagnose_scan_coverage.toml")
    rows = _rows(spec)
    assert len(rows) == 20 and spec.population.steps == 450
    assert varying_knobs(rows) == ["len(task.train_clauses)"]
    assert sorted({r.design["len(task.train_clauses)"] for r in rows}) == [1, 2, 3, 4]
    assert spec.diagnosis.covariates == ("len(task.train_clauses)", "id_accuracy")
    # CKA to the same-seed 2-clause model ([C]'s default coverage)
    refs = reference_checkpoints(spec, rows)["cka_k2"]
    assert [rows[int(p)].design["task.train_clauses"] for p in refs] == [[1, 2]] * 20
    assert [rows[int(p)].design["seed"] for p in refs] == [r.design["seed"] for r in rows]
    check_block_indices(spec.markers, [4] * 20, spec.at)


def test_depth_suite():
    spec = load_diagnosis(PROBES / "diagnose_scan_depth.toml")
    rows = _rows(spec)
    depths = [r.design["model.n_layers"] for r in rows]
    assert len(rows) == 30 and sorted(set(depths)) == [1, 2, 4, 6, 8, 10]
    assert "task.n_noise" not in spec.population.grid and not any(
        s.startswith("task.n_noise") for s in spec.population.sets)  # the preset's 0
    check_block_indices(spec.markers, depths, spec.at)
    # every block a marker names exists in the depth-1 models: applicable to every model
    for m in spec.markers:
        for _, index in block_indices(m.spec):
            assert index in (0, -1), m.name
    refs = reference_checkpoints(spec, rows)["cka_depth4"]
    assert {rows[int(p)].design["model.n_layers"] for p in refs} == {4}
    # the noise suite's fixed blocks would not fit the depth-1 models
    with pytest.raises(ConfigError, match="no model of the population has that block"):
        check_block_indices(load_diagnosis(PROBES / "diagnose_scan_noise.toml").markers, [1, 2],
                            spec.at)
