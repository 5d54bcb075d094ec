"""Per-layer geometry curves of class manifolds: capacity, radius, dimension, utility, baselines.

For each layer of ``(layer, n, d)`` activations, the rows are grouped by label into class
manifolds (subsampled to ``max_points``, as Chou et al. subsample to min(50, M)) and measured with
:func:`~probekit.geometry.capacity.manifold_capacity` (one executor task per layer) plus the
simple estimators of :mod:`probekit.geometry.dimension` (all layers in one pass).

Effective dimension / radius / utility: Chou et al. (ICLR 2026) use GLUE's D_eff, R_eff and
Psi_eff; GLUE is unreleased, so MFTMA's D, R and alpha stand in (a SUBSTITUTE), and utility is
the INFERRED ``Psi = alpha D R^2 / (1 + R^2)`` (fits their released values to ~1%).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from jaxtyping import Float
from torch import Tensor

from probekit.errors import DataError
from probekit.executor import Executor, get_executor
from probekit.report.blocks import Block
from probekit.report.notebook import NotebookMixin
from probekit.store import ActivationStore

from ..shapes import shape_checked
from ._validation import as_tensor64
from .capacity import manifold_capacity, manifolds_from_labels
from .dimension import (
    fisher_ratio,
    n_components_for_variance,
    nc1,
    numerical_rank,
    participation_ratio,
    participation_ratio_per_class,
)


@dataclass(frozen=True)
class _LayerTask:
    """One layer's class manifolds and the capacity options (picklable executor item)."""

    manifolds: tuple[np.ndarray, ...]
    n_t: int
    kappa: float
    seed: int
    n_reps: int


def _capacity_task(task: _LayerTask) -> dict[str, float]:
    """Executor task: manifold capacity of one layer as plain floats."""
    n = task.manifolds[0].shape[0]
    res = manifold_capacity(list(task.manifolds), kappa=task.kappa, n_t=task.n_t, seed=task.seed,
                            n_reps=task.n_reps, allow_m_ge_n=max(m.shape[1] for m in
                                                                 task.manifolds) >= n)
    return {"capacity": res.capacity, "radius": res.radius, "dimension": res.dimension,
            "utility": res.utility, "center_correlation": res.center_correlation,
            "n_common": float(res.n_common)}


@dataclass(frozen=True, repr=False)
class GeometryCurves(NotebookMixin):
    """Geometry measures per layer (all lists have one value per layer).

    Attributes:
        layers: layer names.
        n_classes: class manifolds measured.
        points_per_class: points per manifold after subsampling (max).
        capacity, radius, dimension: MFTMA alpha, mean R_M, mean D_M (D, R stand in for GLUE's
            D_eff, R_eff).
        utility: inferred Psi = alpha D R^2 / (1 + R^2).
        center_correlation: mean |cos| between class centres.
        participation_ratio, participation_ratio_class_mean, n_pcs_90, numerical_rank, nc1,
            fisher_ratio: the simple estimators (pooled over all rows; per-class PR averaged).
    """

    layers: list[str]
    n_classes: int
    points_per_class: int
    capacity: list[float]
    radius: list[float]
    dimension: list[float]
    utility: list[float]
    center_correlation: list[float]
    participation_ratio: list[float]
    participation_ratio_class_mean: list[float]
    n_pcs_90: list[int]
    numerical_rank: list[int]
    nc1: list[float]
    fisher_ratio: list[float]

    def to_dict(self) -> dict[str, object]:
        """JSON-ready dict."""
        return asdict(self)

    def to_records(self) -> list[dict[str, Any]]:
        """One row per layer: ``layer`` and every measure of :data:`.blocks.MEASURES`."""
        from .blocks import MEASURES

        return [{"layer": name, **{k: getattr(self, k)[i] for k, _, _ in MEASURES}}
                for i, name in enumerate(self.layers)]

    def _blocks(self) -> tuple[Block, ...]:
        from ..sites import site_label
        from .blocks import MEASURES, geometry_blocks

        return tuple(geometry_blocks(
            [site_label(name) for name in self.layers],
            {k: getattr(self, k) for k, _, _ in MEASURES},
            n_classes=self.n_classes, points_per_class=self.points_per_class,
        ))

    def _summary(self) -> str:
        best = max(range(len(self.layers)), key=lambda i: self.capacity[i])
        return (f"{len(self.layers)} layers, {self.n_classes} classes x <= "
                f"{self.points_per_class} points; capacity {min(self.capacity):.3g}.."
                f"{max(self.capacity):.3g} (max at {self.layers[best]})")


