"""Patching sweeps over prompt batches (executor tasks) equal one activation_patching call.

The reference is :func:`activation_patching` over all pairs at once: the sweep runs the same
cells in other batch compositions, so cells agree to float32 rounding (1e-5 relative), the pair order and
the NaN cells of short pairs are the same. The Ray side is in ``tests/test_ray_fanouts.py``.
"""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
import torch

from probekit.circuits import activation_patching, answer_logprob, logit_diff, patching_sweep
from probekit.errors import ConfigError
from probekit.executor import InProcessExecutor
from probekit.models import build_model, load_model, save_checkpoint
from tests.conftest import TINY_CONFIGS

MODADD = Path(__file__).resolve().parents[2] / "probes" / "checkpoints" / "modadd-p53"


def modadd_pairs(n: int = 10):
    """Pairs ``a b =`` vs ``a+1 b =``; logit difference of the clean vs the corrupted answer."""
    g = torch.Generator().manual_seed(3)
    a, b = torch.randint(0, 52, (n,), generator=g), torch.randint(0, 53, (n,), generator=g)
    eq = torch.full((n,), 53)
    clean = torch.stack([a, b, eq], 1)
    corrupt = torch.stack([a + 1, b, eq], 1)
    metric = partial(logit_diff, answer=(a + b) % 53, foil=(a + 1 + b) % 53)
    return clean, corrupt, metric


@pytest.fixture(scope="module")
def gqa_checkpoint(tmp_path_factory):
    cfg = TINY_CONFIGS["gqa_rotary_rms"]
    return save_checkpoint(build_model(cfg), cfg, tmp_path_factory.mktemp("ckpt") / "gqa")


def ragged_pairs(n: int = 7):
    """Pairs of different lengths (3..8 tokens), corrupted at token 1."""
    g = torch.Generator().manual_seed(1)
    clean = [torch.randint(0, 13, (3 + i % 6,), generator=g).tolist() for i in range(n)]
    corrupt = [[t[0], (t[1] + 5) % 13, *t[2:]] for t in clean]
    metric = partial(answer_logprob, answer=torch.arange(n) % 13)
    return clean, corrupt, metric


def assert_same_result(got, want, atol=1e-5, rtol=1e-5):
    assert got.axes == want.axes and got.labels == want.labels
    for name in ("per_pair", "values", "normalized", "base", "source"):
        torch.testing.assert_close(getattr(got, name), getattr(want, name), atol=atol, rtol=rtol,
                                   equal_nan=True, msg=name)


def test_modadd_sweep_equals_activation_patching():
    clean, corrupt, metric = modadd_pairs()
    want = activation_patching(load_model(MODADD), clean, corrupt, metric, kind="resid_pre")
    got = patching_sweep(MODADD, clean, corrupt, metric, kind="resid_pre", pairs_per_task=3,
                         executor=InProcessExecutor(check_picklable=True))
    assert_same_result(got, want)
    assert got.per_pair.shape == (10, 1, 3)
    assert float(want.normalized[0, 0]) > 0.9  # patching token a's stream restores the answer


@pytest.mark.parametrize(("kind", "by"), [("resid_pre", ("layer", "pos")),
                                          ("attn_z", ("layer", "pos", "head"))])
def test_ragged_sweep_equals_activation_patching(gqa_checkpoint, kind, by):
    clean, corrupt, metric = ragged_pairs()
    want = activation_patching(load_model(gqa_checkpoint), clean, corrupt, metric, kind=kind, by=by,
                               batch_size=16)
    got = patching_sweep(gqa_checkpoint, clean, corrupt, metric, kind=kind, by=by, batch_size=16,
                         pairs_per_task=2, executor=InProcessExecutor(check_picklable=True))
    assert_same_result(got, want)
    assert torch.isnan(got.per_pair[0, 0, 3:]).all()  # pair 0 has 3 tokens of the 8
    with pytest.raises(ConfigError, match="pairs_per_task must be >= 1"):
        patching_sweep(gqa_checkpoint, clean, corrupt, metric, pairs_per_task=0)


class KilledAfter:
    """In-process executor that dies (KeyboardInterrupt) after ``k`` sweep tasks; counts them."""

    def __init__(self, k: int | None = None) -> None:
        self.k, self.tasks = k, 0

    def map(self, fn, items, *, desc=None):
        out = []
        for item in items:
            if desc is not None and self.k is not None and self.tasks == self.k:
                raise KeyboardInterrupt("driver killed")
            self.tasks += desc is not None  # the path check has no desc
            out.append(fn(item))
        return out


def test_interrupted_sweep_resumes_from_finished_batches(tmp_path):
    clean, corrupt, metric = modadd_pairs()
    want = patching_sweep(MODADD, clean, corrupt, metric, pairs_per_task=3)
    with pytest.raises(KeyboardInterrupt):
        patching_sweep(MODADD, clean, corrupt, metric, pairs_per_task=3, resume_dir=tmp_path,
                       executor=KilledAfter(2))
    again = KilledAfter()
    got = patching_sweep(MODADD, clean, corrupt, metric, pairs_per_task=3, resume_dir=tmp_path,
                         executor=again)
    assert again.tasks == 2  # 4 batches of 3, 3, 3, 1 pairs: the first two were recorded
    assert_same_result(got, want, atol=0, rtol=0)
