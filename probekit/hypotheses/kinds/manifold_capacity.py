"""``measure = "manifold_capacity"``: mean-field capacity of the label manifolds at a site (Chung et al. 2018)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class CapacitySpec:
    """Keys of a ``manifold_capacity`` claim.

    ``site``: activations at ``[capture] positions``; ``label``: the column whose classes are
    the manifolds (default ``[data] label``); ``max_points``: points per class (Chou et al.
    use 50); ``n_t``: Gaussian samples per manifold; ``n_shuffles``: label-shuffled refits for
    the control.
    """

    site: str
    label: str | None = None
    split: str = "train"
    max_points: int | None = 50
    n_t: int = 200
    kappa: float = 0.0
    n_shuffles: int = 20
    seed: int = 0


@dataclass(frozen=True, kw_only=True)
class CapacityTask:
    """One capacity computation (an executor task): activations, labels and options."""

    acts: Any
    labels: Any
    max_points: int | None
    n_t: int
    kappa: float
    seed: int


def capacity_of(task: CapacityTask) -> Any:
    """:func:`probekit.geometry.manifold_capacity` of the label manifolds of ``task.acts``."""
    from ...geometry import manifold_capacity, manifolds_from_labels

    manifolds, _ = manifolds_from_labels(task.acts, task.labels, max_points=task.max_points,
                                         seed=task.seed)
    return manifold_capacity(manifolds, kappa=task.kappa, n_t=task.n_t, seed=task.seed)


@register_measurement("manifold_capacity", spec=CapacitySpec, control=True)
def manifold_capacity(spec: CapacitySpec, ctx: Any, *, control: bool = False) -> Measurement:
    """Capacity ``alpha = 1 / mean_M(1 / alpha_M)`` of the class manifolds.

    The CI bootstraps the manifolds (classes) with their per-manifold capacities held fixed
    (they are computed once, jointly); control: capacities of label-shuffled manifolds
    (``n_shuffles`` refits through the executor), a permutation null.
    """
    import numpy as np

    from ...sites import Site
    from ...stats.bootstrap import bootstrap_indices

    site = Site.parse(spec.site)
    idx = ctx.examples.split(spec.split)
    X = ctx.activations([site])[site].double().cpu()[idx]
    y = np.asarray(ctx.examples.column(spec.label or ctx.suite.data.label))[idx]
    base = dict(max_points=spec.max_points, n_t=spec.n_t, kappa=spec.kappa)
    res = capacity_of(CapacityTask(acts=X, labels=y, seed=spec.seed, **base))
    inv = 1.0 / res.capacity_m.double().numpy()
    boot = bootstrap_indices(inv.size, ctx.stats.n_bootstrap, ctx.stats.seed)
    null = None
    if control:
        rng = np.random.default_rng(spec.seed)
        tasks = [CapacityTask(acts=X, labels=rng.permutation(y), seed=spec.seed + 1 + i, **base)
                 for i in range(spec.n_shuffles)]
        null = np.array([r.capacity for r in ctx.executor.map(capacity_of, tasks,
                                                              desc="shuffled-label capacities")])
    return Measurement(
        metric="manifold capacity", estimate=float(res.capacity),
        resamples=1.0 / inv[boot].mean(1), null=null, n=int(inv.size), unit="class manifolds",
        method=f"mean-field capacity (kappa={spec.kappa:g}) of {inv.size} class manifolds at "
        f"{site.key} ({spec.split}, <= {spec.max_points} points each)",
        details={"radius": float(res.radius), "dimension": float(res.dimension),
                 "n_unconverged": int(res.n_unconverged)},
    )
