"""Figures for similarity results as PNG bytes (embedded in reports; no CDN, STYLE/pitfalls)."""

from __future__ import annotations

import io
from collections.abc import Sequence
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from .results import CheckpointDrift, LayerSimilarity  # noqa: E402

__all__ = ["drift_curve", "layer_heatmap"]


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    return buf.getvalue()


def _short(label: str) -> str:
    return label.replace("blocks.", "").replace(".hook_", " ").replace("hook_", "")


def layer_heatmap(res: LayerSimilarity, *, title: str | None = None) -> bytes:
    """Layer x layer heatmap with the value in each cell (Procrustes: distance, reversed map)."""
    M = res.values
    fig, ax = plt.subplots(figsize=(0.5 * M.shape[1] + 3, 0.45 * M.shape[0] + 2))
    distance = "distance" in res.measure
    im = ax.imshow(M, cmap="viridis_r" if distance else "viridis", vmin=0.0,
                   vmax=float(np.pi / 2) if distance else 1.0)
    fig.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label=res.measure)
    if M.size <= 400:
        for (i, j), v in np.ndenumerate(M):
            ax.text(j, i, f"{v:.2f}", ha="center", va="center", fontsize=7,
                    color="white" if (v > 0.5) == distance else "black")
    ax.set_xticks(range(M.shape[1]), [_short(s) for s in res.labels_b], rotation=60, ha="right", fontsize=7)
    ax.set_yticks(range(M.shape[0]), [_short(s) for s in res.labels_a], fontsize=7)
    ax.set_title(title or f"{res.measure} (n={res.n})", fontsize=9)
    return _png(fig)


def drift_curve(
    drifts: Sequence[tuple[str, CheckpointDrift]],
    *,
    steps: Sequence[int | float] | None = None,
    accuracy: dict[str, Sequence[int | float]] | None = None,
    title: str | None = None,
) -> bytes:
    """Similarity to the final and to the previous checkpoint per site, optional accuracy curves.

    Args:
        drifts: ``(site label, CheckpointDrift)`` pairs over the same checkpoints.
        steps: x positions (training steps); default the checkpoint index.
        accuracy: optional curves on a second axis, e.g. ``{"test_id acc": [...]}``.
        title: figure title.
    """
    first = drifts[0][1]
    x = np.asarray(steps if steps is not None else np.arange(len(first.labels)), dtype=float)
    fig, ax = plt.subplots(figsize=(7, 3.8))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, (label, d) in enumerate(drifts):
        c = colors[k % len(colors)]
        ax.plot(x, d.to_final, "o-", color=c, label=f"{_short(label)}: to final")
        ax.plot(x, d.to_previous, "s--", color=c, alpha=0.6, label=f"{_short(label)}: to previous")
    ax.set_xlabel("training step" if steps is not None else "checkpoint")
    ax.set_ylabel(first.measure)
    if "distance" not in first.measure:
        ax.set_ylim(min(0.0, float(np.nanmin(first.to_final))), 1.02)
    ax.grid(alpha=0.3)
    handles, labels = ax.get_legend_handles_labels()
    if accuracy:
        ax2 = ax.twinx()
        for name, vals in accuracy.items():
            ax2.plot(x, vals, ":", color="black", alpha=0.7, label=name)
        ax2.set_ylabel("accuracy")
        ax2.set_ylim(0, 1.02)
        h2, l2 = ax2.get_legend_handles_labels()
        handles, labels = handles + h2, labels + l2
    ax.legend(handles, labels, fontsize=7, loc="lower right")
    ax.set_title(title or f"representational drift ({first.measure}, n={first.n})", fontsize=9)
    return _png(fig)
