"""Probe sweeps over checkpoints x sites (one executor task per checkpoint) equal a direct loop.

Reference: for each checkpoint, ``collect_activations`` + ``sweep_layers`` by hand; the sweep
must give the same numbers (same code path, same seeds). Planted signal: in the
modular-addition series the answer (0 or 1) is decodable from the ``=`` token's final residual
after training and not at initialisation. The Ray side is in ``tests/test_ray_fanouts.py``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from probekit.capture import Site, collect_activations
from probekit.executor import InProcessExecutor
from probekit.models import load_model
from probekit.probes import SweepConfig, sweep_checkpoints, sweep_layers

SERIES = Path(__file__).resolve().parents[2] / "probes" / "checkpoints" / "modadd-p53-series"
CHECKPOINTS = [SERIES / "step_0000000", SERIES / "step_0001000"]
SITES = [Site(0, "resid_pre"), Site(0, "resid_mid"), Site(0, "resid_post")]


def modadd_data():
    """Every pair ``a b =`` whose answer is 0 or 1 (106 pairs, shuffled); label = the answer.

    The answer is a linear read-out of the final residual (its unembedding direction), so a
    trained model makes it decodable at ``resid_post`` and an untrained one does not.
    """
    pairs = [(a, (k - a) % 53, k) for k in (0, 1) for a in range(53)]
    order = np.random.default_rng(0).permutation(len(pairs))
    tokens = [[pairs[i][0], pairs[i][1], 53] for i in order]
    labels = np.array([pairs[i][2] for i in order])
    return tokens, labels


SPLITS = {"train_idx": np.arange(70), "test_idx": np.arange(70, 106),
          "config": SweepConfig(n_bootstrap=1000, Cs=[0.1, 1.0, 10.0], cv=3)}


def test_checkpoint_sweep_equals_direct_loop():
    tokens, labels = modadd_data()
    got = sweep_checkpoints(CHECKPOINTS, tokens, labels, SITES,
                            executor=InProcessExecutor(check_picklable=True), **SPLITS)
    for ckpt, sweep in zip(CHECKPOINTS, got.sweeps):
        acts = collect_activations(load_model(ckpt), tokens, SITES, progress=False)
        want = sweep_layers({s: acts[s] for s in SITES}, labels, **SPLITS)
        assert sweep.to_dict() == want.to_dict()
    test = got.metric("test")
    assert test.shape == (2, 3)
    print(got.table())
    assert test[1, 2] >= 0.9 and test[0, 2] <= 0.75  # the trained model's answer, not the init's
    assert "| step_0001000 |" in got.table()
    with pytest.raises(TypeError, match=r"missing .*required .*argument: 'test_idx'"):
        sweep_checkpoints(CHECKPOINTS, tokens, labels, SITES, train_idx=np.arange(70))


def test_interrupted_checkpoint_sweep_resumes(tmp_path):
    from tests.circuits.test_patching_sweep import KilledAfter

    tokens, labels = modadd_data()
    with pytest.raises(KeyboardInterrupt):
        sweep_checkpoints(CHECKPOINTS, tokens, labels, SITES, executor=KilledAfter(1),
                          resume_dir=tmp_path, **SPLITS)
    again = KilledAfter()
    got = sweep_checkpoints(CHECKPOINTS, tokens, labels, SITES, executor=again,
                            resume_dir=tmp_path, **SPLITS)
    assert again.tasks == 1  # the first checkpoint's sweep was recorded
    want = sweep_checkpoints(CHECKPOINTS, tokens, labels, SITES, **SPLITS)
    assert got.to_dict() == want.to_dict()
