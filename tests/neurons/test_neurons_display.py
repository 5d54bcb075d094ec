"""Neuron results display themselves in a notebook (issue 35): the [[neurons]] report blocks."""

import numpy as np
import pytest

from probekit.neurons import (
    DeactivationConfig,
    relation_neuron_experiments,
)
from tests.report.notebook_checks import check_display

from .planted import PLANTED_SITES, RED, planted_study

SITES = list(PLANTED_SITES)


@pytest.fixture(scope="module")
def planted():
    return planted_study()


def test_neuron_statistics_display_ap_by_layer_and_table(planted):
    _, _, stats = planted
    parsed = check_display(stats, headers=["site", "relation", "units", "max AP", "chance AP"],
                           numbers={"max_ap": ".3f", "mean_ap": ".3f"})
    recs = stats.to_records()
    assert len(recs) == len(SITES) * len(stats.relations)
    first = [r for r in recs if r["site"] == SITES[0].name]
    assert [r["max_ap"] for r in first] == [1.0] * len(stats.relations)  # planted units
    assert [r["best_unit"] for r in first] == [j * RED for j in range(len(stats.relations))]
    assert "mlp_post@0" in parsed.tables[0]["cells"]
    assert stats.plot().axes[0].get_ylabel() == "max AP"


def test_relation_neuron_result_displays_table_and_heatmap(planted):
    model, fs, stats = planted
    cfg = DeactivationConfig(k=RED, fraction=None, n_random=19, shares=(0.5, 1.0), n_single=1,
                             generation=False)
    res = relation_neuron_experiments(model, stats, fs, cfg, progress=False)
    parsed = check_display(res, headers=["relation", "test facts", "change on r (own neurons off)",
                                         "p (Holm)"], numbers={"p_value": ".3f", "p_holm": ".3f"})
    recs = res.to_records()
    assert [r["change_own"] for r in recs] == [-1.0, -1.0, -1.0]
    assert all(r["change_others_mean"] == 0.0 for r in recs)
    assert "-100.0" in parsed.tables[0]["cells"]  # the report shows changes in points
    fig = res.plot()  # the set x relation heatmap
    assert fig.axes[0].get_ylabel() == "relation whose neurons are off"
    np.testing.assert_array_equal(fig.axes[0].images[0].get_array(), -100 * np.eye(3))
