"""``[[geometry]]``: per-site geometry of the label-class manifolds (capacity, R, D, utility ...).

For each captured site, the rows of one split are grouped by a label column into class manifolds
(classes with fewer than ``min_points`` rows dropped, at most ``max_points`` per class, optionally
the first ``max_classes`` classes) and measured with :func:`probekit.geometry.geometry_by_layer`:
MFTMA capacity, radius, dimension and the inferred utility (Chung et al. 2018; Chou et al. 2026)
plus PR, #PCs for 90% variance, numerical rank, NC1 and the Fisher ratio.
"""

from __future__ import annotations

from dataclasses import dataclass

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


@register_analysis("geometry", spec=GeometrySpec)
def run_geometry(spec: GeometrySpec, ctx: RunContext) -> AnalysisResult:
    """Class-manifold geometry per site (MFTMA capacity, R, D, utility; PR, NC1, Fisher)."""
    from ...geometry import class_rows, site_geometry
    from ...geometry.blocks import geometry_blocks

    for key in ("max_points", "min_points", "n_t"):
        if getattr(spec, key) < 2:
            raise ConfigError(f"[[geometry]] {key}={getattr(spec, key)}; expected >= 2")
    label = spec.label or ctx.suite.data.label
    idx = ctx.examples.split(spec.split)
    y_all = np.asarray(ctx.examples.column(label), dtype=object)[idx]
    mask = class_rows(y_all.astype(str), min_points=spec.min_points,
                      max_classes=spec.max_classes, label=label, split=spec.split)
    geo = site_geometry(ctx.activations(), idx[mask], y_all[mask].astype(str),
                        max_points=spec.max_points, n_t=spec.n_t, kappa=spec.kappa,
                        seed=spec.seed, executor=ctx.executor, split=spec.split)
    labels = [site_label(s) for s in geo.sites]
    data = {
        "label": label, "split": spec.split, "n_classes": geo.n_classes,
        "points_per_class": geo.points_per_class,
        "sites": [s.name for s in geo.sites], "site_labels": labels, **geo.values,
        "notes": {"utility": "inferred: alpha * D * R^2 / (1 + R^2) (Chou et al. 2026 give no "
                             "formula); D and R are MFTMA's, standing in for GLUE's D_eff, R_eff"},
    }
    blocks = tuple(geometry_blocks(labels, geo.values, n_classes=geo.n_classes,
                                   points_per_class=geo.points_per_class, label=label,
                                   split=spec.split))
    return AnalysisResult(section="geometry", title=f"Class-manifold geometry of {label!r}",
                          data=data, blocks=blocks, warnings=geo.warnings)
