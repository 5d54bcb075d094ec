"""Held-out accuracy of one logistic probe against its controls (the probe claims and markers).

* :func:`probe_correct`: per test example, whether a :class:`~probekit.probes.LogisticProbe`
  fit on the training rows predicts its label (Alain & Bengio 2016: linear probes);
* :func:`shuffled_label_accuracies`: the test accuracy of probes refit on permuted training
  labels, a permutation null for the probe's accuracy (one executor task per refit);
* :func:`selectivity`: accuracy minus the accuracy on a control task, Hewitt & Liang (EMNLP
  2019, "Designing and Interpreting Probes with Control Tasks"): the control relabels every
  example by a random but consistent map from its *type* to a label drawn from the real label
  distribution (:func:`~probekit.probes.control.control_labels`); a probe that reads the
  property has high selectivity, one that memorises types a high control accuracy.
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from jaxtyping import Float, Int

from ..errors import ConfigError

__all__ = ["Selectivity", "ShuffledFit", "probe_correct", "selectivity", "shuffled_accuracy",
           "shuffled_label_accuracies"]


def _fit_predict(X_train: np.ndarray, y_train: np.ndarray, X_test: np.ndarray, *, C: float,
                 max_iter: int) -> np.ndarray:
    from sklearn.exceptions import ConvergenceWarning

    from .logistic import LogisticProbe

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return LogisticProbe(C=C, max_iter=max_iter).fit(X_train, y_train).predict(X_test)


def probe_correct(
    X: Float[np.ndarray, "n d"], y: np.ndarray, train: Int[np.ndarray, " n_train"],
    test: Int[np.ndarray, " n_test"], *, C: float = 1.0, max_iter: int = 200,
) -> Float[np.ndarray, " n_test"]:
    """1.0 where a logistic probe (inverse regularisation ``C``) fit on ``train`` is right on ``test``."""
    pred = _fit_predict(X[train], y[train], X[test], C=C, max_iter=max_iter)
    return (pred == y[test]).astype(np.float64)


@dataclass(frozen=True, kw_only=True)
class ShuffledFit:
    """One control refit: the probe trained on shuffled training labels (picklable task)."""

    X_train: np.ndarray
    y_train: np.ndarray
    X_test: np.ndarray
    y_test: np.ndarray
    C: float
    max_iter: int
    seed: int


def shuffled_accuracy(task: ShuffledFit) -> float:
    """Test accuracy of a probe fit on a seeded permutation of the training labels."""
    y = np.random.default_rng(task.seed).permutation(task.y_train)
    pred = _fit_predict(task.X_train, y, task.X_test, C=task.C, max_iter=task.max_iter)
    return float(np.mean(pred == task.y_test))


def shuffled_label_accuracies(
    X: Float[np.ndarray, "n d"], y: np.ndarray, train: Int[np.ndarray, " n_train"],
    test: Int[np.ndarray, " n_test"], *, seeds: Sequence[int], C: float = 1.0,
    max_iter: int = 200, executor: Any = None,
) -> Float[np.ndarray, " refit"]:
    """Test accuracies of probes refit on training labels permuted with each of ``seeds``.

    Each refit is one task of ``executor`` (:func:`probekit.executor.get_executor`).
    """
    from ..executor import get_executor

    tasks = [ShuffledFit(X_train=X[train], y_train=y[train], X_test=X[test], y_test=y[test], C=C,
                         max_iter=max_iter, seed=s) for s in seeds]
    return np.asarray(get_executor(executor).map(shuffled_accuracy, tasks,
                                                 desc="shuffled-label probes"))


@dataclass(frozen=True, kw_only=True)
class Selectivity:
    """Per test example: task-probe correctness, control correctness (mean over maps), types."""

    task: np.ndarray
    control: np.ndarray
    n_types: int


def selectivity(
    X: Float[np.ndarray, "n d"], y: np.ndarray, types: Sequence[Hashable],
    train: Int[np.ndarray, " n_train"], test: Int[np.ndarray, " n_test"], *, C: float = 1.0,
    max_iter: int = 200, n_control_maps: int = 1, seed: int = 0,
) -> Selectivity:
    """Task and control-task correctness of the same probe family on the same rows.

    The control map (type -> label) is drawn once over the train and test rows together (a type
    keeps its control label across splits), with seeds ``seed, seed + 1, ...`` for
    ``n_control_maps`` maps; the control correctness is the mean over maps. Types are numbered
    by first appearance, so the maps do not depend on hashing.
    """
    from .control import control_labels

    if n_control_maps < 1:
        raise ConfigError(f"n_control_maps = {n_control_maps}; expected >= 1")
    rows = np.union1d(train, test)
    ids: dict[Any, int] = {}  # type -> id by first appearance (deterministic across processes)
    kinds = np.asarray([ids.setdefault(t, len(ids)) for t in types], dtype=np.int64)
    n_types = int(np.unique(kinds[rows]).size)
    if n_types < 2:
        raise ConfigError("the types give one type on these examples, so the control task is "
                          "constant; use types = \"input\" or a column")
    task = probe_correct(X, y, train, test, C=C, max_iter=max_iter)
    controls = []
    for j in range(n_control_maps):
        ctrl = y.copy()
        ctrl[rows] = control_labels(kinds[rows], task_labels=y[rows], random_state=seed + j)
        controls.append(probe_correct(X, ctrl, train, test, C=C, max_iter=max_iter))
    return Selectivity(task=task, control=np.mean(controls, axis=0), n_types=n_types)
