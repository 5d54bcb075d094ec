"""Figures for similarity results as PNG bytes: the report's own blocks and plot code.

Thin wrappers kept for callers that want a PNG: the heatmap and the drift curve are the blocks
of :mod:`probekit.similarity.blocks` (what ``[[similarity]]`` and a result's notebook display
show), drawn by :mod:`probekit.report.plots`; there is no second plotting implementation.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from .results import CheckpointDrift, LayerSimilarity

__all__ = ["drift_curve", "layer_heatmap"]


def layer_heatmap(res: LayerSimilarity, *, title: str | None = None) -> bytes:
    """Layer x layer heatmap (Procrustes: distance on [0, pi/2], reversed map) as PNG bytes."""
    from ..report import plots
    from .blocks import similarity_heatmap

    return plots.heatmap(similarity_heatmap(res, title or f"{res.measure} (n={res.n})").to_dict())


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
        steps: x labels (training steps); default the checkpoints' own labels.
        accuracy: optional per-checkpoint curves, e.g. ``{"test_id acc": [...]}`` (dotted).
        title: figure title (default: the report's).

    Returns:
        The PNG of the report's drift plot.
    """
    from ..report import plots
    from .blocks import drift_blocks

    first = drifts[0][1]
    x_labels = [str(s) for s in steps] if steps is not None else list(first.labels)
    plot = drift_blocks(
        dict(drifts), x_labels, measure=first.measure,
        metrics={k: [float(v) for v in vals] for k, vals in (accuracy or {}).items()},
        xlabel="training step" if steps is not None else "checkpoint",
        ylim=None if "distance" in first.measure else (0.0, 1.02),
    )[0]
    if title is not None:
        plot = dataclasses.replace(plot, title=title)
    return plots.line_plot(plot.to_dict())
