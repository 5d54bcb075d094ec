"""Typed results of the layer studies, with plain tabular export (no pandas dependency).

``to_records()`` gives one dict per row, ``to_frame()`` the same as a pandas DataFrame (the
``notebook`` extra); ``to_columns()`` the same table as a dict of equal-length lists. In a
notebook a result shows the report's heatmap or drift curve (:mod:`.blocks`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..report.blocks import Block
from ..report.notebook import NotebookMixin

__all__ = ["CheckpointDrift", "LayerSimilarity", "PopulationSimilarity"]


@dataclass(frozen=True, kw_only=True, repr=False)
class LayerSimilarity(NotebookMixin):
    """A layer x layer similarity matrix.

    Attributes:
        values: ``(layers_a, layers_b)`` similarities (Procrustes: distances, 0 = same shape).
        labels_a: row labels (layer indices or site names).
        labels_b: column labels.
        measure: what ``values`` holds, e.g. ``"linear CKA"``.
        n: number of stimuli.
    """

    values: np.ndarray
    labels_a: tuple[str, ...]
    labels_b: tuple[str, ...]
    measure: str
    n: int

    def to_records(self) -> list[dict[str, Any]]:
        """One ``{"layer_a", "layer_b", "value"}`` dict per cell (pandas: ``DataFrame(records)``)."""
        return [
            {"layer_a": a, "layer_b": b, "value": float(self.values[i, j])}
            for i, a in enumerate(self.labels_a)
            for j, b in enumerate(self.labels_b)
        ]

    def to_columns(self) -> dict[str, list[Any]]:
        """The same table as a dict of equal-length lists."""
        recs = self.to_records()
        return {k: [r[k] for r in recs] for k in ("layer_a", "layer_b", "value")}

    def _blocks(self) -> tuple[Block, ...]:
        from .blocks import matrix_table, similarity_heatmap

        return (similarity_heatmap(self, f"layer x layer {self.measure} (n={self.n})"),
                matrix_table(self.labels_a, self.labels_b, self.values, title=self.measure))

    def _summary(self) -> str:
        return f"{self.measure}, {len(self.labels_a)} x {len(self.labels_b)} layers, n={self.n}"


@dataclass(frozen=True, kw_only=True, repr=False)
class CheckpointDrift(NotebookMixin):
    """Similarity of each checkpoint's representation to the final and to the previous one.

    Attributes:
        labels: checkpoint labels in order (e.g. training steps).
        to_final: ``(checkpoints,)``; the last entry compares the final checkpoint with itself.
        to_previous: ``(checkpoints,)``; NaN for the first checkpoint.
        measure: what the values are.
        n: number of stimuli.
    """

    labels: tuple[str, ...]
    to_final: np.ndarray
    to_previous: np.ndarray
    measure: str
    n: int

    def to_records(self) -> list[dict[str, Any]]:
        """One ``{"checkpoint", "to_final", "to_previous"}`` dict per checkpoint."""
        return [
            {"checkpoint": c, "to_final": float(f), "to_previous": float(p)}
            for c, f, p in zip(self.labels, self.to_final, self.to_previous)
        ]

    def to_columns(self) -> dict[str, list[Any]]:
        """The same table as a dict of equal-length lists."""
        return {
            "checkpoint": list(self.labels),
            "to_final": [float(v) for v in self.to_final],
            "to_previous": [float(v) for v in self.to_previous],
        }

    def _blocks(self) -> tuple[Block, ...]:
        from .blocks import drift_blocks

        bounded = "distance" not in self.measure
        return tuple(drift_blocks({"representation": self}, self.labels, measure=self.measure,
                                  ylim=(0.0, 1.02) if bounded else None))

    def _summary(self) -> str:
        return (f"{self.measure}, {len(self.labels)} checkpoints, n={self.n}; first to final "
                f"{float(self.to_final[0]):.3f}")


@dataclass(frozen=True, kw_only=True, repr=False)
class PopulationSimilarity(NotebookMixin):
    """Layer x layer similarity between every pair of models in a population (e.g. seeds).

    Attributes:
        values: ``(pairs, layers, layers)``: ``values[p, i, j]`` compares layer ``i`` of model
            ``pairs[p][0]`` with layer ``j`` of model ``pairs[p][1]``.
        mean: ``(layers, layers)`` mean over model pairs.
        std: ``(layers, layers)`` sample standard deviation over model pairs (NaN for one pair).
        pairs: the ``(a, b)`` model indices, ``a < b``.
        labels: layer labels.
        measure: what the values are.
        n: number of stimuli.
    """

    values: np.ndarray
    mean: np.ndarray
    std: np.ndarray
    pairs: tuple[tuple[int, int], ...]
    labels: tuple[str, ...]
    measure: str
    n: int

    def to_records(self) -> list[dict[str, Any]]:
        """One ``{"layer_a", "layer_b", "mean", "std", "min", "max", "n_pairs"}`` dict per cell."""
        lo, hi = self.values.min(0), self.values.max(0)
        return [
            {
                "layer_a": a, "layer_b": b, "mean": float(self.mean[i, j]), "std": float(self.std[i, j]),
                "min": float(lo[i, j]), "max": float(hi[i, j]), "n_pairs": len(self.pairs),
            }
            for i, a in enumerate(self.labels)
            for j, b in enumerate(self.labels)
        ]

    def to_columns(self) -> dict[str, list[Any]]:
        """The same table as a dict of equal-length lists."""
        recs = self.to_records()
        return {k: [r[k] for r in recs] for k in recs[0]}

    def _blocks(self) -> tuple[Block, ...]:
        from .blocks import matrix_table, similarity_heatmap

        mean = LayerSimilarity(values=self.mean, labels_a=self.labels, labels_b=self.labels,
                               measure=self.measure, n=self.n)
        title = f"layer x layer {self.measure}, mean over {len(self.pairs)} model pairs"
        return (similarity_heatmap(mean, title, "layer (model a)", "layer (model b)"),
                matrix_table(self.labels, self.labels, self.mean, title=f"mean {self.measure}"),
                matrix_table(self.labels, self.labels, self.std,
                             title=f"std of {self.measure} over model pairs"))

    def _summary(self) -> str:
        diag = float(np.mean(np.diag(self.mean)))
        return (f"{self.measure}, {len(self.pairs)} model pairs x {len(self.labels)} layers, "
                f"n={self.n}; mean same-layer {diag:.3f}")
