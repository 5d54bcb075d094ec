"""``[[geometry]]``: per-site geometry of the label-class manifolds (capacity, R, D, utility ...).

For each captured site, the rows of one split are grouped by a label column into class manifolds
(classes with fewer than ``min_points`` rows dropped, at most ``max_points`` per class, optionally
the first ``max_classes`` classes) and measured with :func:`probekit.geometry.geometry_by_layer`:
MFTMA capacity, radius, dimension and the inferred utility (Chung et al. 2018; Chou et al. 2026)
plus PR, #PCs for 90% variance, numerical rank, NC1 and the Fisher ratio.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

import numpy as np

from ...context import RunContext
from ...geometry.config import ManifoldConfig
from ...sites import site_label
from ...util.constraints import Ge
from ..registry import register_analysis
from ..result import AnalysisResult


@dataclass(frozen=True, kw_only=True)
class GeometrySpec(ManifoldConfig):
    """``[[geometry]]`` keys: :class:`~probekit.geometry.config.ManifoldConfig`'s plus the class filter.

    ``label``, ``split``, ``max_points``, ``n_t``, ``kappa`` and ``seed`` are declared and
    validated once in :class:`ManifoldConfig`.

    Attributes:
        min_points: classes with fewer rows in the split are dropped.
        max_classes: keep only the first N classes in sorted order (0 = all).
    """

    min_points: Annotated[int, Ge(2)] = 5
    max_classes: Annotated[int, Ge(0)] = 0


@register_analysis("geometry", spec=GeometrySpec)
def run_geometry(spec: GeometrySpec, ctx: RunContext) -> AnalysisResult:
    """Class-manifold geometry per site (MFTMA capacity, R, D, utility; PR, NC1, Fisher)."""
    from ...geometry import class_rows, site_geometry
    from ...geometry.blocks import geometry_blocks

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
