"""Diagnosis report blocks: ranking order, one sentence per marker, plots that render."""

import base64
import re

import pytest

from probekit.diagnosis import (
    conditional_mutual_information,
    diagnosis_blocks,
    early_warning,
    granulated_kendall_tau,
    level_mean_r2,
    marker_analysis,
)
from probekit.errors import DataError
from probekit.report.blocks import Fold, LinePlot, Scatter, Table, Text, blocks_to_dicts
from probekit.report.write import render_html
from tests.diagnosis.statistics.test_analysis import population
from tests.diagnosis.statistics.test_early import series

REPORT = {"suite": {"name": "diagnosis", "description": "constructed population"},
          "model": {"id": "population", "fingerprint": "-", "n_layers": 1, "d_model": 1,
                    "compatibility_mode": False},
          "data": {"n_examples": 30, "splits": {}, "positions": "-", "probe_device": "cpu"},
          "hypotheses": []}


def flat(blocks):
    """The blocks with every fold opened (its blocks in place of it)."""
    out = []
    for b in blocks:
        out.extend(flat(b.blocks) if isinstance(b, Fold) else [b])
    return out


def test_blocks_render_every_part():
    t = population(0)
    t["const"] = [1.0] * 30
    a = marker_analysis(t, "ood", covariates=["noise"], groups="seed", n_permutations=300)
    ew = early_warning(series(), "final", step="step", markers=["gini", "noise"],
                       covariates=["wd", "train_acc"], groups="seed", n_permutations=300)
    blocks = diagnosis_blocks(
        a, t, color_by="noise", levels=level_mean_r2(t, "ood", "tracks_knob", "noise"),
        granulated=[granulated_kendall_tau(t, "ood", "planted", ["noise", "seed"]),
                    conditional_mutual_information(t, "ood", "planted", ["noise", "seed"])],
        early=ew)
    folded = blocks
    # the sentences, the scatters and the early-warning sentences fold away: the page stays short
    assert [b.title.split(":")[0] for b in folded if isinstance(b, Fold)] == [
        "One sentence per marker", "Scatter plots", "Early warning"]
    assert not any(isinstance(b, Scatter) for b in folded)
    blocks = flat(blocks)
    ranking = next(b for b in blocks if isinstance(b, Table))
    order = [r["marker"] for r in ranking.rows]
    partial = {s.marker: abs(s.partial_r) for s in a.markers if s.applicable}
    assert order[:-1] == sorted(partial, key=partial.get, reverse=True) and order[-1] == "const"
    assert ranking.rows[-1]["verdict"] == "not_applicable"
    assert ranking.highlight == (order.index("planted"),)
    texts = [b.text for b in blocks if isinstance(b, Text)]
    for s in a.markers:
        assert a.sentence(s.marker) in texts
    assert any(t.startswith("gini first adds beyond wd, train_acc at step 200 (steps 100, 200, 300).")
               for t in texts)
    scatters = [b for b in blocks if isinstance(b, Scatter)]
    assert len(scatters) == 2 * 4  # marker vs outcome + partial residuals, 4 applicable markers
    assert scatters[0].categories[0] == "noise=0" and scatters[0].color_label == "noise"
    assert len(scatters[1].x) == 30 and scatters[1].title.startswith("planted: partial residuals")
    titles = [b.title for b in blocks if isinstance(b, Table)]
    assert "level means (An & Du's unit)" in titles
    assert "Granulated Kendall tau (Jiang et al. 2020)" in titles
    assert sum(isinstance(b, LinePlot) for b in blocks) == 2
    html = render_html({**REPORT, "analyses": [{"section": "diagnosis", "title": "Diagnosis",
                                                "blocks": blocks_to_dicts(blocks)}]})
    # a diagnosis report: the curves inline SVG too, one hover per point (3 steps x 2 markers)
    page = render_html({**REPORT, "diagnosis": {}, "analyses": [
        {"section": "diagnosis", "title": "Diagnosis", "blocks": blocks_to_dicts(folded)}]})
    assert "data:image/png" not in page and page.count('<svg class="lineplot"') == 2
    assert page.count('<details class="fold"') == 3
    curves = page[page.index('<svg class="lineplot"'):]
    assert curves.count('<g class="pt"><title>') >= 2 * 3
    pngs = re.findall(r'src="data:image/png;base64,([A-Za-z0-9+/=]+)"', html)
    # 2 early-warning curves as PNG; the 8 scatters inline SVG, one hover <title> per model
    assert len(pngs) == 2 and all(base64.b64decode(p)[:4] == b"\x89PNG" for p in pngs)
    assert html.count('<svg class="scatter"') == 8
    assert html.count('<g class="pt"><title>') == 8 * 30
    assert "adds_beyond_covariates" in html and "level means (An &amp; Du&#39;s unit)" in html


def test_table_must_match_the_analysis():
    t = population(0)
    a = marker_analysis(t, "ood", n_permutations=100)
    with pytest.raises(DataError, match="the table has 29 rows but the analysis was made on 30"):
        diagnosis_blocks(a, {k: v[:-1] for k, v in t.items()})
