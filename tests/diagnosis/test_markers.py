"""Marker cells: estimate and percentile CI of a measurement kind, not-applicable cells, cache."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest

from probekit.diagnosis.markers import CellStore, MarkerCell, marker_key, measure_marker
from probekit.diagnosis.spec import MarkerSpec
from probekit.errors import NotApplicableError
from probekit.hypotheses.measurement import Measurement
from probekit.hypotheses.registry import register_measurement
from probekit.stats.bootstrap import bootstrap_indices
from probekit.suites.spec import StatsSpec
from tests.hypotheses.helpers import FakeContext

VALUES = np.random.default_rng(0).normal(size=40)


@dataclass(frozen=True, kw_only=True)
class _ValuesSpec:
    """Keys of the per-unit test kind."""

    shift: float = 0.0


@register_measurement("diag_test_values", spec=_ValuesSpec, control=True)
def _values(spec: _ValuesSpec, ctx, *, control: bool = False) -> Measurement:
    """Fixed per-unit values (a control kind: the diagnosis must not ask for the control)."""
    assert control is False
    return Measurement(metric="v", values=VALUES + spec.shift, unit="units")


@register_measurement("diag_test_na", spec=_ValuesSpec)
def _na(spec: _ValuesSpec, ctx) -> Measurement:
    """Never applicable."""
    raise NotApplicableError("not defined here")


CTX = FakeContext(stats=StatsSpec(n_bootstrap=1000, seed=3))  # a probekit.context.Context


def test_value_and_ci_are_the_mean_and_its_percentile_bootstrap():
    cell = measure_marker(MarkerSpec(name="m", measure="diag_test_values", spec=_ValuesSpec()), CTX)
    reps = VALUES[bootstrap_indices(VALUES.size, 1000, 3)].mean(axis=1)
    assert cell.value == pytest.approx(VALUES.mean(), abs=1e-15)
    assert (cell.low, cell.high) == pytest.approx(tuple(np.quantile(reps, [0.025, 0.975])), abs=1e-12)
    assert cell.n == 40 and cell.reason is None


def test_not_applicable_is_an_explicit_empty_cell():
    cell = measure_marker(MarkerSpec(name="m", measure="diag_test_na", spec=_ValuesSpec()), CTX)
    assert cell == MarkerCell(marker="m", value=None, reason="not defined here")
    assert MarkerCell.from_dict(cell.to_dict()) == cell


def test_marker_key_depends_on_the_kind_keys_and_the_sections():
    suite = SimpleNamespace(data=StatsSpec(), capture=StatsSpec(), stats=StatsSpec())
    a = MarkerSpec(name="a", measure="diag_test_values", spec=_ValuesSpec())
    assert marker_key(a, suite) == marker_key(MarkerSpec(name="b", measure="diag_test_values",
                                                         spec=_ValuesSpec()), suite)  # name only
    assert marker_key(a, suite) != marker_key(
        MarkerSpec(name="a", measure="diag_test_values", spec=_ValuesSpec(shift=1.0)), suite)
    other = SimpleNamespace(data=StatsSpec(), capture=StatsSpec(), stats=StatsSpec(seed=1))
    assert marker_key(a, suite) != marker_key(a, other)


def test_cell_store_round_trip_and_damaged_record(tmp_path):
    store = CellStore(tmp_path)
    assert store.get("fp", "k") is None
    store.put("fp", "k", {"value": 1.5})
    assert store.get("fp", "k") == {"value": 1.5}
    store.path("fp", "k").write_text("{not json")
    assert store.get("fp", "k") is None  # redone, never trusted
