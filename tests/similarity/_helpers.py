"""Shared data generators and direct numpy references for the similarity tests."""

import numpy as np
import torch


def randn(seed: int, *shape: int) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def orthogonal(seed: int, d: int) -> torch.Tensor:
    q, r = torch.linalg.qr(randn(seed, d, d))
    return q * torch.sign(torch.diagonal(r))


def related(seed: int, n: int = 200, dx: int = 12, dy: int = 7, noise: float = 1.0):
    """X and a noisy linear read-out Y of it (CKA well inside (0, 1))."""
    X = randn(seed, n, dx)
    Y = X @ randn(seed + 1, dx, dy) + noise * randn(seed + 2, n, dy)
    return X, Y


def np_linear_cka(X, Y) -> float:
    """Kornblith et al. 2019, eq. (feature space), directly in numpy."""
    X, Y = np.asarray(X, dtype=np.float64), np.asarray(Y, dtype=np.float64)
    Xc, Yc = X - X.mean(0), Y - Y.mean(0)
    return float(
        np.linalg.norm(Yc.T @ Xc, "fro") ** 2
        / (np.linalg.norm(Xc.T @ Xc, "fro") * np.linalg.norm(Yc.T @ Yc, "fro"))
    )
