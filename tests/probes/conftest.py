"""Run this directory's tests single-threaded in torch (restored afterwards).

On a shared 2-core machine, torch's two OpenMP threads spin-wait on each other and tiny
GEMMs become ~50x slower; the probes' unit problems are small, so one thread is fastest.
"""

import pytest
import torch


@pytest.fixture(autouse=True)
def _single_thread():
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
