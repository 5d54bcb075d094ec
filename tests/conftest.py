import os

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("MPLBACKEND", "Agg")

import pytest  # noqa: E402
import torch  # noqa: E402

from probekit.models import ModelConfig, build_model  # noqa: E402

TINY_CONFIGS = {
    "ln_mha": ModelConfig(n_layers=2, d_model=16, n_heads=2, d_head=8, d_vocab=11, n_ctx=12, act_fn="gelu"),
    "gqa_rotary_rms": ModelConfig(
        n_layers=3, d_model=24, n_heads=6, d_head=4, d_vocab=13, n_ctx=12, n_key_value_heads=2,
        normalization_type="RMS", positional_embedding_type="rotary", act_fn="silu",
    ),
    "no_ln": ModelConfig(n_layers=1, d_model=16, n_heads=4, d_head=4, d_vocab=11, n_ctx=12, normalization_type=None),
}


@pytest.fixture(scope="session", params=sorted(TINY_CONFIGS))
def tiny_model(request):
    return build_model(TINY_CONFIGS[request.param])


@pytest.fixture(scope="session")
def small_model():
    return build_model(TINY_CONFIGS["ln_mha"])


def random_sequences(n: int, vocab: int, lo: int = 2, hi: int = 12, seed: int = 0) -> list[list[int]]:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.randint(lo, hi + 1, (n,), generator=g)
    return [torch.randint(0, vocab, (int(length),), generator=g).tolist() for length in lengths]


@pytest.fixture
def single_thread():
    """Run a test single-threaded in torch (restored afterwards).

    On a shared 2-core machine, torch's two OpenMP threads spin-wait on each other and tiny
    GEMMs become ~50x slower; probe and statistics unit problems are small, so one thread is
    fastest. tests/probes and tests/stats use it for every test via their conftest.
    """
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(old)
