"""Report blocks of the similarity results: the one place their heatmaps, curves and tables are built.

``[[similarity]]`` (``suites/analyses/similarity.py``) calls these with the suite's titles,
sites and checkpoint metrics; the results' ``_blocks()`` call them with what a result alone
knows, so a notebook cell shows the same heatmap or drift curve as the report.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from ..report.blocks import Block, Column, Heatmap, LinePlot, Series, Table
from ..sites import site_label

if TYPE_CHECKING:
    from .results import CheckpointDrift, LayerSimilarity

__all__ = ["SITE_COLORS", "drift_blocks", "matrix_table", "similarity_heatmap"]

#: A drift site's colour (its "to final" and "to previous" lines share it).
SITE_COLORS = ("tab:red", "tab:blue", "tab:green", "tab:purple", "tab:orange", "tab:cyan",
               "tab:brown")


def similarity_heatmap(
    res: LayerSimilarity, title: str, ylabel: str = "site", xlabel: str = "site",
) -> Heatmap:
    """The layer x layer matrix; distances (Procrustes) on ``[0, pi/2]`` with a reversed map."""
    distance = "distance" in res.measure
    return Heatmap(
        title=title,
        values=tuple(tuple(float(v) for v in row) for row in res.values),
        row_labels=tuple(site_label(s) for s in res.labels_a),
        col_labels=tuple(site_label(s) for s in res.labels_b),
        xlabel=xlabel, ylabel=ylabel, colorbar=res.measure, vmin=0.0,
        vmax=math.pi / 2 if distance else 1.0, cmap="viridis_r" if distance else "viridis",
    )


def matrix_table(
    row_labels: Sequence[str], col_labels: Sequence[str], values: Any, *, title: str = "",
) -> Table:
    """A matrix as a table: one row per row label, one column per column label (3 decimals)."""
    cols = (Column(key="row", header="", fmt="", align="left"),
            *(Column(key=f"c{j}", header=site_label(c)) for j, c in enumerate(col_labels)))
    rows = tuple({"row": site_label(r), **{f"c{j}": float(values[i][j]) for j in range(len(col_labels))}}
                 for i, r in enumerate(row_labels))
    return Table(title=title, columns=cols, rows=rows)


def drift_blocks(
    drifts: Mapping[str, CheckpointDrift],
    x_labels: Sequence[str],
    *,
    measure: str,
    metrics: Mapping[str, Sequence[float]] | None = None,
    xlabel: str = "checkpoint",
    ylim: tuple[float, float] | None = (0.0, 1.02),
) -> list[Block]:
    """Drift curve (each site to the final and to the previous checkpoint) and its table.

    Args:
        drifts: site label -> its drift over the checkpoints.
        x_labels: a label per checkpoint (training steps or names).
        measure: the similarity measure (plot title and axis).
        metrics: optional per-checkpoint accuracies (e.g. ``"test_id/acc"``), dotted lines.
        xlabel: x axis name (``"training step"`` when the labels are steps).
        ylim: the y range (None for distances, which are not bounded by 1).
    """
    metrics = dict(metrics or {})
    lines: list[Series] = []
    for i, (lab, d) in enumerate(drifts.items()):  # a site's two lines share its colour
        color = SITE_COLORS[i % len(SITE_COLORS)]
        lines.append(Series(name=f"{lab} to final", values=tuple(map(float, d.to_final)),
                            color=color))
        lines.append(Series(name=f"{lab} to previous", color=color,
                            values=tuple(map(float, d.to_previous)), style="dashed"))
    for k, vals in metrics.items():
        lines.append(Series(name=f"{k} (checkpoint)", values=tuple(float(v) for v in vals),
                            style="dotted", color="black" if "test" in k else "grey"))
    plot = LinePlot(
        title=f"drift over {len(x_labels)} checkpoints ({measure})",
        x_labels=tuple(x_labels), series=tuple(lines), xlabel=xlabel,
        ylabel=measure if not metrics else f"{measure} / accuracy", ylim=ylim,
    )
    cols = [Column(key="checkpoint", header="checkpoint", fmt="", align="left")]
    for lab in drifts:
        cols += [Column(key=f"{lab}/final", header=f"{lab} to final"),
                 Column(key=f"{lab}/previous", header=f"{lab} to previous")]
    cols += [Column(key=k, header=k) for k in metrics]
    rows = []
    for t, x in enumerate(x_labels):
        row: dict[str, Any] = {"checkpoint": x}
        for lab, d in drifts.items():
            row[f"{lab}/final"] = float(d.to_final[t])
            row[f"{lab}/previous"] = float(d.to_previous[t])
        row.update({k: float(v[t]) for k, v in metrics.items()})
        rows.append(row)
    return [plot, Table(title="drift per checkpoint", columns=tuple(cols), rows=tuple(rows))]
