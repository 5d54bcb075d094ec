"""Mean-field manifold capacity of the classes of a label, with its shuffled-label control.

One manifold per class of ``labels`` (at most ``max_points`` points each,
:func:`~probekit.geometry.manifolds_from_labels`), analysed by the mean-field theory of Chung,
Lee & Sompolinsky (PRX 2018; Cohen et al., Nat. Commun. 2020) in
:func:`~probekit.geometry.manifold_capacity`: the capacity ``alpha = 1 / mean_M (1 / alpha_M)``
and each manifold's anchor radius ``R_M`` and dimension ``D_M``. The control refits the same
points with permuted labels (a permutation null of "the classes are no more separable than
random groups of the same sizes"), one executor task per permutation.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Float

from .capacity import ManifoldCapacityResult, manifold_capacity, manifolds_from_labels

__all__ = ["LabelManifolds", "label_capacity", "label_capacity_cached", "shuffled_label_capacities"]


@dataclass(frozen=True, kw_only=True)
class LabelManifolds:
    """One MFT run (an executor task): activations, one label per row, and the options.

    Attributes:
        acts: ``(n, d)`` activations.
        labels: ``(n,)`` class of each row (each class is one manifold).
        max_points: points per class (subsampled with ``seed``; Chou et al. use 50).
        n_t: Gaussian samples per manifold.
        kappa: the margin.
        n_reps: random restarts per ``K`` of the common-centre-subspace fit (reference: 10).
        seed: the point subsample, the Gaussian samples and the restarts.
    """

    acts: Float[torch.Tensor, "n d"]
    labels: np.ndarray
    max_points: int | None = 50
    n_t: int = 200
    kappa: float = 0.0
    n_reps: int = 10
    seed: int = 0


def label_capacity(task: LabelManifolds) -> ManifoldCapacityResult:
    """:func:`~probekit.geometry.manifold_capacity` of the label manifolds of ``task.acts``."""
    manifolds, _ = manifolds_from_labels(task.acts, task.labels, max_points=task.max_points,
                                         seed=task.seed)
    return manifold_capacity(manifolds, kappa=task.kappa, n_t=task.n_t, n_reps=task.n_reps,
                             seed=task.seed)


_RECENT: dict[str, ManifoldCapacityResult] = {}


def label_capacity_cached(task: LabelManifolds) -> ManifoldCapacityResult:
    """:func:`label_capacity`, reusing the result for the same activations, labels and options.

    A diagnosis asks for the anchor radius and the anchor dimension of the same site on one
    checkpoint: both come from one MFT run. The last 4 inputs are kept in this process, keyed
    by a sha256 of the activations' bytes, the labels and the options (a pure cache: the same
    inputs give the same result).
    """
    h = hashlib.sha256(np.ascontiguousarray(task.acts.numpy()).tobytes())
    h.update(repr((task.acts.shape, [str(v) for v in task.labels], task.max_points, task.n_t,
                   task.kappa, task.n_reps, task.seed)).encode())
    key = h.hexdigest()
    if key not in _RECENT:
        if len(_RECENT) >= 4:
            _RECENT.pop(next(iter(_RECENT)))
        _RECENT[key] = label_capacity(task)
    return _RECENT[key]


def shuffled_label_capacities(
    task: LabelManifolds, *, n_shuffles: int, executor: Any = None
) -> Float[np.ndarray, " shuffle"]:
    """Capacities of ``n_shuffles`` label-permuted refits (a permutation null).

    Permutation ``i`` is drawn from ``default_rng(task.seed)`` in turn and refit with seed
    ``task.seed + 1 + i``; each refit is one task of ``executor``
    (:func:`probekit.executor.get_executor`).
    """
    from dataclasses import replace

    from ..executor import get_executor
    from ..stats.permutation import check_n_permutations

    check_n_permutations(n_shuffles, name="n_shuffles")
    rng = np.random.default_rng(task.seed)
    tasks = [replace(task, labels=rng.permutation(task.labels), seed=task.seed + 1 + i)
             for i in range(n_shuffles)]
    results = get_executor(executor).map(label_capacity, tasks, desc="shuffled-label capacities")
    return np.array([r.capacity for r in results])
