"""Simple dimension and class-separation measures, for all layers at once.

Baselines of Chou et al. (ICLR 2026, "Diagnosing generalization failures from representational
geometry markers"): participation ratio ``PR = (sum l)^2 / sum l^2`` of covariance eigenvalues
(Gao et al. 2017), the number of PCs for 90% variance, numerical rank (#singular values
``>= rtol * s_1``), neural-collapse NC1 ``tr(S_W S_B^+) / C`` (Papyan, Han & Donoho 2020; ``S_B^+``
truncated at ``rtol`` of its top eigenvalue) and the Fisher ratio ``tr(S_B) / tr(S_W)``. All act on
centred data, so they are invariant to translation and rotation; PR, PC count, rank, NC1 and the
Fisher ratio are also invariant to scale.

Inputs are ``(layer, n, d)`` (or ``(n, d)``, treated as one layer).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from jaxtyping import Float, Int
from torch import Tensor

from probekit.errors import ConfigError, DataError

from ..shapes import shape_checked
from ._validation import as_tensor64


def _layers(acts: object) -> Tensor:
    x = as_tensor64(acts, name="acts")
    if x.ndim == 2:
        x = x.unsqueeze(0)
    if x.ndim != 3 or x.shape[1] < 2:
        raise DataError(
            f"acts of shape {tuple(x.shape)}; expected (layer, n, d) or (n, d) with n >= 2 rows; "
            "flatten positions first, e.g. einops.rearrange(a, 'layer b p d -> layer (b p) d')"
        )
    return x


def _labels(labels: object, n: int) -> tuple[np.ndarray, np.ndarray]:
    lab = np.asarray(labels.cpu() if isinstance(labels, Tensor) else labels)
    if lab.shape != (n,):
        raise DataError(f"labels of shape {lab.shape} for {n} rows; pass one label per row")
    classes, inv, counts = np.unique(lab, return_inverse=True, return_counts=True)
    if classes.size < 2:
        raise DataError(f"got {classes.size} class(es); class measures need at least 2 labels")
    single = classes[counts < 2]
    if single.size:
        raise DataError(
            f"label(s) {single.tolist()[:5]} have one point; within-class spread needs >= 2 "
            "points per label; drop those labels or collect more examples"
        )
    return classes, inv


@shape_checked
def covariance_spectrum(acts: Float[Tensor, "*lay n d"] | np.ndarray) -> Float[Tensor, "layer k"]:
    """Eigenvalues (descending) of each layer's covariance, ``k = min(n, d)`` (via the smaller Gram)."""
    x = _layers(acts)
    xc = x - x.mean(dim=1, keepdim=True)
    gram = xc @ xc.transpose(1, 2) if x.shape[1] <= x.shape[2] else xc.transpose(1, 2) @ xc
    ev = torch.linalg.eigvalsh(gram / (x.shape[1] - 1)).flip(-1)
    return ev.clamp(min=0.0)


@shape_checked
def participation_ratio(acts: Float[Tensor, "*lay n d"] | np.ndarray) -> Float[Tensor, " layer"]:
    """``PR = (sum_i l_i)^2 / sum_i l_i^2`` of the covariance eigenvalues, per layer."""
    ev = covariance_spectrum(acts)
    return ev.sum(dim=1) ** 2 / (ev**2).sum(dim=1)


@shape_checked
def participation_ratio_per_class(
    acts: Float[Tensor, "*lay n d"] | np.ndarray, labels: Sequence[object] | np.ndarray | Tensor
) -> Float[Tensor, "layer c"]:
    """PR of each class's own covariance (classes in sorted label order), per layer."""
    x = _layers(acts)
    classes, inv = _labels(labels, x.shape[1])
    cols = [participation_ratio(x[:, torch.from_numpy(np.flatnonzero(inv == c))])
            for c in range(classes.size)]
    return torch.stack(cols, dim=1)


@shape_checked
def n_components_for_variance(
    acts: Float[Tensor, "*lay n d"] | np.ndarray, threshold: float = 0.9
) -> Int[Tensor, " layer"]:
    """Fewest principal components whose variance fraction reaches ``threshold``, per layer."""
    if not 0 < threshold <= 1:
        raise ConfigError(f"threshold={threshold!r} is a variance fraction; choose 0 < threshold <= 1 "
                          "(0.9 keeps 90% of the variance)")
    ev = covariance_spectrum(acts)
    frac = torch.cumsum(ev, dim=1) / ev.sum(dim=1, keepdim=True)
    return (frac < threshold - 1e-12).sum(dim=1) + 1


@shape_checked
def numerical_rank(
    acts: Float[Tensor, "*lay n d"] | np.ndarray, rtol: float = 1e-3
) -> Int[Tensor, " layer"]:
    """Number of singular values of the centred data ``>= rtol * s_1``, per layer."""
    if not 0 < rtol < 1:
        raise ConfigError(f"rtol={rtol!r} must lie in (0, 1) (relative to the largest singular value)")
    sv = covariance_spectrum(acts).sqrt()
    return (sv >= rtol * sv[:, :1]).sum(dim=1)


def _scatter(x: Tensor, inv: np.ndarray, n_classes: int) -> tuple[Tensor, Tensor]:
    """Within-class ``S_W = 1/n sum (h - mu_c)(h - mu_c)^T`` and between ``S_B`` (mean over classes)."""
    idx = torch.from_numpy(inv)
    onehot = torch.nn.functional.one_hot(idx, n_classes).to(x.dtype)  # (n, c)
    means = (onehot.T @ x) / onehot.sum(dim=0)[:, None]  # (layer, c, d)
    within = x - means[:, idx]
    s_w = within.transpose(1, 2) @ within / x.shape[1]
    mc = means - means.mean(dim=1, keepdim=True)
    s_b = mc.transpose(1, 2) @ mc / n_classes
    return s_w, s_b


@shape_checked
def nc1(
    acts: Float[Tensor, "*lay n d"] | np.ndarray,
    labels: Sequence[object] | np.ndarray | Tensor,
    rtol: float = 1e-3,
) -> Float[Tensor, " layer"]:
    """Neural collapse NC1 ``tr(S_W S_B^+) / C``, ``S_B^+`` truncated at ``rtol * l_max``."""
    x = _layers(acts)
    classes, inv = _labels(labels, x.shape[1])
    s_w, s_b = _scatter(x, inv, classes.size)
    ev, vec = torch.linalg.eigh(s_b)
    keep = ev >= rtol * ev[:, -1:]
    inv_ev = torch.where(keep, 1.0 / torch.where(keep, ev, 1.0), 0.0)
    pinv = (vec * inv_ev.unsqueeze(1)) @ vec.transpose(1, 2)
    return torch.einsum("lij,lji->l", s_w, pinv) / classes.size


@shape_checked
def fisher_ratio(
    acts: Float[Tensor, "*lay n d"] | np.ndarray, labels: Sequence[object] | np.ndarray | Tensor
) -> Float[Tensor, " layer"]:
    """Fisher ratio ``tr(S_B) / tr(S_W)``: between-class over within-class variance, per layer."""
    x = _layers(acts)
    classes, inv = _labels(labels, x.shape[1])
    s_w, s_b = _scatter(x, inv, classes.size)
    return torch.diagonal(s_b, dim1=1, dim2=2).sum(1) / torch.diagonal(s_w, dim1=1, dim2=2).sum(1)
