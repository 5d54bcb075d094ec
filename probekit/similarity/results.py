"""Typed results of the layer studies, with plain tabular export (no pandas dependency).

``to_records()`` gives one dict per row (``pandas.DataFrame(res.to_records())`` if pandas is
installed); ``to_columns()`` the same table as a dict of equal-length lists.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["CheckpointDrift", "LayerSimilarity", "PopulationSimilarity"]


@dataclass(frozen=True, kw_only=True)
class LayerSimilarity:
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


@dataclass(frozen=True, kw_only=True)
class CheckpointDrift:
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


@dataclass(frozen=True, kw_only=True)
class PopulationSimilarity:
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
