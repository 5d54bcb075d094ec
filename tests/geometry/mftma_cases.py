"""Point-cloud cases shared by the MFTMA reference fixtures and the tests (numpy only).

Every case is rebuilt from its seeds with ``numpy.random.RandomState`` so the reference code
(run outside the project by ``scripts/mftma_reference_fixtures.py``) and the tests see the same
inputs and the same ``t_vecs``.
"""

from __future__ import annotations

import numpy as np

# name -> parameters; "kind" picks the generator below
CASES: dict[str, dict] = {
    "pinned": {"kind": "pinned", "n_t": 100},
    "gauss_p20_m10_n200": {"kind": "gauss", "p": 20, "m": 10, "n": 200, "seed": 1, "n_t": 200},
    "gauss_p30_m20_n300": {"kind": "gauss", "p": 30, "m": 20, "n": 300, "seed": 2, "n_t": 200},
    "points_r0.01": {"kind": "noisy_points", "p": 40, "m": 20, "n": 400, "r": 0.01, "seed": 3,
                     "n_t": 200},
    "points_r0.5": {"kind": "noisy_points", "p": 40, "m": 20, "n": 400, "r": 0.5, "seed": 4,
                    "n_t": 200},
    "points_r2": {"kind": "noisy_points", "p": 40, "m": 20, "n": 400, "r": 2.0, "seed": 5,
                  "n_t": 200},
    "rings_r0.3": {"kind": "rings", "p": 20, "m": 16, "n": 100, "r": 0.3, "seed": 6, "n_t": 200},
    "offset_centres": {"kind": "offset", "p": 20, "m": 15, "n": 150, "r": 0.5, "seed": 7,
                       "n_t": 200},
    "kappa0.2_gauss": {"kind": "gauss", "p": 20, "m": 10, "n": 200, "seed": 8, "n_t": 200,
                       "kappa": 0.2},
    "bench_p100_m50_n5000": {"kind": "gauss", "p": 100, "m": 50, "n": 5000, "seed": 9,
                             "n_t": 200, "slow": True},
}


def make_manifolds(case: dict) -> list[np.ndarray]:
    """The ``(N, M)`` point clouds of a case (reference layout: points are columns)."""
    kind = case["kind"]
    if kind == "pinned":
        rs = np.random.RandomState(0)
        return [rs.randn(20, 5) for _ in range(10)]
    rs = np.random.RandomState(case["seed"])
    p, m, n = case["p"], case["m"], case["n"]
    if kind == "gauss":
        return [rs.randn(n, m) for _ in range(p)]
    if kind == "noisy_points":  # centres randn, points = centre + r * N(0, 1)
        return [rs.randn(n, 1) + case["r"] * rs.randn(n, m) for _ in range(p)]
    if kind == "rings":  # 1-d closed curves (circles) of radius r around random centres
        theta = 2 * np.pi * np.arange(m) / m
        out = []
        for _ in range(p):
            c, u, w = rs.randn(n, 1), rs.randn(n, 1), rs.randn(n, 1)
            out.append(c + case["r"] * (u * np.cos(theta) + w * np.sin(theta)))
        return out
    if kind == "offset":  # centres share one large offset direction: correlated centres
        base = 3.0 * rs.randn(n, 1)
        return [base + rs.randn(n, 1) + case["r"] * rs.randn(n, m) for _ in range(p)]
    raise ValueError(f"unknown case kind {kind!r}")


def make_t_vecs(case: dict, manifolds: list[np.ndarray]) -> list[np.ndarray]:
    """Reference-layout samples: ``t_vecs[i] = RandomState(100 + i).randn(D_i + 1, n_t)``."""
    out = []
    for i, x in enumerate(manifolds):
        n, m = x.shape
        d = m if n > m else n
        out.append(np.random.RandomState(100 + i).randn(d + 1, case["n_t"]))
    return out
