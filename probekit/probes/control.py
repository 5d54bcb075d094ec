"""Control tasks and selectivity (Hewitt & Liang 2019).

"Designing and Interpreting Probes with Control Tasks", EMNLP 2019.

A control task keeps the inputs and re-labels them by a random but *consistent* map from word
type to label: every occurrence of a type gets the same control label, and the labels are drawn
from the empirical label distribution of the real task. A probe that reaches high control
accuracy is memorising types, not reading the property; ``selectivity = acc(task) - acc(control)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from torch import Tensor

from ..report.blocks import Block
from ..report.notebook import NotebookMixin
from ._validation import IndexLike, check_n_labels
from .sweep import SweepConfig, SweepResult, sweep_layers

__all__ = ["SelectivityResult", "control_labels", "selectivity", "selectivity_sweep"]


def control_labels(
    types: Sequence | np.ndarray,
    n_classes: int | None = None,
    *,
    task_labels: Sequence | np.ndarray | None = None,
    random_state: int | np.random.Generator | None = 0,
) -> np.ndarray:
    """Per-example control labels from a random type -> label map.

    Args:
        types: ``(n,)`` word type (token string / id) of each example.
        n_classes: number of control classes; labels are ``0..n_classes-1`` drawn uniformly.
            Optional when ``task_labels`` is given.
        task_labels: the real task's ``(n,)`` labels; if given, control labels take values in
            the same label set with probabilities equal to their empirical frequencies.
        random_state: seed of the map.

    Returns:
        ``(n,)`` labels; ``types[i] == types[j]`` implies equal labels.
    """
    types = np.asarray(types)
    if types.ndim != 1:
        raise ValueError(f"types must be 1-D (one type per example), got shape {types.shape}")
    uniq, inv = np.unique(types, return_inverse=True)
    rng = np.random.default_rng(random_state)
    if task_labels is not None:
        task_labels = np.asarray(task_labels)
        check_n_labels(len(types), task_labels, what="task labels")
        values, counts = np.unique(task_labels, return_counts=True)
        if n_classes is not None and n_classes != len(values):
            raise ValueError(
                f"n_classes={n_classes} but task_labels has {len(values)} classes; "
                "omit n_classes to use the task's label set"
            )
        probs = counts / counts.sum()
    else:
        if n_classes is None or n_classes < 2:
            raise ValueError(
                f"n_classes must be an int >= 2 when task_labels is not given, got {n_classes}"
            )
        values, probs = np.arange(n_classes), np.full(n_classes, 1.0 / n_classes)
    per_type = rng.choice(len(values), size=len(uniq), p=probs)
    return values[per_type[inv]]


def selectivity(task_score: float | np.ndarray, control_score: float | np.ndarray):
    """``task - control`` (Hewitt & Liang 2019); works element-wise on per-layer arrays."""
    return np.asarray(task_score) - np.asarray(control_score)


@dataclass(frozen=True, kw_only=True, repr=False)
class SelectivityResult(NotebookMixin):
    """Task and control sweeps over the same rows, and per-row selectivity on test."""

    task: SweepResult
    control: SweepResult
    selectivity: np.ndarray

    def to_records(self) -> list[dict[str, Any]]:
        """The task sweep's rows (:meth:`SweepResult.to_records`) with control test and selectivity."""
        return [dict(r, control_test=float(c), selectivity=float(s))
                for r, c, s in zip(self.task.to_records(), self.control.test, self.selectivity)]

    def _blocks(self) -> tuple[Block, ...]:
        from .blocks import sweep_blocks

        return tuple(sweep_blocks(self.task, control_test=self.control.test.tolist(),
                                  selectivity=self.selectivity.tolist()))

    def _summary(self) -> str:
        i = self.task.best_row
        return (f"{len(self.task.layers)} rows; at the selected row task test "
                f"{self.task.test[i]:.3f}, control {self.control.test[i]:.3f}, selectivity "
                f"{self.selectivity[i]:+.3f}")

    @property
    def best_layer(self) -> int | None:
        """Layer chosen on the task's validation metric."""
        return self.task.best_layer


def selectivity_sweep(
    acts: Tensor | dict,
    labels: Sequence | np.ndarray,
    types: Sequence | np.ndarray,
    *,
    train_idx: IndexLike,
    test_idx: IndexLike,
    ood_idx: Mapping[str, IndexLike] | None = None,
    config: SweepConfig | None = None,
) -> SelectivityResult:
    """Run ``sweep_layers`` on the task labels and on control labels; selectivity per row.

    The control map is drawn with ``config.random_state`` from the task's label distribution;
    the same probe family, grid and splits are used for both. ``config`` is the
    :class:`~probekit.probes.sweep.SweepConfig` of both sweeps (default ``SweepConfig()``).
    """
    cfg = SweepConfig() if config is None else config
    ctrl = control_labels(types, task_labels=labels, random_state=cfg.random_state)
    kw = dict(train_idx=train_idx, test_idx=test_idx, ood_idx=ood_idx, config=cfg)
    task = sweep_layers(acts, labels, **kw)
    control = sweep_layers(acts, ctrl, **kw)
    return SelectivityResult(
        task=task, control=control, selectivity=selectivity(task.test, control.test)
    )
