import pytest
import torch

from probekit.models import build_model
from probekit.testbeds import get_task


@pytest.fixture(autouse=True)
def _one_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)


@pytest.fixture(scope="module")
def tiny():
    """A 60-command SCAN task and a 2-block model config (the HE-regulariser tests)."""
    task = get_task(
        "scan", n_noise=1, max_samples=60, ood_lengths=(5,), n_ood_per_length=8, n_ood_combo=8,
        seed=0,
    )
    return task, task.model_config(n_layers=2, d_model=32, n_heads=2, d_head=16, d_mlp=64, seed=0)


@pytest.fixture(scope="session")
def scan_task():
    return get_task(
        "scan", n_noise=1, max_samples=120, ood_lengths=(5, 6), n_ood_per_length=20,
        n_ood_combo=20, seed=0,
    )


@pytest.fixture(scope="session")
def scan_model(scan_task):
    cfg = scan_task.model_config(n_layers=3, d_model=32, n_heads=2, d_head=16, d_mlp=64, seed=1)
    return build_model(cfg)


def planted(n=120, d=6, layers=3, noise=0.0, seed=0):
    """a, b ~ N(0, 1); target = [a; b] W + c (+ noise): composition exactly affine at noise 0."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(layers, n, d, generator=g, dtype=torch.float64)
    b = torch.randn(layers, n, d, generator=g, dtype=torch.float64)
    W = torch.randn(layers, 2 * d, d, generator=g, dtype=torch.float64)
    c = torch.randn(layers, 1, d, generator=g, dtype=torch.float64)
    eps = torch.randn(layers, n, d, generator=g, dtype=torch.float64)
    return a, b, torch.cat([a, b], -1) @ W + c + noise * eps
