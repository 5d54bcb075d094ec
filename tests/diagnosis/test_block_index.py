"""Block indices counted from each checkpoint's last block; blocks a model lacks are not applicable."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from probekit.diagnosis.block_index import (
    block_indices,
    check_block_indices,
    resolve_block,
    resolve_blocks,
)
from probekit.diagnosis.markers import MarkerCell, measure_marker
from probekit.diagnosis.spec import MarkerSpec
from probekit.errors import ConfigError, NotApplicableError
from probekit.hypotheses.kinds.homomorphism_error import HomomorphismErrorSpec
from probekit.hypotheses.kinds.probe_accuracy import ProbeAccuracySpec
from probekit.hypotheses.kinds.representational_similarity import SimilaritySpec
from probekit.suites.spec import StatsSpec
from tests.hypotheses.helpers import FakeContext


@pytest.mark.parametrize(("index", "n_layers", "block"), [
    (-1, 1, 0), (-1, 4, 3), (-1, 10, 9), (-2, 10, 8), (-4, 4, 0), (0, 1, 0), (3, 4, 3)])
def test_negative_blocks_count_from_the_last(index, n_layers, block):
    assert resolve_block(index, n_layers, what="layer") == block


@pytest.mark.parametrize(("index", "n_layers"), [(3, 2), (1, 1), (-2, 1), (-5, 4), (10, 10)])
def test_a_block_the_model_lacks_is_not_applicable(index, n_layers):
    with pytest.raises(NotApplicableError, match=f"block {index} does not exist in this "
                       f"{n_layers}-block model"):
        resolve_block(index, n_layers, what="layer")


def test_specs_resolve_layer_and_site_keys():
    he = HomomorphismErrorSpec(layer=-1)
    assert resolve_blocks(he, 10).layer == 9 and resolve_blocks(he, 1).layer == 0
    assert resolve_blocks(he, 10).site == "resid_post"  # a bare hook kind: no block
    probe = ProbeAccuracySpec(site="resid_post@-1")
    assert resolve_blocks(probe, 6).site == "resid_post@5"
    assert resolve_blocks(ProbeAccuracySpec(site="attn_z@-2:1"), 4).site == "attn_z@2:1"
    fixed = ProbeAccuracySpec(site="resid_post@2")
    assert resolve_blocks(fixed, 4) is fixed  # nothing to change
    assert resolve_blocks(ProbeAccuracySpec(site="embed"), 1).site == "embed"
    with pytest.raises(NotApplicableError, match="site = 'resid_post@3'.*2-block model"):
        resolve_blocks(ProbeAccuracySpec(site="resid_post@3"), 2)
    # site_b is read on the reference checkpoint: its own depth
    cka = SimilaritySpec(site_a="resid_post@-1", site_b="resid_post@-1")
    got = resolve_blocks(cka, 10, reference_layers=4)
    assert (got.site_a, got.site_b) == ("resid_post@9", "resid_post@3")
    assert block_indices(cka) == [("site_a = 'resid_post@-1'", -1), ("site_b = 'resid_post@-1'", -1)]
    assert block_indices(he) == [("layer = -1", -1)]


def test_check_refuses_a_block_no_model_has():
    markers = [MarkerSpec(name="last", measure="probe_accuracy",
                          spec=ProbeAccuracySpec(site="resid_post@-1")),
               MarkerSpec(name="b9", measure="homomorphism_error",
                          spec=HomomorphismErrorSpec(layer=9))]
    where = lambda section, key, index: f"F:{index}: [{section}] {key}"  # noqa: E731
    check_block_indices(markers, [1, 2, 4, 10], where)  # b9 exists in the depth-10 models
    with pytest.raises(ConfigError, match=r"F:1: \[marker\] layer: marker 'b9' layer = 9: no "
                       r"model of the population has that block \(depths 1..4"):
        check_block_indices(markers, [1, 2, 4], where)
    bad = [MarkerSpec(name="m", measure="probe_accuracy", spec=ProbeAccuracySpec(site="resid_post@-5"))]
    with pytest.raises(ConfigError, match="'resid_post@-5'"):
        check_block_indices(bad, [1, 4], where)


def test_measure_marker_gives_a_not_applicable_cell_for_a_missing_block():
    ctx = FakeContext(model=SimpleNamespace(cfg=SimpleNamespace(n_layers=2)),
                      stats=StatsSpec(n_bootstrap=1000))
    cell = measure_marker(MarkerSpec(name="b3", measure="probe_accuracy",
                                     spec=ProbeAccuracySpec(site="resid_post@3")), ctx)
    assert cell.value is None and cell.low is None
    assert "block 3 does not exist in this 2-block model" in cell.reason
    assert MarkerCell.from_dict(cell.to_dict()) == cell
