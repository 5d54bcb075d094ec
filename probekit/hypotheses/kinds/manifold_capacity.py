"""``measure = "manifold_capacity"``: mean-field capacity of the label manifolds at a site (Chung et al. 2018).

:func:`probekit.geometry.label_manifolds.label_capacity`, one manifold per class of ``label``;
control: :func:`~probekit.geometry.label_manifolds.shuffled_label_capacities`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from ...context import Context
from ...geometry.config import ManifoldConfig
from ...stats.limits import MAX_PERMUTATIONS
from ...util.constraints import Ge, Le
from ..keys import bootstrap, labels, site_rows
from ..measurement import Measurement
from ..registry import register_measurement


@dataclass(frozen=True, kw_only=True)
class CapacitySpec(ManifoldConfig):
    """Keys of a ``manifold_capacity`` claim or marker.

    :class:`~probekit.geometry.config.ManifoldConfig`'s (``label``, ``split``, ``max_points``,
    ``n_t``, ``kappa``, ``seed``) plus ``site``: activations at ``[capture] positions``;
    ``n_shuffles``: label-shuffled refits for the control.
    """

    site: str
    n_shuffles: Annotated[int, Ge(1), Le(MAX_PERMUTATIONS)] = 20


@register_measurement("manifold_capacity", spec=CapacitySpec, control=True)
def manifold_capacity(spec: CapacitySpec, ctx: Context, *, control: bool = False) -> Measurement:
    """Capacity ``alpha = 1 / mean_M(1 / alpha_M)`` of the class manifolds.

    The CI bootstraps the manifolds (classes) with their per-manifold capacities held fixed
    (they are computed once, jointly); control: capacities of label-shuffled manifolds
    (``n_shuffles`` refits through the executor), a permutation null.
    """
    from ...geometry import label_manifolds as lm

    site, X = site_rows(ctx, spec.site, spec.split)
    y = labels(ctx, spec.label)[ctx.examples.split(spec.split)]
    task = lm.LabelManifolds(acts=X, labels=y, max_points=spec.max_points, n_t=spec.n_t,
                          kappa=spec.kappa, seed=spec.seed)
    res = lm.label_capacity(task)
    inv = 1.0 / res.capacity_m.double().numpy()
    null = (lm.shuffled_label_capacities(task, n_shuffles=spec.n_shuffles, executor=ctx.executor)
            if control else None)
    return Measurement(
        metric="manifold capacity", estimate=float(res.capacity),
        resamples=1.0 / inv[bootstrap(ctx, inv.size)].mean(1), null=null, n=int(inv.size),
        unit="class manifolds",
        method=f"mean-field capacity (kappa={spec.kappa:g}) of {inv.size} class manifolds at "
        f"{site.key} ({spec.split}, <= {spec.max_points} points each)",
        details={"radius": float(res.radius), "dimension": float(res.dimension),
                 "n_unconverged": int(res.n_unconverged)},
    )
