"""``[[geometry]]``: per-site geometry of the label-class manifolds (capacity, R, D, utility ...).

For each captured site, the rows of one split are grouped by a label column into class manifolds
(classes with fewer than ``min_points`` rows dropped, at most ``max_points`` per class, optionally
the first ``max_classes`` classes) and measured with :func:`probekit.geometry.geometry_by_layer`:
MFTMA capacity, radius, dimension and the inferred utility (Chung et al. 2018; Chou et al. 2026)
plus PR, #PCs for 90% variance, numerical rank, NC1 and the Fisher ratio.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ...context import RunContext
from ...errors import ConfigError
from ...sites import site_label
from ..registry import register_analysis
from ..result import AnalysisResult


@dataclass(frozen=True, kw_only=True)
class GeometrySpec:
    """``[[geometry]]`` keys.

    Attributes:
        label: column whose values define the classes (default: ``[data] label``).
        split: examples measured (``train``, ``test`` or an OOD split).
        max_points: points per class manifold (Chou et al.: 50).
        min_points: classes with fewer rows in the split are dropped.
        max_classes: keep only the first N classes in sorted order (0 = all).
        n_t: Gaussian samples per manifold.
        kappa: margin.
        seed: subsampling, samples and restarts.
    """

    label: str | None = None
    split: str = "train"
    max_points: int = 50
    min_points: int = 5
    max_classes: int = 0
    n_t: int = 200
    kappa: float = 0.0
    seed: int = 0


def _classes(y: np.ndarray, spec: GeometrySpec) -> np.ndarray:
    """Row mask of the classes kept (enough rows; first ``max_classes``)."""
    values, counts = np.unique(y, return_counts=True)
    keep = values[counts >= spec.min_points]
    if spec.max_classes:
        keep = keep[: spec.max_classes]
    if keep.size < 2:
        raise ConfigError(
            f"[[geometry]] found {keep.size} class(es) of {spec.label!r} with >= {spec.min_points} "
            f"rows in split {spec.split!r}; lower min_points or use a larger split"
        )
    return np.isin(y, keep)


@register_analysis("geometry", spec=GeometrySpec)
def run_geometry(spec: GeometrySpec, ctx: RunContext) -> AnalysisResult:
    """Class-manifold geometry per site (MFTMA capacity, R, D, utility; PR, NC1, Fisher)."""
    import torch

    from ...geometry import geometry_by_layer
    from ...geometry.blocks import MEASURES, geometry_blocks

    for key in ("max_points", "min_points", "n_t"):
        if getattr(spec, key) < 2:
            raise ConfigError(f"[[geometry]] {key}={getattr(spec, key)}; expected >= 2")
    label = spec.label or ctx.suite.data.label
    idx = ctx.examples.split(spec.split)
    y_all = np.asarray(ctx.examples.column(label), dtype=object)[idx]
    mask = _classes(y_all.astype(str), spec)
    rows, y = idx[mask], y_all[mask].astype(str)
    acts = ctx.activations()
    sites = list(acts)
    sel = torch.from_numpy(rows)
    flat = [s for s in sites if float(acts[s][sel].to(torch.float64).var(dim=0).sum()) == 0.0]
    curves: dict[Any, dict[str, Any]] = {
        s: {k: None for k, _, _ in MEASURES} for s in flat
    }
    by_dim: dict[int, list[Any]] = {}
    for s in sites:
        if s not in flat:
            by_dim.setdefault(acts[s].shape[1], []).append(s)
    for group in by_dim.values():  # sites of equal width are measured as one layer stack
        stack = torch.stack([acts[s][sel].to(torch.float64) for s in group])
        cur = geometry_by_layer(stack, y, layer_names=[s.name for s in group],
                                max_points=spec.max_points, n_t=spec.n_t, kappa=spec.kappa,
                                seed=spec.seed, executor=ctx.executor)
        for i, s in enumerate(group):
            curves[s] = {k: getattr(cur, k)[i] for k, _, _ in MEASURES}
            curves[s]["n_classes"] = cur.n_classes
            curves[s]["points_per_class"] = cur.points_per_class
    labels = [site_label(s) for s in sites]
    measured = [s for s in sites if s not in flat]
    if not measured:
        raise ConfigError(
            f"[[geometry]] every site is constant over the {spec.split!r} rows (e.g. the embedding "
            "of a fixed token): nothing to measure; capture sites after attention"
        )
    n_classes = curves[measured[0]]["n_classes"]
    m = curves[measured[0]]["points_per_class"]
    warnings = []
    if flat:
        warnings.append(
            f"sites {[site_label(s) for s in flat]} are identical for every row (e.g. the "
            "embedding of the same token at every example): no geometry, left blank"
        )
    narrow = [site_label(s) for s in measured if acts[s].shape[1] <= m]
    if narrow:
        warnings.append(
            f"sites {narrow} have width <= {m} points per class: capacity ran without the M-dim "
            "projection (the method assumes M < N); lower max_points for those sites"
        )
    data = {
        "label": label, "split": spec.split, "n_classes": n_classes, "points_per_class": m,
        "sites": [s.name for s in sites], "site_labels": labels,
        **{k: [curves[s][k] for s in sites] for k, _, _ in MEASURES},
        "notes": {"utility": "inferred: alpha * D * R^2 / (1 + R^2) (Chou et al. 2026 give no "
                             "formula); D and R are MFTMA's, standing in for GLUE's D_eff, R_eff"},
    }

    blocks = tuple(geometry_blocks(
        labels, {k: [curves[s][k] for s in sites] for k, _, _ in MEASURES},
        n_classes=n_classes, points_per_class=m, label=label, split=spec.split,
    ))
    return AnalysisResult(section="geometry", title=f"Class-manifold geometry of {label!r}",
                          data=data, blocks=blocks, warnings=tuple(warnings))
