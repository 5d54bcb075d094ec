"""Circuit results display themselves in a notebook (issue 35): the report's heatmap, tables, curve."""

from functools import partial

import pytest
import torch

from probekit.circuits import (
    activation_patching,
    attribution_patching,
    edge_attribution,
    faithfulness_curve,
    logit_diff,
)
from probekit.circuits.blocks import patching_view
from tests.circuits.planted import TRUE_EDGES, planted_model, planted_pairs
from tests.report.notebook_checks import check_display


@pytest.fixture(scope="module")
def planted():
    model = planted_model()
    clean, corrupt, answer, foil = planted_pairs()
    return model, clean, corrupt, partial(logit_diff, answer=answer, foil=foil)


@pytest.mark.parametrize(("fn", "method"), [(activation_patching, "activation"),
                                            (attribution_patching, "attribution")])
@pytest.mark.parametrize("by", [("layer", "pos"), ("layer", "head"), ("layer", "pos", "head")])
def test_patching_grid_displays_heatmap_and_largest_effect(planted, fn, method, by):
    model, clean, corrupt, metric = planted
    kind = "resid_pre" if by == ("layer", "pos") else "attn_z"
    res = fn(model, clean, corrupt, metric, kind=kind, by=by)
    assert res.method == method
    parsed = check_display(res, headers=["site kind", "method", "cell", "normalised effect"],
                           numbers={}, plot=True)
    recs = res.to_records()
    assert len(recs) == res.values.numel() and list(recs[0])[: len(by)] == list(by)
    # records are the grid, cell by cell in C order
    torch.testing.assert_close(torch.tensor([r["normalized"] for r in recs], dtype=torch.float64),
                               res.normalized.flatten().double(), equal_nan=True)
    best = max(recs, key=lambda r: float("-inf") if r["normalized"] != r["normalized"] else r["normalized"])
    assert f"{best['normalized']:.3f}" in parsed.tables[0]["cells"]
    assert method in parsed.tables[0]["cells"]
    fig = res.plot()
    assert fig.axes[0].get_ylabel() == ("layer, head" if len(by) == 3 else "layer")
    assert patching_view(res, method=method).heatmap == res._blocks()[-1]


def test_edge_scores_and_faithfulness_curve_display(planted):
    model, clean, corrupt, metric = planted
    scores = edge_attribution(model, clean, corrupt, metric, method="eap")
    parsed = check_display(scores, headers=["from", "to", "score (metric change)"],
                           numbers={"score": ".4g"}, plot=False, max_rows_checked=20)
    recs = scores.to_records()
    assert len(recs) == scores.graph.n_edges
    assert {(r["src"], r["dst"]) for r in recs[:3]} == TRUE_EDGES  # the planted circuit on top
    assert len(parsed.tables[0]["cells"]) == 3 * 20
    curve = faithfulness_curve(model, clean, corrupt, metric, scores, [2, 3, 10])
    check_display(curve, headers=["edges kept (k)", "metric", "recovered share"],
                  numbers={"normalized": ".3f", "metric": ".3f"})
    assert [r["k"] for r in curve.to_records()] == [2, 3, 10]
    assert curve.plot().axes[0].get_xlabel() == "edges kept (k)"
    assert "k=3: " in repr(curve)


def test_logit_lens_and_dla_display_on_modadd():
    """Grokked modular addition: the answer is top-1 after block 0, and the MLP carries the DLA."""
    from pathlib import Path

    import probekit
    from probekit.circuits import direct_logit_attribution, logit_lens

    model = probekit.load_checkpoint(Path(__file__).resolve().parents[2] / "probes" / "checkpoints" / "modadd-p53")
    g = torch.Generator().manual_seed(0)
    a, b = torch.randint(0, 53, (2, 24), generator=g)
    toks = torch.stack([a, b, torch.full_like(a, 53)], 1)
    answer = (a + b) % 53
    lens = logit_lens(model, toks, answer)
    check_display(lens, headers=["layer", "mean P(target)", "top-1 share"],
                  numbers={"mean_prob": ".3f", "top1": ".3f"})
    (rec,) = lens.to_records()
    assert rec["top1"] == float((lens.rank[:, 0, 2, 0] == 0).double().mean()) >= 0.95
    assert rec["mean_prob"] == pytest.approx(float(lens.prob[:, 0, 2, 0].double().mean()))
    dla = direct_logit_attribution(model, toks, answer, (answer + 1) % 53)
    check_display(dla, headers=["component", "mean contribution", "std over prompts"],
                  numbers={"mean": ".3f"}, max_rows_checked=0)
    recs = {r["component"]: r for r in dla.to_records()}
    assert recs["mlp0"]["mean"] == pytest.approx(float(dla.mlps[:, 0].double().mean()))
    assert sum(r["mean"] for r in recs.values()) == pytest.approx(float(dla.total.double().mean()), abs=1e-3)
    top = max(recs.values(), key=lambda r: abs(r["mean"]))
    assert top["component"] == "mlp0" and f"{top['mean']:.3f}" in repr(dla) + dla._repr_html_()
    assert dla.plot().axes[0].get_ylabel() == "layer"
