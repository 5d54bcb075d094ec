"""A suite's similarity section: site x site heatmap, a second model, checkpoint drift.

The computing half of the ``[[similarity]]`` analysis (which captures the activations, the
suite model's through its context and every other checkpoint's as an executor task): the
similarity of every pair of sites (:func:`layer_similarity` with any registered measure),
optionally against a second model's sites, and the drift of each drift site over a checkpoint
series towards the final and the previous checkpoint (:func:`checkpoint_drift`), with the
training accuracies the checkpoints recorded.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from torch import Tensor

from ..report.blocks import Block, Text
from .measure import SimilarityConfig

__all__ = ["CheckpointReps", "SimilaritySection", "similarity_section"]


@dataclass(frozen=True, kw_only=True)
class CheckpointReps:
    """One checkpoint's activations on the suite's examples, with what its config recorded.

    Attributes:
        path: the checkpoint directory.
        acts: site name -> ``(example, d)`` activations.
        step: its training step (None when unrecorded); ``metrics``: its recorded metrics.
    """

    path: str
    acts: dict[str, Tensor]
    step: int | None = None
    metrics: Mapping[str, Any] | None = None


@dataclass(frozen=True, kw_only=True)
class SimilaritySection:
    """``data`` (``report.json`` numbers) and ``blocks`` of :func:`similarity_section`."""

    data: dict[str, Any]
    blocks: tuple[Block, ...]


def _accuracy_keys(metrics: list[Mapping[str, Any]]) -> list[str]:
    keys = [k for k in (metrics[0] if metrics else {}) if k.endswith("/acc")]
    return [k for k in keys if all(isinstance(m.get(k), (int, float)) for m in metrics)]


def _drift(
    series: Sequence[CheckpointReps], drift: Sequence[tuple[str, str]], idx: np.ndarray,
    patterns: Sequence[str], measure: str, config: SimilarityConfig,
) -> tuple[dict[str, Any], list[Block]]:
    """The drift numbers and blocks of a checkpoint series (last = final)."""
    from .blocks import drift_blocks
    from .layers import checkpoint_drift

    steps = [c.step for c in series]
    x_labels = tuple(str(s) if s is not None else Path(c.path).name for s, c in zip(steps, series))
    drifts = {name: checkpoint_drift([c.acts[name][idx] for c in series], config=config,
                                      labels=x_labels)
              for name, _ in drift}
    metrics = [dict(c.metrics or {}) for c in series]
    acc_keys = _accuracy_keys(metrics)
    blocks = drift_blocks(
        {label: drifts[name] for name, label in drift}, x_labels, measure=measure,
        metrics={k: [float(m[k]) for m in metrics] for k in acc_keys},
        xlabel="training step" if all(s is not None for s in steps) else "checkpoint",
        ylim=None if config.strategy.distance else (0.0, 1.02),
    )
    data = {"checkpoints": [Path(c.path).name for c in series], "patterns": list(patterns),
            "steps": steps, "sites": {n: d.to_columns() for n, d in drifts.items()},
            "metrics": metrics}
    return data, list(blocks)


def similarity_section(
    acts: Sequence[Tensor], names: Sequence[str], idx: np.ndarray, *, split: str,
    config: SimilarityConfig | None = None, other: CheckpointReps | None = None,
    other_name: str | None = None, series: Sequence[CheckpointReps] = (),
    drift: Sequence[tuple[str, str]] = (), patterns: Sequence[str] = (),
) -> SimilaritySection:
    """Site x site similarity over rows ``idx``, against ``other``, and drift over ``series``.

    Args:
        acts: the model's ``(example, d)`` activations, one per site.
        names: the site names (rows and columns of the heatmaps).
        idx: the compared rows (examples of ``split``).
        split: the split's name, for the report.
        config: the measure and its options (:class:`SimilarityConfig`; None: linear CKA).
        other: a second model's activations (by site name) for a between-model heatmap.
        other_name: how the report names the second model (its checkpoint as given).
        series: checkpoints in training order (the last is "final") for the drift curve.
        drift: ``(site name, label)`` of each drift site.
        patterns: the checkpoint patterns as given, for the report.
    """
    from .blocks import similarity_heatmap
    from .layers import layer_similarity

    config = config if config is not None else SimilarityConfig()
    mine = [a[idx] for a in acts]
    within = layer_similarity(mine, config=config, labels_a=list(names))
    what = f"{within.measure} over {within.n} examples (split {split!r})"
    blocks: list[Block] = [
        Text(text=f"Representational similarity of every pair of sites: {what}. "
                  + ("Lower is more similar (0 = equal up to rotation and scale)."
                     if config.strategy.distance else "Higher is more similar (1 = identical up to the measure's invariances).")),
        similarity_heatmap(within, f"site x site {within.measure}", "site", "site"),
    ]
    data: dict[str, Any] = {"measure": within.measure, "n": within.n, "split": split,
                            "sites": list(names), "matrix": within.values.tolist()}
    if other is not None:
        between = layer_similarity(mine, [other.acts[n][idx] for n in names],
                                   config=config, labels_a=list(names), labels_b=list(names))
        blocks.append(similarity_heatmap(
            between, f"{within.measure}: this model (rows) vs {Path(other.path).name} (columns)",
            "this model", "other"))
        data["compare"] = {"checkpoint": other_name, "matrix": between.values.tolist()}
    if series:
        data["drift"], drift_blocks = _drift(series, drift, idx, patterns, within.measure, config)
        blocks.extend(drift_blocks)
    return SimilaritySection(data=data, blocks=tuple(blocks))
