"""Circuit results display themselves in a notebook (issue 35): the report's heatmap, tables, curve."""

from functools import partial

import numpy as np
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


def test_progress_series_displays_the_claim_plots_and_table():

    from probekit.circuits.progress_measures import progress_measures
    from probekit.executor import InProcessExecutor
    from probekit.testbeds import get_task
    from tests.circuits.test_progress_measures import SERIES

    p = 53
    train = get_task("modular_addition", p=p, train_fraction=0.6, seed=0).splits()["train"]
    mask = np.zeros((p, p), bool)
    mask[train.metadata["a"], train.metadata["b"]] = True
    series = progress_measures([(s, SERIES / f"step_{s:07d}") for s in (100, 1000)],
                               train_mask=mask, keys=(2, 7, 12, 13, 20),
                               executor=InProcessExecutor(progress=False))
    parsed = check_display(series, headers=["step", "held-out loss", "restricted loss", "Gini W_E"],
                           numbers={"test_loss": ".3g", "restricted_loss": ".3g", "test_acc": ".3f"})
    assert [r["step"] for r in series.to_records()] == [100, 1000]
    assert series.to_records()[1]["test_acc"] == series.points[1].test_acc
    assert len(parsed.images) == 2
    assert series.plot().axes[0].get_ylabel() == "loss (nats)"


def test_bridge_entity_lens_displays_the_claim_curve_and_table(small_model):
    from probekit.circuits import bridge_entity_lens
    from tests.conftest import random_sequences

    seqs = random_sequences(6, small_model.cfg.d_vocab, lo=3, hi=3, seed=4)
    res = bridge_entity_lens(small_model, seqs, [1, 2, 3, 4, 5, 6], [6, 7, 8, 9, 10, 1], position=1)
    check_display(res, headers=["block", "bridge top-1 rate", "bridge MRR", "answer top-1 rate"],
                  numbers={"bridge_mrr": ".3f", "answer_top1": ".3f"})
    recs = res.to_records()
    assert [r["layer"] for r in recs] == res.layers
    assert recs[0]["bridge_mrr"] == pytest.approx(float((1 / (res.bridge_rank[:, 0].double() + 1)).mean()))
    assert res.plot().axes[0].get_ylabel() == "top-1 rate"


def test_bridge_probe_result_displays_accuracy_per_block():
    from probekit.circuits.bridge import BridgeProbeResult

    res = BridgeProbeResult(
        accuracy={"id": [0.25, 0.75, 1.0], "ood": [0.125, 0.0, 0.5]},
        correct={"id": np.ones((4, 3), bool), "ood": np.zeros((8, 3), bool)},
        train_accuracy=[0.5, 0.875, 1.0], layers=[0, 1, 2], position=1, n_train=40, n_classes=7)
    check_display(res, headers=["block", "train accuracy", "id accuracy", "ood accuracy"],
                  numbers={"train_accuracy": ".3f", "accuracy_id": ".3f", "accuracy_ood": ".3f"})
    assert res.to_records()[1] == {"layer": 1, "train_accuracy": 0.875, "accuracy_id": 0.75,
                                   "accuracy_ood": 0.0}
    lines = res.plot().axes[0].get_lines()
    assert [list(ln.get_ydata()) for ln in lines[:3]] == [[0.25, 0.75, 1.0], [0.125, 0.0, 0.5],
                                                          [0.5, 0.875, 1.0]]
    assert repr(res) == ("BridgeProbeResult(3 blocks at position 1, 40 training queries, "
                         "7 bridges; best accuracy id 1.000, ood 0.500)")


def test_bridge_entity_analysis_displays_lens_per_group_and_tracing():
    from probekit.circuits import bridge_entity_analysis
    from probekit.report.blocks import Heatmap
    from tests.circuits import test_bridge as tb

    task = tb.kg_task()
    model, g = tb.planted_model(task), tb.groups(task)
    f = task.atomic_facts
    facts = {(task.entity_id(h), task.relation_id(r)): task.entity_id(t)
             for h, r, t in zip(f.head, f.relation, f.tail)}
    res = bridge_entity_analysis(model, {k: v[0] for k, v in g.items()}, {k: v[1] for k, v in g.items()},
                                 {k: v[2] for k, v in g.items()}, facts=facts, max_traced=4)
    parsed = check_display(res, headers=["group", "answer top-1 accuracy", "bridge top-1 rate"],
                           numbers={"bridge_top1": ".3f", "bridge_mrr": ".3f", "answer_top1": ".3f"})
    assert [(r["group"], r["layer"], r["bridge_top1"]) for r in res.to_records()] == [
        ("id", 0, 1.0), ("id", 1, 1.0), ("ood", 0, 0.0), ("ood", 1, 0.0)]
    assert {"1.000", "0.000"} <= set(parsed.tables[0]["cells"])  # answer accuracy id, ood
    heat = [b for b in res._blocks() if isinstance(b, Heatmap)]
    assert [h.title.split(":")[0] for h in heat] == list(res.tracing)
    assert len(parsed.images) == len(res.lens) + len(heat)
    assert res.plot().axes[0].get_ylabel() == "top-1 rate"
    assert repr(res).startswith("BridgeEntityAnalysis(2 query groups; answer accuracy id 1.000, ood 0.000")
