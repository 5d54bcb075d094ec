"""Marker cells: estimate and percentile CI of a measurement kind, not-applicable cells, cache."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import numpy as np
import pytest

from probekit.diagnosis.markers import (
    CellStore,
    MarkerCell,
    marker_key,
    measure_marker,
    reference_similarity,
)
from probekit.diagnosis.spec import MarkerSpec
from probekit.errors import ConfigError, DataError, NotApplicableError
from probekit.hypotheses.kinds.representational_similarity import SimilaritySpec
from probekit.hypotheses.measurement import Measurement
from probekit.hypotheses.registry import register_measurement
from probekit.similarity import cka
from probekit.sites import Site
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


class _Examples:
    """Rows 0..n-1; split "test" = the even rows."""

    def __init__(self, tokens):
        self.tokens = tokens

    def split(self, name):
        assert name == "test"
        return np.arange(0, len(self.tokens), 2)


class _Ctx:
    """A context whose activations at every site are one fixed matrix."""

    def __init__(self, acts, examples, seed=3):
        self.acts, self.examples = acts, examples
        self.stats = StatsSpec(n_bootstrap=1000, seed=seed)
        self.suite = self.executor = self.model = None  # the rest of probekit.context.Context

    def activations(self, sites):
        return {s: self.acts for s in sites}


def _pair():
    import torch

    g = np.random.default_rng(1)
    X = g.normal(size=(30, 6))
    Y = X @ g.normal(size=(6, 5)) + 0.5 * g.normal(size=(30, 5))
    ex = _Examples([[i, i + 1] for i in range(30)])
    return X, Y, _Ctx(torch.tensor(X, dtype=torch.float32), ex), \
        _Ctx(torch.tensor(Y, dtype=torch.float32), ex)


def test_reference_similarity_is_cka_of_the_two_models_on_the_same_rows():
    X, Y, ctx, ref = _pair()
    spec = SimilaritySpec(site_a="resid_post@1", site_b="resid_post@1", split="test")
    marker = MarkerSpec(name="cka", measure="representational_similarity", spec=spec,
                        reference={"seed": "same"})
    cell = measure_marker(marker, ctx, ref)
    x = X.astype(np.float32).astype(np.float64)[::2]
    y = Y.astype(np.float32).astype(np.float64)[::2]
    assert cell.value == pytest.approx(cka(x, y), abs=1e-9)
    assert 0.3 < cell.value < 0.99  # related, not identical
    reps = [cka(x[r], y[r]) for r in bootstrap_indices(15, 1000, 3)]
    assert (cell.low, cell.high) == pytest.approx(tuple(np.quantile(reps, [0.025, 0.975])), abs=1e-9)
    assert cell.n == 15
    # a model against itself: exactly 1
    assert measure_marker(marker, ctx, ctx).value == pytest.approx(1.0, abs=1e-9)
    m = reference_similarity(spec, ctx, ref)
    assert "reference" in m.metric and m.n == 15
    assert Site.parse(spec.site_a).key in m.method


def test_reference_marker_needs_its_reference_context_and_the_same_inputs():
    X, Y, ctx, ref = _pair()
    spec = SimilaritySpec(site_a="resid_post@1", site_b="resid_post@1", split="test")
    with_ref = MarkerSpec(name="cka", measure="representational_similarity", spec=spec,
                          reference={"seed": "same"})
    with pytest.raises(ConfigError, match="needs exactly a reference context"):
        measure_marker(with_ref, ctx)
    with pytest.raises(ConfigError, match="needs exactly a reference context"):
        measure_marker(MarkerSpec(name="cka", measure="representational_similarity", spec=spec),
                       ctx, ref)
    other = _Ctx(ref.acts, _Examples([[i, i + 2] for i in range(30)]))
    with pytest.raises(DataError, match="other inputs"):
        measure_marker(with_ref, ctx, other)


def test_marker_key_depends_on_the_reference():
    suite = SimpleNamespace(data=StatsSpec(), capture=StatsSpec(), stats=StatsSpec())
    spec = SimilaritySpec(site_a="embed", site_b="embed")
    plain = MarkerSpec(name="c", measure="representational_similarity", spec=spec)
    ref = MarkerSpec(name="c", measure="representational_similarity", spec=spec,
                     reference={"seed": "same"})
    assert marker_key(plain, suite) != marker_key(ref, suite)