@shape_checked
def geometry_by_layer(
    acts: Float[Tensor, "*lay n d"] | np.ndarray,
    labels: Sequence[object] | np.ndarray | Tensor,
    *,
    layer_names: Sequence[str] | None = None,
    max_points: int = 50,
    n_t: int = 200,
    kappa: float = 0.0,
    seed: int = 0,
    n_reps: int = 10,
    executor: str | Executor | None = None,
) -> GeometryCurves:
    """Geometry curves of the label-class manifolds across layers.

    Args:
        acts: ``(layer, n, d)`` activations (or ``(n, d)``).
        labels: ``n`` class labels (classes with one row are refused).
        layer_names: one name per layer (default ``"0", "1", ...``).
        max_points: points per class manifold for the capacity (subsampled with ``seed``).
        n_t: Gaussian samples per manifold.
        kappa: margin.
        seed: seeds subsampling, samples and restarts.
        n_reps: restarts of the centre-subspace step.
        executor: :func:`probekit.executor.get_executor` spec for the per-layer tasks.

    Returns:
        GeometryCurves.
    """
    x = as_tensor64(acts, name="acts")
    x = x.unsqueeze(0) if x.ndim == 2 else x
    if x.ndim != 3:
        raise DataError(f"acts of shape {tuple(x.shape)}; expected (layer, n, d) or (n, d)")
    names = [str(i) for i in range(x.shape[0])] if layer_names is None else list(layer_names)
    if len(names) != x.shape[0]:
        raise DataError(f"{len(names)} layer names for {x.shape[0]} layers; pass one per layer")
    lab = np.asarray(labels.cpu() if isinstance(labels, Tensor) else labels)
    tasks = []
    for layer in x:
        ms, _ = manifolds_from_labels(layer, lab, max_points=max_points, seed=seed)
        tasks.append(_LayerTask(manifolds=tuple(m.numpy() for m in ms), n_t=n_t,
                                kappa=float(kappa), seed=seed, n_reps=n_reps))
    caps = get_executor(executor).map(_capacity_task, tasks, desc="capacity per layer")
    pr_class = participation_ratio_per_class(x, lab).mean(dim=1)
    return GeometryCurves(
        layers=names,
        n_classes=len(tasks[0].manifolds),
        points_per_class=max(m.shape[1] for m in tasks[0].manifolds),
        capacity=[c["capacity"] for c in caps],
        radius=[c["radius"] for c in caps],
        dimension=[c["dimension"] for c in caps],
        utility=[c["utility"] for c in caps],
        center_correlation=[c["center_correlation"] for c in caps],
        participation_ratio=participation_ratio(x).tolist(),
        participation_ratio_class_mean=pr_class.tolist(),
        n_pcs_90=[int(v) for v in n_components_for_variance(x, 0.9)],
        numerical_rank=[int(v) for v in numerical_rank(x)],
        nc1=nc1(x, lab).tolist(),
        fisher_ratio=fisher_ratio(x, lab).tolist(),
    )


def geometry_from_store(
    store: str | Path | ActivationStore,
    label: str,
    *,
    sites: Sequence[str] | str | None = "resid_post",
    **options: Any,
) -> GeometryCurves:
    """:func:`geometry_by_layer` on an activation store: sites of equal width, label column.

    Args:
        store: an :class:`~probekit.store.ActivationStore` or its directory.
        label: metadata column whose values define the classes.
        sites: a site kind (every layer of it), a list of site names, or None (all sites).
        **options: passed to :func:`geometry_by_layer` (max_points, n_t, kappa, seed ...).

    Returns:
        GeometryCurves with the store's site names as layers.
    """
    st = store if isinstance(store, ActivationStore) else ActivationStore(store)
    meta = st.metadata()
    if label not in meta:
        raise DataError(
            f"store {st.directory} has no metadata column {label!r}; columns: {sorted(meta)}"
        )
    if isinstance(sites, str):
        names = st.sites_of_kind(sites)
    else:
        names = list(sites) if sites is not None else st.sites
    acts = st.load_layers(names)
    return geometry_by_layer(acts, np.asarray(meta[label]), layer_names=[str(n) for n in names],
                             **options)
