"""``manifold_radius`` / ``manifold_dimension``: MFT anchor radius and dimension of the class manifolds.

The mean-field theory of manifold capacity (Chung, Lee & Sompolinsky, PRX 2018; Cohen, Chung,
Lee & Sompolinsky, Nat. Commun. 2020) gives, beside the capacity ``alpha_M`` (the
``manifold_capacity`` kind), each manifold's anchor radius ``R_M = sqrt(mean_t |a - mean_t a|^2)``
(``a``: the axis part of the anchor point ``s~(t)``, in units of the centre norm) and anchor
dimension ``D_M = D (mean_t cos(t_axes, a))^2``; ``alpha_M`` falls as ``R_M`` and ``D_M`` grow
(``alpha_M ~ (1 + R_M^{-2}) / D_M`` for large ``D_M``). Both come from the same
:func:`probekit.geometry.manifold_capacity` run, one manifold per class of ``label``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class ManifoldGeometrySpec:
    """Keys of a ``manifold_radius`` / ``manifold_dimension`` claim (as ``manifold_capacity``).

    ``site``: activations at ``[capture] positions``; ``label``: the column whose classes are
    the manifolds (default ``[data] label``; >= 2 classes); ``max_points``: points per class
    (Chou et al. use 50); ``n_t``: Gaussian samples per manifold; ``kappa``: the margin;
    ``n_reps``: random restarts per ``K`` of the common-centre-subspace fit (reference: 10;
    that fit is nearly all of the run time with many classes, so lower it for a population);
    ``seed``: the point subsample, the Gaussian samples and the restarts.
    """

    site: str
    label: str | None = None
    split: str = "train"
    max_points: int | None = 50
    n_t: int = 200
    kappa: float = 0.0
    n_reps: int = 10
    seed: int = 0


@dataclass(frozen=True, kw_only=True)
class ManifoldTask:
    """One MFT run (an executor task): activations, labels and options."""

    acts: Any
    labels: Any
    max_points: int | None
    n_t: int
    kappa: float
    n_reps: int
    seed: int


def mft_of(task: ManifoldTask) -> Any:
    """:func:`probekit.geometry.manifold_capacity` of the label manifolds of ``task.acts``."""
    from ...geometry import manifold_capacity, manifolds_from_labels

    manifolds, _ = manifolds_from_labels(task.acts, task.labels, max_points=task.max_points,
                                         seed=task.seed)
    return manifold_capacity(manifolds, kappa=task.kappa, n_t=task.n_t, n_reps=task.n_reps,
                             seed=task.seed)


_RECENT: dict[str, Any] = {}  # key -> MFT result: radius and dimension of one site share a run


def _cached_mft(task: ManifoldTask) -> Any:
    """:func:`mft_of`, reusing the result for the same activations, labels and options.

    A diagnosis asks for ``manifold_radius`` and ``manifold_dimension`` of the same site on
    one checkpoint: both come from one MFT run (the last 4 inputs are kept, by content hash).
    """
    import hashlib

    import numpy as np

    h = hashlib.sha256(np.ascontiguousarray(task.acts.numpy()).tobytes())
    h.update(repr((task.acts.shape, [str(v) for v in task.labels], task.max_points, task.n_t,
                   task.kappa, task.n_reps, task.seed)).encode())
    key = h.hexdigest()
    if key not in _RECENT:
        if len(_RECENT) >= 4:
            _RECENT.pop(next(iter(_RECENT)))
        _RECENT[key] = mft_of(task)
    return _RECENT[key]


def _measure(spec: ManifoldGeometrySpec, ctx: Any, which: str) -> Measurement:
    import numpy as np

    from ...errors import NotApplicableError
    from ...sites import Site

    site = Site.parse(spec.site)
    idx = ctx.examples.split(spec.split)
    X = ctx.activations([site])[site].double().cpu()[idx]
    label = spec.label or ctx.suite.data.label
    y = np.asarray(ctx.examples.column(label))[idx]
    n_classes = np.unique(y).size
    if n_classes < 2:
        raise NotApplicableError(f"manifold_{which}: {label!r} has {n_classes} class on "
                                 f"{spec.split!r}; the class manifolds need >= 2 classes")
    base = dict(max_points=spec.max_points, n_t=spec.n_t, kappa=spec.kappa, n_reps=spec.n_reps)
    res = _cached_mft(ManifoldTask(acts=X, labels=y, seed=spec.seed, **base))
    per = (res.radius_m if which == "radius" else res.dimension_m).double().numpy()
    symbol = "R_M" if which == "radius" else "D_M"
    return Measurement(
        metric=f"manifold {which}", values=per, unit="class manifolds",
        method=f"mean-field anchor {which} {symbol} (kappa={spec.kappa:g}, n_t={spec.n_t}) "
        f"averaged over {per.size} class manifolds of {label!r} at {site.key} ({spec.split}, "
        f"<= {spec.max_points} points each; Chung et al. 2018)",
        details={"capacity": float(res.capacity), "radius": float(res.radius),
                 "dimension": float(res.dimension), "n_common": int(res.n_common),
                 "n_unconverged": int(res.n_unconverged)},
    )


@register_measurement("manifold_radius", spec=ManifoldGeometrySpec)
def manifold_radius(spec: ManifoldGeometrySpec, ctx: Any) -> Measurement:
    """Mean anchor radius ``R = mean_M R_M`` of the class manifolds (bootstrap over classes).

    ``R_M`` is relative to the manifold's centre norm: smaller = tighter, more separable classes.
    """
    return _measure(spec, ctx, "radius")


@register_measurement("manifold_dimension", spec=ManifoldGeometrySpec)
def manifold_dimension(spec: ManifoldGeometrySpec, ctx: Any) -> Measurement:
    """Mean anchor dimension ``D = mean_M D_M`` of the class manifolds (bootstrap over classes).

    ``D_M`` counts the directions in which a manifold's anchor points spread (<= its points).
    """
    return _measure(spec, ctx, "dimension")
