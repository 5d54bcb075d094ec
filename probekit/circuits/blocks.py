"""Report blocks of the circuit results: the one place their heatmaps, tables and curves are built.

``[[patching]]`` / ``probekit patch`` (``suites/analyses/patching.py``) and the
``circuit_faithfulness`` claim kind call these with their extras (token labels, the method);
the results' ``_blocks()`` call them with what the result alone knows, so a notebook cell shows
the same heatmap, table and curve as the report.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from ..report.blocks import Column, Heatmap, LinePlot, Series, Table

if TYPE_CHECKING:
    from .eap import EdgeScores, FaithfulnessCurve
    from .patch_grid import PatchingResult

__all__ = [
    "PatchingView", "dla_blocks", "dla_records", "edge_table", "faithfulness_plot",
    "largest_effect_table", "logit_lens_blocks", "logit_lens_records", "patching_view",
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
