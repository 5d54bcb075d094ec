"""Similarity results display themselves in a notebook (issue 35): the [[similarity]] blocks."""

import pytest

from probekit.similarity import (
    SimilarityConfig,
    checkpoint_drift,
    layer_similarity,
    seed_similarity,
)
from tests.report.notebook_checks import check_display
from tests.similarity._helpers import randn
from tests.similarity.test_layers import _layers


def test_layer_similarity_displays_heatmap_and_matrix():
    res = layer_similarity(_layers(0), labels_a=["embed", "blocks.0.hook_resid_post", "l1", "l2"])
    parsed = check_display(res, headers=["embed", "resid_post@0", "l1", "l2"],
                           numbers={"value": ".3f"})
    assert len(parsed.tables[0]["cells"]) == 4 * 5  # 4 rows x (label + 4 columns)
    assert res.plot().axes[0].get_xlabel() == "site"
    assert repr(res) == "LayerSimilarity(linear CKA, 4 x 4 layers, n=120)"


@pytest.mark.parametrize("measure", ["cka", "procrustes"])
def test_checkpoint_drift_displays_the_report_curve(measure):
    cks = [_layers(0)[1] + s * randn(50 + k, 120, 9) for k, s in enumerate((3.0, 1.0, 0.0))]
    d = checkpoint_drift(cks, labels=["100", "200", "300"], config=SimilarityConfig(measure=measure))
    check_display(d, headers=["checkpoint", "representation to final", "representation to previous"],
                  numbers={"to_final": ".3f", "to_previous": ".3f"})
    ax = d.plot().axes[0]
    assert ax.get_xlabel() == "checkpoint" and ax.get_ylabel() == d.measure


def test_population_similarity_displays_mean_and_spread():
    pop = seed_similarity([_layers(s, widths=(6, 6, 6)) for s in range(3)])
    parsed = check_display(pop, headers=["0", "1", "2"], numbers={"mean": ".3f", "std": ".3f"})
    assert [t["headers"][0] for t in parsed.tables] == ["", ""]
    assert "3 model pairs" in repr(pop)
