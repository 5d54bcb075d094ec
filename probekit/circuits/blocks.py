"""Report blocks of the circuit results: the one place their heatmaps, tables and curves are built.

``[[patching]]`` / ``probekit patch`` (``suites/analyses/patching.py``) and the
``circuit_faithfulness`` claim kind call these with their extras (token labels, the method);
the results' ``_blocks()`` call them with what the result alone knows, so a notebook cell shows
the same heatmap, table and curve as the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import torch

from ..report.blocks import Column, Heatmap, LinePlot, Series, Table

if TYPE_CHECKING:
    from .eap import EdgeScores, FaithfulnessCurve
    from .grid import PatchingResult

__all__ = [
    "bridge_analysis_blocks", "bridge_analysis_records", "bridge_probe_blocks",
    "bridge_probe_records",
    "PROGRESS_COLUMNS", "PatchingView", "bridge_lens_plot", "bridge_lens_records", "dla_blocks", "dla_records", "edge_table", "faithfulness_plot",
    "largest_effect_table", "logit_lens_blocks", "logit_lens_records", "patching_view",
    "progress_plots",
]


@dataclass(frozen=True, kw_only=True)
class PatchingView:
    """A patching grid as the report draws it: the heatmap and its largest-effect row.

    Attributes:
        heatmap: normalised effect, rows = layers (or (layer, head) pairs), columns = positions
            or heads.
        row_labels, col_labels: the heatmap's axis labels.
        largest: ``{"kind", "method", "cell", "effect"}`` of the cell with the largest
            normalised effect.
    """

    heatmap: Heatmap
    row_labels: tuple[str, ...]
    col_labels: tuple[str, ...]
    largest: dict[str, Any]


def patching_view(
    res: PatchingResult, *, method: str = "activation", pos_labels: Sequence[str] | None = None,
) -> PatchingView:
    """The heatmap of a patching grid (normalised effect, symmetric colour scale) and its peak.

    Args:
        res: an activation- or attribution-patching grid.
        method: ``"activation"`` or ``"attribution"`` (titles and the table).
        pos_labels: a label per position (e.g. ``"3:Paris"``); default the grid's own labels.
    """
    by = res.axes
    row_labels = [f"L{x}" for x in res.labels["layer"]]
    if by[1] == "pos":
        col_labels = list(pos_labels) if pos_labels is not None else [str(p) for p in res.labels["pos"]]
    else:
        col_labels = [f"H{h}" for h in res.labels["head"]]
    norm = res.normalized
    if len(by) == 3:  # (layer, pos, head) -> rows (layer, head) x columns pos
        row_labels = [f"L{x} H{h}" for x in res.labels["layer"] for h in res.labels["head"]]
        norm = norm.permute(0, 2, 1).reshape(len(row_labels), -1)
    top = float(norm.nan_to_num(0.0).abs().max()) or 1.0
    heat = Heatmap(
        title=f"{method} patching of {res.kind} ({res.direction}): normalised effect",
        values=tuple(tuple(None if v != v else float(v) for v in r) for r in norm.tolist()),
        row_labels=tuple(row_labels), col_labels=tuple(col_labels),
        xlabel="position (token)" if by[1] == "pos" else "head",
        ylabel="layer, head" if len(by) == 3 else "layer", colorbar="normalised effect",
        vmin=-top, vmax=top, cmap="RdBu_r",
    )
    flat = norm.flatten().nan_to_num(float("-inf"))
    best = int(flat.argmax())
    cell = [int(x) for x in torch.unravel_index(torch.tensor(best), norm.shape)]
    largest = {"kind": res.kind, "method": method,
               "cell": f"{row_labels[cell[0]]} x {col_labels[cell[1]]}",
               "effect": float(norm[tuple(cell)])}
    return PatchingView(heatmap=heat, row_labels=tuple(row_labels), col_labels=tuple(col_labels),
                        largest=largest)


def largest_effect_table(rows: Sequence[dict[str, Any]]) -> Table:
    """The report's "largest effect per grid" table (one :attr:`PatchingView.largest` per grid)."""
    return Table(
        title="largest effect per grid",
        columns=(Column(key="kind", header="site kind", fmt="", align="left"),
                 Column(key="method", header="method", fmt="", align="left"),
                 Column(key="cell", header="cell", fmt="", align="left"),
                 Column(key="effect", header="normalised effect")),
        rows=tuple(rows),
    )


