"""Geometry and concept factorization of every captured site of a suite (one row per example).

The suite entry points of the method package (the ``[[geometry]]`` and ``[[factorization]]``
analyses): sites constant over the measured rows (e.g. the embedding of a fixed token) are left
blank with a warning, and the other sites are measured in stacks of equal width
(:func:`geometry_by_layer`, :func:`concept_factorization` and :func:`concept_means_scores`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from ..errors import ConfigError
from ..executor import Executor
from ..sites import Site, site_label

__all__ = ["SiteFactorization", "SiteGeometry", "class_rows", "site_factorization",
           "site_geometry", "width_groups"]


def width_groups(
    acts: Mapping[Site, Tensor], rows: np.ndarray
) -> tuple[list[Site], list[list[Site]]]:
    """``(flat, groups)``: sites constant over ``rows``, and the others grouped by width."""
    sel = torch.from_numpy(np.asarray(rows, dtype=np.int64))
    flat = [s for s in acts if float(acts[s][sel].to(torch.float64).var(dim=0).sum()) == 0.0]
    by_dim: dict[int, list[Site]] = {}
    for s in acts:
        if s not in flat:
            by_dim.setdefault(acts[s].shape[1], []).append(s)
    return flat, list(by_dim.values())


def _stack(acts: Mapping[Site, Tensor], group: Sequence[Site], rows: np.ndarray) -> Tensor:
    sel = torch.from_numpy(np.asarray(rows, dtype=np.int64))
    return torch.stack([acts[s][sel].to(torch.float64) for s in group])


def class_rows(
    y: np.ndarray, *, min_points: int, max_classes: int = 0, label: str = "the label",
    split: str = "",
) -> np.ndarray:
    """Row mask of the classes kept: >= ``min_points`` rows, the first ``max_classes`` (0: all).

    Raises:
        ConfigError: fewer than 2 classes are kept (naming ``label`` and ``split``).
    """
    values, counts = np.unique(y, return_counts=True)
    keep = values[counts >= min_points]
    if max_classes:
        keep = keep[:max_classes]
    if keep.size < 2:
        raise ConfigError(
            f"[[geometry]] found {keep.size} class(es) of {label!r} with >= {min_points} "
            f"rows in split {split!r}; lower min_points or use a larger split"
        )
    return np.isin(y, keep)


@dataclass(frozen=True, kw_only=True)
class SiteGeometry:
    """Per-site geometry curves (:func:`site_geometry`).

    Attributes:
        sites: every site, in capture order; ``flat``: those constant over the rows (blank).
        values: measure name -> one value per site (None where blank), the measures of
            :data:`probekit.geometry.blocks.MEASURES`.
        n_classes, points_per_class: the class manifolds measured.
        warnings: blank sites; sites no wider than the points per class.
    """

    sites: tuple[Site, ...]
    flat: tuple[Site, ...]
    values: dict[str, list[Any]]
    n_classes: int
    points_per_class: int
    warnings: tuple[str, ...]


def site_geometry(
    acts: Mapping[Site, Tensor], rows: np.ndarray, y: np.ndarray, *, max_points: int = 50,
    n_t: int = 200, kappa: float = 0.0, seed: int = 0, executor: str | Executor | None = None,
    split: str = "",
) -> SiteGeometry:
    """Class-manifold geometry of every site over ``rows`` labelled ``y`` (Chung et al. 2018).

    Sites of equal width are one layer stack of :func:`geometry_by_layer` (MFTMA capacity,
    radius, dimension, inferred utility; PR, #PCs, rank, NC1, Fisher ratio).

    Raises:
        ConfigError: every site is constant over the rows.
    """
    from .blocks import MEASURES
    from .curves import geometry_by_layer

    flat, groups = width_groups(acts, rows)
    if not groups:
        raise ConfigError(
            f"[[geometry]] every site is constant over the {split!r} rows (e.g. the embedding "
            "of a fixed token): nothing to measure; capture sites after attention"
        )
    curves: dict[Site, dict[str, Any]] = {s: {k: None for k, _, _ in MEASURES} for s in flat}
    first = None
    for group in groups:  # sites of equal width are measured as one layer stack
        cur = geometry_by_layer(_stack(acts, group, rows), y, layer_names=[s.name for s in group],
                                max_points=max_points, n_t=n_t, kappa=kappa, seed=seed,
                                executor=executor)
        first = cur if first is None else first  # the group of the first measured site
        for i, s in enumerate(group):
            curves[s] = {k: getattr(cur, k)[i] for k, _, _ in MEASURES}
    m = first.points_per_class
    warnings = []
    if flat:
        warnings.append(
            f"sites {[site_label(s) for s in flat]} are identical for every row (e.g. the "
            "embedding of the same token at every example): no geometry, left blank"
        )
    narrow = [site_label(s) for s in acts if s not in flat and acts[s].shape[1] <= m]
    if narrow:
        warnings.append(
            f"sites {narrow} have width <= {m} points per class: capacity ran without the M-dim "
            "projection (the method assumes M < N); lower max_points for those sites"
        )
    sites = tuple(acts)
    return SiteGeometry(sites=sites, flat=tuple(flat),
                        values={k: [curves[s][k] for s in sites] for k, _, _ in MEASURES},
                        n_classes=first.n_classes, points_per_class=m, warnings=tuple(warnings))


@dataclass(frozen=True, kw_only=True)
class SiteFactorization:
    """Per-site concept factorization scores (:func:`site_factorization`).

    Attributes:
        sites: every site, in capture order; ``flat``: those constant over the fitted rows.
        values: measure name -> one value per site (None where blank), the measures of
            :data:`probekit.geometry.blocks.FACTORIZATION_MEASURES`, plus ``principal_angles``
            (one list per site).
        n_fitted_combinations, n_heldout_combinations: (a, b) combinations fitted / held out.
        warnings: blank sites.
    """

    sites: tuple[Site, ...]
    flat: tuple[Site, ...]
    values: dict[str, list[Any]]
    n_fitted_combinations: int
    n_heldout_combinations: int
    warnings: tuple[str, ...]


def _factorization_scores(
    stack: Tensor, a: np.ndarray, b: np.ndarray, train: np.ndarray, rtol: float,
) -> tuple[list[dict[str, Any]], int, int]:
    """Both families of scores for a ``(site, n, d)`` stack; per-site dicts and combo counts."""
    from .concept_means import concept_means_scores
    from .factorization import concept_factorization

    fac = concept_factorization(stack, a, b, train=train, rtol=rtol)
    fit = np.flatnonzero(train)
    ref = concept_means_scores(stack[:, fit], [a[fit], b[fit]])
    out = []
    for i in range(stack.shape[0]):
        angles = fac.principal_angles[i]
        angles = angles[~torch.isnan(angles)]
        held = float(fac.r2_heldout[i])
        out.append({
            "r2_train": float(fac.r2_train[i]),
            "r2_heldout": held if np.isfinite(held) else None,
            "angle_min": float(angles.min()) if angles.numel() else None,
            "angle_mean": float(angles.mean()) if angles.numel() else None,
            "rank_a": int(fac.rank_a[i]), "rank_b": int(fac.rank_b[i]),
            "linear_r2": float(ref.linear_r2[i]),
            "linear_r2_whitened": float(ref.linear_r2_whitened[i]),
            "k95_a": int(ref.k95[i, 0]), "k95_b": int(ref.k95[i, 1]),
            "same_concept_abs_cos": float(ref.same_concept_abs_cos[i]),
            "cross_concept_abs_cos": float(ref.cross_concept_abs_cos[i]),
            "principal_angles": [float(v) for v in angles],
        })
    return out, fac.n_train_combinations, fac.n_heldout_combinations


def site_factorization(
    acts: Mapping[Site, Tensor], rows: np.ndarray, train: np.ndarray, a: np.ndarray,
    b: np.ndarray, *, rtol: float = 1e-3, split: str = "",
) -> SiteFactorization:
    """Concept factorization of every site over ``rows`` (Uselis et al. 2026).

    ``train`` marks the rows whose (a, b) combinations are fitted (the rest give the held-out
    R^2); ``a``, ``b``: the two concepts' values per row. Sites of equal width are one stack of
    :func:`concept_factorization` (additive fit, held-out R^2, principal angles, ranks) and
    :func:`concept_means_scores` (the released code's scores on the fitted rows).

    Raises:
        ConfigError: every site is constant over the fitted rows.
    """
    from .blocks import FACTORIZATION_MEASURES

    rows = np.asarray(rows, dtype=np.int64)
    flat, groups = width_groups(acts, rows[train])
    if not groups:
        raise ConfigError(
            f"[[factorization]] every site is constant over the {split!r} rows: nothing to "
            "factorize; capture sites after attention"
        )
    blank = {k: None for k, _, _ in FACTORIZATION_MEASURES} | {"principal_angles": []}
    scores: dict[Site, dict[str, Any]] = {s: dict(blank) for s in flat}
    n_fit = n_held = 0
    for group in groups:  # sites of equal width are one (site, n, d) stack
        per_site, n_fit, n_held = _factorization_scores(_stack(acts, group, rows), a, b, train,
                                                        rtol)
        scores.update(zip(group, per_site))
    warnings = []
    if flat:
        warnings.append(f"sites {[site_label(s) for s in flat]} are identical for every row: "
                        "no factorization, left blank")
    sites = tuple(acts)
    keys = [k for k, _, _ in FACTORIZATION_MEASURES] + ["principal_angles"]
    return SiteFactorization(sites=sites, flat=tuple(flat),
                             values={k: [scores[s][k] for s in sites] for k in keys},
                             n_fitted_combinations=n_fit, n_heldout_combinations=n_held,
                             warnings=tuple(warnings))
