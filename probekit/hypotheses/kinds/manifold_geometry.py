"""``manifold_radius`` / ``manifold_dimension``: MFT anchor radius and dimension of the class manifolds.

Mean-field theory (Chung, Lee & Sompolinsky 2018; Cohen et al. 2020): each class manifold's
anchor radius ``R_M`` and dimension ``D_M``, both from one
:func:`probekit.geometry.label_manifolds.label_capacity_cached` run.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Literal

from ...context import Context
from ...geometry.config import ManifoldConfig
from ...util.constraints import Ge
from ..keys import label_name, labels, site_rows
from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class ManifoldGeometrySpec(ManifoldConfig):
    """Keys of a ``manifold_radius`` / ``manifold_dimension`` claim (as ``manifold_capacity``).

    ``label``: >= 2 classes; ``n_reps``: restarts per ``K`` of the centre-subspace fit (10).
    """

    site: str
    n_reps: Annotated[int, Ge(1)] = 10


def _measure(spec: ManifoldGeometrySpec, ctx: Context, which: Literal["radius", "dimension"]) -> Measurement:
    import numpy as np

    from ...errors import NotApplicableError
    from ...geometry.label_manifolds import LabelManifolds, label_capacity_cached

    site, X = site_rows(ctx, spec.site, spec.split)
    label = label_name(ctx, spec.label)
    y = labels(ctx, spec.label)[ctx.examples.split(spec.split)]
    if np.unique(y).size < 2:
        raise NotApplicableError(f"manifold_{which}: {label!r} has {np.unique(y).size} class on "
                                 f"{spec.split!r}; the class manifolds need >= 2 classes")
    res = label_capacity_cached(LabelManifolds(
        acts=X, labels=y, max_points=spec.max_points, n_t=spec.n_t, kappa=spec.kappa,
        n_reps=spec.n_reps, seed=spec.seed))
    per = (res.radius_m if which == "radius" else res.dimension_m).double().numpy()
    return Measurement(
        metric=f"manifold {which}", values=per, unit="class manifolds",
        method=f"mean-field anchor {which} {'R_M' if which == 'radius' else 'D_M'} (kappa="
        f"{spec.kappa:g}, n_t={spec.n_t}) averaged over {per.size} class manifolds of {label!r} at "
        f"{site.key} ({spec.split}, <= {spec.max_points} points each; Chung et al. 2018)",
        details={"capacity": float(res.capacity), "radius": float(res.radius),
                 "dimension": float(res.dimension), "n_common": int(res.n_common),
                 "n_unconverged": int(res.n_unconverged)},
    )


@register_measurement("manifold_radius", spec=ManifoldGeometrySpec)
def manifold_radius(spec: ManifoldGeometrySpec, ctx: Context) -> Measurement:
    """Mean anchor radius ``R = mean_M R_M`` (relative to the centre norm; bootstrap over classes)."""
    return _measure(spec, ctx, "radius")


@register_measurement("manifold_dimension", spec=ManifoldGeometrySpec)
def manifold_dimension(spec: ManifoldGeometrySpec, ctx: Context) -> Measurement:
    """Mean anchor dimension ``D = mean_M D_M`` of the class manifolds (bootstrap over classes)."""
    return _measure(spec, ctx, "dimension")
