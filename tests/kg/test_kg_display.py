"""Bridge-entity results display themselves in a notebook (issue 35): curves, tables, tracing."""

import numpy as np
import pytest

from tests.report.notebook_checks import check_display


def test_bridge_entity_lens_displays_the_claim_curve_and_table(small_model):
    from probekit.kg import bridge_entity_lens
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
    from probekit.kg.bridge import BridgeProbeResult

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
    from probekit.kg import bridge_entity_analysis
    from probekit.report.blocks import Heatmap
    from tests.kg import test_bridge as tb

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