def edge_table(scores: EdgeScores, n: int) -> Table:
    """The ``n`` edges with the largest ``|score|``: from, to, score (the metric change)."""
    top = scores.top(n)
    return Table(
        title=f"top {len(top)} of {scores.graph.n_edges} edges by |{scores.method.upper()} score|",
        columns=(Column(key="src", header="from", fmt="", align="left"),
                 Column(key="dst", header="to", fmt="", align="left"),
                 Column(key="score", header="score (metric change)", fmt=".4g")),
        rows=tuple({"src": a, "dst": b, "score": v} for a, b, v in top),
    )


def faithfulness_plot(curve: FaithfulnessCurve, *, threshold: float | None = None) -> LinePlot:
    """Recovered share ``(m_circuit - m_corrupt) / (m_clean - m_corrupt)`` against ``k`` kept edges.

    ``threshold``: a claimed level, drawn as a reference line (the ``circuit_faithfulness`` claim).
    """
    rest = "patched to corrupt" if curve.ablation == "patch" else f"{curve.ablation}-ablated"
    claimed = () if threshold is None else ((float(threshold), "claimed"),)
    return LinePlot(
        title=f"faithfulness of the top-k {curve.method.upper()} edges (rest {rest})",
        x_labels=tuple(str(k) for k in curve.ks),
        series=(Series(name="recovered share", values=tuple(float(v) for v in curve.normalized)),),
        xlabel="edges kept (k)", ylabel="(m_circuit - m_corrupt) / (m_clean - m_corrupt)",
        hlines=((1.0, "clean run (corrupt run = 0)"), *claimed),
    )


def _last_positions(top: torch.Tensor) -> torch.Tensor:
    """Index of each prompt's last real position (``top`` holds -1 past a prompt's length)."""
    return (top[:, 0, :] >= 0).sum(-1) - 1


def logit_lens_records(res: Any) -> list[dict[str, Any]]:
    """Per layer and target at each prompt's last token: probability, rank and top-1 share.

    ``mean_prob``, ``mean_rank``, ``median_rank`` over prompts; ``top1`` the share of prompts
    whose target is the top-1 token.
    """
    last = _last_positions(res.top)
    rows = torch.arange(res.prob.shape[0])
    prob = res.prob[rows, :, last]  # (prompt, layer, target)
    rank = res.rank[rows, :, last].double()
    out = []
    for i, layer in enumerate(res.layers):
        for j in range(prob.shape[-1]):
            out.append({"layer": int(layer), "target": j, "mean_prob": float(prob[:, i, j].mean()),
                        "mean_rank": float(rank[:, i, j].mean()),
                        "median_rank": float(rank[:, i, j].median()),
                        "top1": float((rank[:, i, j] == 0).double().mean())})
    return out


def logit_lens_blocks(res: Any) -> list[Any]:
    """Target probability and top-1 share by layer (a line plot) and the per-layer table."""
    recs = [r for r in logit_lens_records(res) if r["target"] == 0]
    labels = tuple(str(r["layer"]) for r in recs)
    plot = LinePlot(
        title="logit lens at the last token: the (first) target by layer",
        x_labels=labels, xlabel="layer (block output)", ylabel="probability / share",
        series=(Series(name="mean P(target)", values=tuple(r["mean_prob"] for r in recs)),
                Series(name="share with target top-1", values=tuple(r["top1"] for r in recs),
                       style="dashed")),
        ylim=(0.0, 1.0),
    )
    table = Table(
        columns=(Column(key="layer", header="layer", fmt="d"),
                 Column(key="target", header="target", fmt="d"),
                 Column(key="mean_prob", header="mean P(target)"),
                 Column(key="mean_rank", header="mean rank", fmt=".1f"),
                 Column(key="median_rank", header="median rank", fmt=".0f"),
                 Column(key="top1", header="top-1 share")),
        rows=tuple(logit_lens_records(res)),
        caption="rank 0 = the top token; decoded by the final norm and unembedding",
    )
    return [plot, table]


