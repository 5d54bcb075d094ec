import pytest

from probekit.testbeds import get_task


@pytest.fixture(scope="session")
def tiny_task():
    return get_task("modular_addition", p=11, train_fraction=0.7, seed=0)


@pytest.fixture(scope="session")
def tiny_model_config(tiny_task):
    return tiny_task.model_config(d_model=32, n_heads=2, d_head=16, d_mlp=64)
