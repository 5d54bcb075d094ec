"""Mean-field manifold capacity, radius and dimension (Chung, Lee & Sompolinsky, PRX 2018).

Follows ``manifold_analysis_corr`` of the reference code (schung039/neural_manifolds_replicaMFT,
Cohen et al., Nat. Commun. 11:746, 2020) step by step:

1. subtract the global mean of all points;
2. remove the common centre subspace (:func:`~probekit.geometry.centers.common_center_subspace`,
   ``K`` chosen by residual centre correlation);
3. per manifold: subtract its mean, divide by that mean's norm, rotate into its ``M``-dim span
   (QR, ``D = M``) when ``N > M``, append a coordinate equal to 1;
4. per Gaussian sample ``t ~ N(0, I_{D+1})``: anchor point ``s~`` from the max-margin QP
   (:func:`~probekit.geometry.anchors.anchor_points`, all manifolds and samples in one batch);
5. ``alpha_M = 1 / mean_t[max(t.s~ + kappa, 0)^2 / |s~|^2]``,
   ``R_M = sqrt(mean_t |a - mean_t a|^2)`` (``a`` = axis part of ``s~``),
   ``D_M = D (mean_t cos(t_axes, a))^2``;
6. summary ``alpha = 1 / mean(1 / alpha_M)``, ``R`` and ``D`` plain means.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

from probekit.errors import DataError

from ..report.blocks import Block, Column, Table
from ..report.notebook import NotebookMixin
from ..shapes import shape_checked
from ._validation import as_tensor64, check_manifolds, check_positive
from .anchors import anchor_points
from .centers import common_center_subspace, fixed_center_subspace, max_common_dim


@dataclass(frozen=True, repr=False)
class ManifoldCapacityResult(NotebookMixin):
    """Mean-field manifold analysis of ``P`` manifolds.

    Attributes:
        capacity: ``alpha = 1 / mean(1 / alpha_M)`` (classification capacity, P/N at threshold).
        radius: mean anchor radius ``R_M``.
        dimension: mean anchor dimension ``D_M``.
        capacity_m: ``(p,)`` per-manifold capacity ``alpha_M``.
        radius_m: ``(p,)`` per-manifold radius.
        dimension_m: ``(p,)`` per-manifold dimension.
        center_correlation: mean ``|cos|`` between centred class centres (``res_coeff0``).
        n_common: ``K``, dimension of the removed common centre subspace.
        residual_correlation: residual centre correlation for each ``K`` tried.
        kappa: margin.
        n_t: Gaussian samples per manifold.
        n_unconverged: QPs whose active set had not settled (0 expected).
    """

    capacity: float
    radius: float
    dimension: float
    capacity_m: Float[Tensor, " p"]
    radius_m: Float[Tensor, " p"]
    dimension_m: Float[Tensor, " p"]
    center_correlation: float
    n_common: int
    residual_correlation: tuple[float, ...]
    kappa: float
    n_t: int
    n_unconverged: int

    @property
    def utility(self) -> float:
        """Effective utility ``Psi = alpha D R^2 / (1 + R^2)``: INFERRED, not a published formula.

        Chou et al. (ICLR 2026) report GLUE's Psi_eff without a closed form; their released values
        satisfy ``Psi = alpha D_eff R_eff^2 / (1 + R_eff^2)`` to ~1%. Here MFTMA's alpha, D, R stand
        in for GLUE's (a substitute: GLUE is unreleased).
        """
        r2 = self.radius**2
        return float(self.capacity * self.dimension * r2 / (1.0 + r2))

    def to_records(self) -> list[dict[str, Any]]:
        """One row per manifold: its capacity ``alpha_M``, radius ``R_M`` and dimension ``D_M``."""
        return [{"manifold": i, "capacity": float(a), "radius": float(r), "dimension": float(d)}
                for i, (a, r, d) in enumerate(zip(self.capacity_m.tolist(), self.radius_m.tolist(),
                                                  self.dimension_m.tolist()))]

    def _blocks(self) -> tuple[Block, ...]:
        summary = Table(
            title="class manifolds together",
            columns=(Column(key="capacity", header="capacity alpha", fmt=".4g"),
                     Column(key="radius", header="radius R", fmt=".3g"),
                     Column(key="dimension", header="dimension D", fmt=".3g"),
                     Column(key="utility", header="utility (inferred)", fmt=".4g"),
                     Column(key="center_correlation", header="centre corr.", fmt=".3f"),
                     Column(key="n_common", header="K (common centre dims)", fmt="d")),
            rows=({"capacity": self.capacity, "radius": self.radius, "dimension": self.dimension,
                   "utility": self.utility, "center_correlation": self.center_correlation,
                   "n_common": self.n_common},),
        )
        per = Table(
            title="per manifold",
            columns=(Column(key="manifold", header="manifold", fmt="d"),
                     Column(key="capacity", header="capacity alpha_M", fmt=".4g"),
                     Column(key="radius", header="radius R_M", fmt=".3g"),
                     Column(key="dimension", header="dimension D_M", fmt=".3g")),
            rows=tuple(self.to_records()),
        )
        return (summary, per)

    def _summary(self) -> str:
        return (f"{len(self.capacity_m)} manifolds: capacity {self.capacity:.4g}, radius "
                f"{self.radius:.3g}, dimension {self.dimension:.3g}")


@shape_checked
def manifolds_from_labels(
    acts: Float[Tensor, "n d"] | np.ndarray,
    labels: Sequence[object] | np.ndarray | Tensor,
    *,
    max_points: int | None = None,
    seed: int | None = 0,
) -> tuple[list[Tensor], list[object]]:
    """Group rows of ``acts`` by label into ``(d, M_c)`` point clouds (reference layout).

    Args:
        acts: ``(n, d)`` activations.
        labels: ``n`` labels.
        max_points: subsample each class to at most this many points (Chou et al. use 50).
        seed: seed of the subsampling.

    Returns:
        The point clouds (one per label, sorted label order) and the labels.
    """
    x = as_tensor64(acts, name="acts")
    lab = np.asarray(labels.cpu() if isinstance(labels, Tensor) else labels)
    if x.ndim != 2 or lab.shape != (x.shape[0],):
        raise DataError(
            f"acts of shape {tuple(x.shape)} and labels of shape {lab.shape}; expected (n, d) "
            "activations and one label per row"
        )
    rng = np.random.default_rng(seed)
    out, keys = [], []
    for key in np.unique(lab):
        idx = np.flatnonzero(lab == key)
        if max_points is not None and idx.size > max_points:
            idx = np.sort(rng.choice(idx, size=max_points, replace=False))
        out.append(x[torch.from_numpy(idx)].T.contiguous())
        keys.append(key.item() if hasattr(key, "item") else key)
    return out, keys


@dataclass(frozen=True)
class NormalizedManifolds:
    """Steps 1-3 done: manifolds in the padded ``(p, D+1, M)`` layout, ready for the QP.

    Attributes:
        points: ``(p, Dmax+1, Mmax)`` normalised points (axis rows, zero padding, a row of ones);
            a manifold with fewer points repeats its first one.
        dims: ``(p,)`` each manifold's ``D`` (``M_i`` if ``N > M_i`` else ``N``).
        center_correlation: mean ``|cos|`` between centred class centres.
        n_common: dimension ``K`` of the removed common centre subspace.
        residual_correlation: residual centre correlation for each ``K`` tried.
    """

    points: Float[Tensor, "p d1 m"]
    dims: Int[Tensor, " p"]
    center_correlation: float
    n_common: int
    residual_correlation: tuple[float, ...]


def normalize_manifolds(
    xs: list[Tensor],
    *,
    n_reps: int,
    gen: torch.Generator,
    center_basis: Float[Tensor, "n k"] | None = None,
) -> NormalizedManifolds:
    """Steps 1-3: global centring, common-centre removal, normalisation, M-dim frame.

    Args:
        xs: validated ``(N, M_i)`` float64 point clouds.
        n_reps: restarts of the centre-subspace fit.
        gen: generator of those restarts.
        center_basis: ``(N, K)`` orthonormal common-centre basis to use instead of fitting one.

    Returns:
        NormalizedManifolds.
    """
    total = sum(x.shape[1] for x in xs)
    origin = sum(x.sum(dim=1, keepdim=True) for x in xs) / total  # global mean of all points
    centers = torch.stack([x.mean(dim=1) for x in xs], dim=1)
    if center_basis is None:
        sub = common_center_subspace(centers, max_k=max_common_dim(centers), n_reps=n_reps,
                                     generator=gen)
    else:
        sub = fixed_center_subspace(centers, center_basis)
    v = sub.basis
    # P = I - V V^T; P(x - origin) - mean = P(x - mean(x)): only the centre norm needs origin
    c_proj = centers - origin
    c_proj = c_proj - v @ (v.T @ c_proj)
    c_norm = c_proj.norm(dim=0)  # (P,)
    frames: list[Tensor] = [torch.empty(0)] * len(xs)
    by_m: dict[int, list[int]] = {}
    for i, x in enumerate(xs):
        by_m.setdefault(x.shape[1], []).append(i)
    for idx in by_m.values():  # manifolds with the same M are processed as one batch
        s = torch.stack([xs[i] for i in idx])  # (g, N, M)
        s -= s.mean(dim=2, keepdim=True)
        if v.shape[1]:
            s -= v @ (v.T @ s)
        if s.shape[1] > s.shape[2]:
            # Q^T s = R: the M-dim frame of the reference's scipy qr (same LAPACK Householder)
            s = torch.linalg.qr(s, mode="r").R
        s = s / c_norm[idx].view(-1, 1, 1)
        for j, i in enumerate(idx):
            frames[i] = s[j]
    dmax = max(s.shape[0] for s in frames)
    mmax = max(s.shape[1] for s in frames)
    points = torch.zeros(len(xs), dmax + 1, mmax, dtype=torch.float64)
    for i, s in enumerate(frames):
        d, m = s.shape
        points[i, :d, :m] = s
        points[i, :d, m:] = s[:, :1]  # repeat a point: the cone (and the anchors) are unchanged
    points[:, -1, :] = 1.0
    dims = torch.tensor([s.shape[0] for s in frames])
    return NormalizedManifolds(points=points, dims=dims, center_correlation=sub.center_correlation,
                     n_common=sub.n_common, residual_correlation=sub.residual_correlation)


def gaussian_samples(
    t_vecs: Sequence[object] | None, dims: Int[Tensor, " p"], n_t: int, gen: torch.Generator
) -> Float[Tensor, "p d1 t"]:
    """Samples ``t`` in the padded layout (axis rows, zero rows, centre row last).

    Args:
        t_vecs: the reference's ``(D_i + 1, n_t)`` arrays, or None to draw them from ``gen``.
        dims: each manifold's ``D``.
        n_t: samples per manifold.
        gen: generator used when ``t_vecs`` is None.

    Returns:
        ``(p, Dmax + 1, n_t)`` samples.
    """
    p, dmax = len(dims), int(dims.max())
    out = torch.zeros(p, dmax + 1, n_t, dtype=torch.float64)
    for i, d in enumerate(dims.tolist()):
        if t_vecs is None:
            t = torch.randn(d + 1, n_t, generator=gen, dtype=torch.float64)
        else:
            t = as_tensor64(t_vecs[i], name=f"t_vecs[{i}]")
            if tuple(t.shape) != (d + 1, n_t):
                raise DataError(
                    f"t_vecs[{i}] has shape {tuple(t.shape)}; expected (D+1, n_t) = "
                    f"({d + 1}, {n_t}) with D = min(M_i, N) for manifold {i}"
                )
        out[i, :d] = t[:d]
        out[i, -1] = t[d]
    return out


def anchor_geometry(
    s: Float[Tensor, "p d1 t"], t: Float[Tensor, "p d1 t"], dims: Int[Tensor, " p"], kappa: float
) -> tuple[Float[Tensor, " p"], Float[Tensor, " p"], Float[Tensor, " p"]]:
    """Step 5: per-manifold capacity, radius and dimension from anchors (reference formulas).

    Args:
        s: anchor points.
        t: the samples they came from.
        dims: each manifold's ``D``.
        kappa: margin.

    Returns:
        ``alpha_M``, ``R_M``, ``D_M``.
    """
    max_ts = torch.clamp((t * s).sum(dim=1) + kappa, min=0.0)
    s_sum = (s**2).sum(dim=1)
    lamb = torch.where(s_sum > 0, max_ts / torch.where(s_sum > 0, s_sum, 1.0), 0.0)
    alpha = 1.0 / (lamb**2 * s_sum).mean(dim=1)
    ds = (s - s.mean(dim=2, keepdim=True))[:, :-1] / s[:, -1:]
    radius = torch.sqrt((ds**2).sum(dim=1).mean(dim=1))
    t_hat = t[:, :-1] / torch.sqrt((t[:, :-1] ** 2).sum(dim=1, keepdim=True))
    s_hat = s[:, :-1] / torch.sqrt((s[:, :-1] ** 2).sum(dim=1, keepdim=True) + 1e-12)
    dim = dims.to(s.dtype) * (t_hat * s_hat).sum(dim=1).mean(dim=1) ** 2
    return alpha, radius, dim


def manifold_capacity(
    manifolds: Sequence[object] | np.ndarray | Tensor,
    *,
    kappa: float = 0.0,
    n_t: int = 200,
    t_vecs: Sequence[object] | None = None,
    seed: int | None = None,
    n_reps: int = 10,
    allow_m_ge_n: bool = False,
    center_basis: object | None = None,
    device: str | torch.device = "cpu",
) -> ManifoldCapacityResult:
    """Mean-field manifold capacity, radius and dimension, as the reference code computes them.

    Args:
        manifolds: ``P >= 2`` point clouds of shape ``(N, M_i)`` (points are columns, as in the
            reference's ``XtotT``); ``M_i < N`` unless ``allow_m_ge_n``.
        kappa: margin (``>= 0``).
        n_t: Gaussian samples per manifold.
        t_vecs: optional ``P`` arrays of shape ``(D_i + 1, n_t)``, ``D_i = min(M_i, N)``, exactly
            the reference's ``t_vecs``: pins the samples (results then match it to solver
            precision, up to the random restarts of the centre-subspace step).
        seed: seeds the samples and the centre-subspace restarts (None: nondeterministic).
        n_reps: random restarts per ``K`` in the centre-subspace step (reference: 10).
        allow_m_ge_n: run manifolds with ``M_i >= N`` in the ``N``-dim space (no projection).
        center_basis: optional ``(N, K)`` orthonormal basis of the common centre subspace (e.g.
            the reference's ``V11``): pins step 2, whose random restarts can otherwise pick a
            different ``K`` or subspace on real data.
        device: where the QPs run (``"cuda"`` batches them on the GPU).

    Returns:
        ManifoldCapacityResult (per-manifold and summary values).
    """
    check_positive(kappa, name="kappa", allow_zero=True)
    check_positive(n_t, name="n_t")
    xs = check_manifolds(manifolds, need_m_lt_n=not allow_m_ge_n)
    if t_vecs is not None and len(t_vecs) != len(xs):
        raise DataError(f"got {len(t_vecs)} t_vecs for {len(xs)} manifolds; pass one per manifold")
    gen = torch.Generator()
    if seed is None:
        gen.seed()
    else:
        gen.manual_seed(seed)
    basis = None
    if center_basis is not None:
        basis = as_tensor64(center_basis, name="center_basis")
        if basis.ndim != 2 or basis.shape[0] != xs[0].shape[0]:
            raise DataError(
                f"center_basis has shape {tuple(basis.shape)}; expected (N, K) with "
                f"N={xs[0].shape[0]} orthonormal columns"
            )
    prep = normalize_manifolds(xs, n_reps=n_reps, gen=gen, center_basis=basis)
    t = gaussian_samples(t_vecs, prep.dims, n_t, gen)
    dev = torch.device(device)
    sol = anchor_points(prep.points.to(dev), t.to(dev), kappa=float(kappa))
    alpha, radius, dim = (v.cpu() for v in anchor_geometry(sol.anchors, t.to(dev), prep.dims.to(dev),
                                                    float(kappa)))
    return ManifoldCapacityResult(
        capacity=float(1.0 / (1.0 / alpha).mean()),
        radius=float(radius.mean()),
        dimension=float(dim.mean()),
        capacity_m=alpha,
        radius_m=radius,
        dimension_m=dim,
        center_correlation=prep.center_correlation,
        n_common=prep.n_common,
        residual_correlation=prep.residual_correlation,
        kappa=float(kappa),
        n_t=int(n_t),
        n_unconverged=sol.n_unconverged,
    )
