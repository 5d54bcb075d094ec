"""Simulated manifold capacity: random dichotomies + linear separability (the ground truth).

As in Chung et al. (PRX 2018) and Cohen et al. (2020): centre all points globally, project them
with a random Gaussian matrix to ``n`` dimensions, give every manifold a random label ``+-1`` and
test whether some ``w`` (no bias) separates all points of all manifolds, ``y_p w.x > 0``
(LP feasibility ``y_p w.x >= 1`` with scipy's HiGHS). The capacity is ``P / n_50`` where the
fraction of separable dichotomies crosses 1/2 (linear interpolation in ``n``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from scipy.optimize import linprog
from torch import Tensor

from probekit.errors import DataError
from probekit.progress import track
from probekit.report.blocks import Block, Column, LinePlot, Series, Table
from probekit.report.notebook import NotebookMixin
from probekit.util.threads import small_work_threads

from ._validation import check_manifolds, check_positive


@dataclass(frozen=True, repr=False)
class SimulatedCapacityResult(NotebookMixin):
    """Fraction of separable random dichotomies per projection dimension.

    Attributes:
        capacity: ``P / n_50`` (nan if the fraction never crosses 1/2 on ``n_dims``).
        n_dims: projection dimensions tried.
        fraction_separable: fraction of separable dichotomies at each ``n``.
        n_dichotomies: dichotomies per ``n``.
    """

    capacity: float
    n_dims: tuple[int, ...]
    fraction_separable: tuple[float, ...]
    n_dichotomies: int

    def to_records(self) -> list[dict[str, Any]]:
        """One row per projection dimension: ``n``, the separable fraction, dichotomies tried."""
        return [{"n_dim": n, "fraction_separable": f, "n_dichotomies": self.n_dichotomies}
                for n, f in zip(self.n_dims, self.fraction_separable, strict=True)]

    def _blocks(self) -> tuple[Block, ...]:
        plot = LinePlot(
            title=f"separable fraction of random dichotomies (capacity P / n_50 = "
                  f"{self.capacity:.4g})",
            x_labels=tuple(str(n) for n in self.n_dims), xlabel="projection dimension n",
            ylabel="fraction separable",
            series=(Series(name="separable", values=tuple(self.fraction_separable)),),
            hlines=((0.5, "1/2: n_50"),), ylim=(0.0, 1.0))
        table = Table(
            columns=(Column(key="n_dim", header="projection dimension n", fmt="d"),
                     Column(key="fraction_separable", header="fraction separable"),
                     Column(key="n_dichotomies", header="dichotomies", fmt="d")),
            rows=tuple(self.to_records()),
            caption="capacity = P / n_50, n_50 the dimension where the fraction first reaches "
            "1/2 (linear interpolation; NaN when it never crosses on these dimensions)")
        return (plot, table)

    def _summary(self) -> str:
        return (f"capacity {self.capacity:.4g} from {len(self.n_dims)} dimensions "
                f"{self.n_dims[0]}..{self.n_dims[-1]}, {self.n_dichotomies} dichotomies each")


def is_separable(points: np.ndarray, signs: np.ndarray) -> bool:
    """True iff some ``w`` has ``signs_i w.points_i >= 1`` for all rows (homogeneous LP)."""
    a_ub = -(signs[:, None] * points)
    res = linprog(np.zeros(points.shape[1]), A_ub=a_ub, b_ub=-np.ones(points.shape[0]),
                  bounds=(None, None), method="highs")
    return bool(res.status == 0)


def simulated_capacity(
    manifolds: Sequence[object] | np.ndarray | Tensor,
    *,
    n_dims: Sequence[int] | np.ndarray | None = None,
    n_dichotomies: int = 50,
    seed: int = 0,
) -> SimulatedCapacityResult:
    """Capacity from the 50% point of linear separability of random manifold dichotomies.

    Args:
        manifolds: ``P >= 2`` point clouds ``(N, M_i)`` (reference layout).
        n_dims: projection dimensions (default 16 values geometric in ``[2, min(N, sum M_i)]``).
        n_dichotomies: random labellings per dimension.
        seed: seeds projections and labels.

    Returns:
        SimulatedCapacityResult.
    """
    check_positive(n_dichotomies, name="n_dichotomies")
    xs = check_manifolds(manifolds, need_m_lt_n=False)
    x = torch.cat(xs, dim=1)
    x = (x - x.mean(dim=1, keepdim=True)).numpy()  # (N, total)
    owner = np.concatenate([np.full(m.shape[1], i) for i, m in enumerate(xs)])
    n_amb, p = x.shape[0], len(xs)
    if n_dims is None:
        n_dims = np.unique(np.geomspace(2, min(n_amb, x.shape[1]), 16).round().astype(int))
    dims = tuple(int(n) for n in n_dims)
    if not dims or min(dims) < 1:
        raise DataError(f"n_dims={dims}; expected positive projection dimensions")
    rng = np.random.default_rng(seed)
    fractions = []
    # one small projection (2 n N total flops) and one LP per dichotomy: BLAS on one thread when
    # that is small (util.threads)
    with small_work_threads(work=2 * max(dims) * n_amb * x.shape[1]):
        for n in track(dims, desc="simulated capacity", unit="dichotomy",
                       total=len(dims) * n_dichotomies, weight=lambda _: n_dichotomies):
            hits = 0
            for _ in range(n_dichotomies):
                proj = (rng.standard_normal((n, n_amb)) @ x).T  # (total, n)
                labels = rng.choice([-1.0, 1.0], size=p)
                hits += is_separable(proj, labels[owner])
            fractions.append(hits / n_dichotomies)
    return SimulatedCapacityResult(capacity=_capacity_at_half(p, dims, fractions), n_dims=dims,
                                   fraction_separable=tuple(fractions),
                                   n_dichotomies=int(n_dichotomies))


def _capacity_at_half(p: int, dims: tuple[int, ...], fractions: list[float]) -> float:
    """``P / n`` where the separable fraction first reaches 1/2 (linear interpolation)."""
    order = np.argsort(dims)
    d = np.asarray(dims, dtype=float)[order]
    f = np.asarray(fractions)[order]
    for i in range(1, len(d)):
        if f[i - 1] < 0.5 <= f[i]:
            n50 = d[i - 1] + (0.5 - f[i - 1]) * (d[i] - d[i - 1]) / (f[i] - f[i - 1])
            return float(p / n50)
    return float("nan")