def dla_records(res: Any) -> list[dict[str, Any]]:
    """One row per component (embeddings, each head, attention bias, MLP, constant).

    ``mean`` / ``std``: over prompts, of the component's direct contribution to the logit
    difference (or logit) at the last token.
    """
    def row(name: str, layer: int | None, head: int | None, x: torch.Tensor) -> dict[str, Any]:
        x = x.double()
        return {"component": name, "layer": layer, "head": head, "mean": float(x.mean()),
                "std": float(x.std()) if x.numel() > 1 else float("nan")}

    out = [row("embed", None, None, res.embed)]
    n_layers, n_heads = res.heads.shape[1], res.heads.shape[2]
    for layer in range(n_layers):
        out += [row(f"L{layer}H{h}", layer, h, res.heads[:, layer, h]) for h in range(n_heads)]
        out.append(row(f"attn_bias{layer}", layer, None, res.attn_bias[:, layer]))
        out.append(row(f"mlp{layer}", layer, None, res.mlps[:, layer]))
    out.append(row("constant", None, None, res.constant))
    return out


def dla_blocks(res: Any) -> list[Any]:
    """Heads (and each layer's MLP) as a layer x component heatmap, then the largest components."""
    n_layers, n_heads = res.heads.shape[1], res.heads.shape[2]
    heads, mlps = res.heads.double().mean(0), res.mlps.double().mean(0)
    values = torch.cat([heads, mlps[:, None]], 1)
    top = float(values.abs().max()) or 1.0
    heat = Heatmap(
        title="direct logit attribution at the last token (mean over prompts)",
        values=tuple(tuple(float(v) for v in r) for r in values.tolist()),
        row_labels=tuple(f"L{layer}" for layer in range(n_layers)),
        col_labels=(*(f"H{h}" for h in range(n_heads)), "MLP"),
        xlabel="component (head, MLP)", ylabel="layer", colorbar="logit difference",
        vmin=-top, vmax=top, cmap="RdBu_r",
    )
    recs = sorted(dla_records(res), key=lambda r: -abs(r["mean"]))[:15]
    table = Table(
        title=f"largest components (of {len(dla_records(res))}); model's own total "
              f"{float(res.total.double().mean()):.3f}",
        columns=(Column(key="component", header="component", fmt="", align="left"),
                 Column(key="mean", header="mean contribution"),
                 Column(key="std", header="std over prompts")),
        rows=tuple(recs),
    )
    return [heat, table]


#: (key, table header, format) of the progress measures shown per checkpoint.
PROGRESS_COLUMNS = (
    ("train_loss", "train loss", ".3g"), ("test_loss", "held-out loss", ".3g"),
    ("restricted_loss", "restricted loss", ".3g"), ("excluded_loss", "excluded loss", ".3g"),
    ("train_acc", "train acc", ".3f"), ("test_acc", "held-out acc", ".3f"),
    ("gini_embed", "Gini W_E", ".3f"), ("gini_neuron_logit", "Gini W_L", ".3f"),
    ("sum_sq_weights", "sum sq. weights", ".4g"), ("key_power_share", "key power share", ".3f"),
)


def progress_plots(series: Any, *, threshold: float | None = None) -> list[LinePlot]:
    """Losses over training (full, restricted, excluded; Nanda et al. 2023) and Gini / norm.

    ``threshold``: a loss level drawn as a reference line (the ``restricted_loss_lead`` claim).
    """
    steps = series.steps
    curves = ("train_loss", "test_loss", "restricted_loss", "excluded_loss")
    styles = ("dotted", "line", "line", "dashed")
    plot = LinePlot(
        title=f"progress measures over training (keys {list(series.keys)})",
        x_labels=tuple(str(s) for s in steps), xlabel="step", ylabel="loss (nats)",
        series=tuple(Series(name=n.replace("_", " "), values=tuple(series.curve(n).tolist()),
                            style=s) for n, s in zip(curves, styles)),
        hlines=() if threshold is None else ((threshold, "threshold"),),
    )
    gini_plot = LinePlot(
        title="Fourier Gini and weight norm over training", x_labels=plot.x_labels, xlabel="step",
        ylabel="Gini / relative", series=(
            Series(name="Gini W_E", values=tuple(series.curve("gini_embed").tolist())),
            Series(name="Gini W_L", values=tuple(series.curve("gini_neuron_logit").tolist())),
            Series(name="sum sq. weights / max", style="dashed", values=tuple(
                (series.curve("sum_sq_weights") / series.curve("sum_sq_weights").max()).tolist())),
        ),
    )
    return [plot, gini_plot]


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
