"""Report blocks of the bridge-entity results (Wang et al. 2024): their curves and tables, one place.

The results of :mod:`probekit.kg.bridge` (their notebook display) and the ``bridge_entity_rank``
claim kind call these, so a notebook cell shows the same curve and table as the report; the
causal-tracing grids are drawn by the generic :func:`probekit.circuits.blocks.patching_view`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..circuits.blocks import patching_view
from ..report.blocks import Column, LinePlot, Series, Table

__all__ = [
    "bridge_analysis_blocks", "bridge_analysis_records", "bridge_lens_plot", "bridge_lens_records",
    "bridge_probe_blocks", "bridge_probe_records",
]


def bridge_lens_plot(
    res: Any, *, top_k: int = 1, title: str | None = None, marker: int | None = None,
) -> LinePlot:
    """Top-``k`` rate per block of the bridge (at its position) and of the answer (last token).

    ``marker``: a layer to mark (the block a ``bridge_entity_rank`` claim names).
    """
    return LinePlot(
        title=title or f"logit lens: top-{top_k} rate per block",
        x_labels=tuple(str(x) for x in res.layers), xlabel="block output",
        ylabel=f"top-{top_k} rate",
        series=(Series(name=f"bridge at position {res.position}",
                       values=tuple(res.bridge_top_k(top_k).tolist())),
                Series(name="answer at the last token",
                       values=tuple(res.answer_top_k(top_k).tolist()), style="dashed")),
        marker=None if marker is None else res.layers.index(marker),
        marker_label="claimed block", ylim=(0.0, 1.0),
    )


def bridge_lens_records(res: Any) -> list[dict[str, Any]]:
    """Per block: bridge top-1 rate, MRR and median rank; answer top-1 rate and median rank."""
    b1, mrr, a1 = res.bridge_top_k(1).tolist(), res.bridge_mrr().tolist(), res.answer_top_k(1).tolist()
    b_med = res.bridge_rank.double().median(0).values.tolist()
    a_med = res.answer_rank.double().median(0).values.tolist()
    return [{"layer": int(layer), "bridge_top1": b1[i], "bridge_mrr": mrr[i],
             "bridge_median_rank": b_med[i], "answer_top1": a1[i], "answer_median_rank": a_med[i]}
            for i, layer in enumerate(res.layers)]


def bridge_probe_records(res: Any) -> list[dict[str, Any]]:
    """Per block: the probe's training accuracy and its accuracy on each query group."""
    return [{"layer": int(layer), "train_accuracy": float(res.train_accuracy[i]),
             **{f"accuracy_{g}": float(acc[i]) for g, acc in res.accuracy.items()}}
            for i, layer in enumerate(res.layers)]


def bridge_probe_blocks(res: Any) -> list[Any]:
    """Probe accuracy per block (one series per group, training dashed) and its table."""
    plot = LinePlot(
        title=f"linear bridge probe at position {res.position}: accuracy per block",
        x_labels=tuple(str(x) for x in res.layers), xlabel="block output", ylabel="probe accuracy",
        series=(*(Series(name=g, values=tuple(float(v) for v in acc))
                  for g, acc in res.accuracy.items()),
                Series(name="train", values=tuple(float(v) for v in res.train_accuracy),
                       style="dashed")),
        ylim=(0.0, 1.0),
    )
    table = Table(
        columns=(Column(key="layer", header="block", fmt="d"),
                 Column(key="train_accuracy", header="train accuracy"),
                 *(Column(key=f"accuracy_{g}", header=f"{g} accuracy") for g in res.accuracy)),
        rows=tuple(bridge_probe_records(res)),
        caption=f"multinomial logistic probe per block, trained on {res.n_train} queries "
        f"({res.n_classes} bridges); queries whose bridge was never seen in training count as "
        "errors",
    )
    return [plot, table]


def bridge_analysis_records(res: Any) -> list[dict[str, Any]]:
    """Per query group and block: the logit-lens rates of :func:`bridge_lens_records`."""
    return [{"group": g, **r} for g, lens in res.lens.items() for r in bridge_lens_records(lens)]


def bridge_analysis_blocks(res: Any) -> list[Any]:
    """Answer accuracy per group, each group's logit-lens curve, the lens table, tracing grids."""
    out: list[Any] = [Table(
        title="answer accuracy per query group",
        columns=(Column(key="group", header="group", fmt="", align="left"),
                 Column(key="n", header="queries", fmt="d"),
                 Column(key="accuracy", header="answer top-1 accuracy"),
                 Column(key="traced", header="traced pairs", fmt="d")),
        rows=tuple({"group": g, "n": int(lens.bridge_rank.shape[0]), "accuracy": res.accuracy[g],
                    "traced": int(res.tracing[g].per_pair.shape[0]) if g in res.tracing else 0}
                   for g, lens in res.lens.items()),
    )]
    out.extend(bridge_lens_plot(lens, title=f"{g}: logit lens, top-1 rate per block")
               for g, lens in res.lens.items())
    out.append(Table(
        title="logit lens per group and block",
        columns=(Column(key="group", header="group", fmt="", align="left"),
                 Column(key="layer", header="block", fmt="d"),
                 Column(key="bridge_top1", header="bridge top-1 rate"),
                 Column(key="bridge_mrr", header="bridge MRR"),
                 Column(key="bridge_median_rank", header="bridge median rank", fmt=".0f"),
                 Column(key="answer_top1", header="answer top-1 rate"),
                 Column(key="answer_median_rank", header="answer median rank", fmt=".0f")),
        rows=tuple(bridge_analysis_records(res)),
    ))
    for g, tr in res.tracing.items():
        heat = patching_view(tr, method=tr.method).heatmap
        out.append(replace(heat, title=f"{g}: causal tracing ({tr.per_pair.shape[0]} pairs), "
                                       "normalised effect"))
    return out
