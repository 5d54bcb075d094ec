"""Two-concept representations shared by the factorization tests and the Uselis et al. fixture.

``grid`` builds rows ``z(a, b) = 1.5 + u_a + v_b (+ interaction w_ab) (+ noise)`` on a full
``na x nb`` grid (3 rows per combination), with ``u`` in a rank-``ra`` and ``v`` in a rank-``rb``
subspace (orthogonal to each other unless ``overlap``). Seeded, float64, numpy/torch only.
"""

from __future__ import annotations

import numpy as np
import torch

# name -> grid() options; the fixture tests/geometry/uselis_reference.json holds the scores of
# Uselis et al.'s code on these (scripts/uselis_reference_fixtures.py)
SYNTHETIC = {
    "factorized": {},
    "factorized_noisy": {"noise": 0.3, "seed": 1},
    "interacting": {"interaction": 2.0, "seed": 2},
}


def grid(na: int = 6, nb: int = 5, d: int = 12, ra: int = 2, rb: int = 3, *,
         interaction: float = 0.0, noise: float = 0.0, overlap: bool = False, seed: int = 0
         ) -> tuple[torch.Tensor, np.ndarray, np.ndarray]:
    """Rows ``(n, d)`` and the two concepts' values ``a``, ``b`` (length ``n``)."""
    g = torch.Generator().manual_seed(seed)
    q, _ = torch.linalg.qr(torch.randn(d, d, generator=g, dtype=torch.float64))
    ba = q[:, :ra]
    bb = q[:, :rb] if overlap else q[:, ra : ra + rb]
    u = torch.randn(na, ra, generator=g, dtype=torch.float64) @ ba.T
    v = torch.randn(nb, rb, generator=g, dtype=torch.float64) @ bb.T
    a, b = np.meshgrid(np.arange(na), np.arange(nb), indexing="ij")
    a, b = np.repeat(a.ravel(), 3), np.repeat(b.ravel(), 3)
    inter = torch.randn(na, nb, d, generator=g, dtype=torch.float64)
    z = 1.5 + u[a] + v[b] + interaction * inter[a, b]
    if noise:
        z = z + noise * torch.randn(len(a), d, generator=g, dtype=torch.float64)
    return z, a, b
