"""Fan-outs of the toolkit on a local Ray cluster give the in-process results exactly.

Sharded capture, patching sweeps over prompt batches, probe sweeps over checkpoints x sites.

Sharded capture (one Ray task per shard range, manifest merged by the driver) must write the
same bytes as the in-process ``capture_to_store``, also when a worker dies after writing its
shards but before returning (the task is retried and rewrites the same shards). A local
cluster starts inside this module (``ray_cluster`` in conftest: ``ray.init(num_cpus=2)``) and
is shut down after it; skipped without Ray.
"""

from __future__ import annotations

import os
from functools import partial
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")

from probekit.capture import capture_sharded  # noqa: E402
from probekit.capture.sharded import capture_shard_range  # noqa: E402
from probekit.executors.ray import RayExecutor  # noqa: E402
from probekit.models import build_model, load_model, save_checkpoint  # noqa: E402
from tests.capture.test_sharded import (  # noqa: E402
    _inputs,
    _options,
    _sites,
    reference_store,
    store_bytes,
)
from tests.conftest import TINY_CONFIGS  # noqa: E402


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    cfg = TINY_CONFIGS["gqa_rotary_rms"]
    return save_checkpoint(build_model(cfg), cfg, tmp_path_factory.mktemp("ckpt") / "tiny")


def die_after_first_attempt(fn, marker_dir: str, item):
    """Run the task, then kill this worker (no return) the first time it sees this shard range."""
    result = fn(item)
    marker = Path(marker_dir) / f"range-{item.first_shard}"
    if not marker.exists():
        marker.write_text(str(os.getpid()))
        os._exit(1)  # shards and records are written; the driver never gets the result
    return result


class DyingWorkerRay:
    """A Ray executor whose task for every shard range dies once after doing its work."""

    def __init__(self, marker_dir: Path, max_retries: int) -> None:
        self.ray = RayExecutor(progress=False, max_retries=max_retries)
        self.marker_dir = str(marker_dir)

    def map(self, fn, items, *, desc=None):
        if fn is not capture_shard_range:  # the up-front path check
            return self.ray.map(fn, items, desc=desc)
        return self.ray.map(partial(die_after_first_attempt, fn, self.marker_dir), items, desc=desc)


@pytest.mark.slow  # two Ray workers import torch + transformer-lens: ~35 s on the loaded box
def test_sharded_capture_on_ray_is_byte_identical(ray_cluster, checkpoint, tmp_path):
    expected = reference_store(checkpoint, tmp_path / "ref")
    seqs, meta, rule = _inputs()
    sites = _sites(load_model(checkpoint))
    capture_sharded(checkpoint, seqs, tmp_path / "ray", sites, executor=RayExecutor(progress=False),
                    metadata=meta, **_options(rule))
    assert store_bytes(tmp_path / "ray") == expected
    # every task's worker dies once after writing its shards: retried, same bytes, each shard once
    (tmp_path / "markers").mkdir()
    ex = DyingWorkerRay(tmp_path / "markers", max_retries=1)
    capture_sharded(checkpoint, seqs, tmp_path / "dying", sites, executor=ex, metadata=meta,
                    shards_per_task=2, **_options(rule))
    assert sorted(p.name for p in (tmp_path / "markers").iterdir()) == ["range-0", "range-2"]
    assert store_bytes(tmp_path / "dying") == expected


@pytest.mark.slow  # Ray workers import torch + transformer-lens (shared with the test above)
def test_patching_sweep_on_ray_equals_in_process(ray_cluster, single_thread):
    from probekit.circuits import patching_sweep
    from tests.circuits.test_patching_sweep import MODADD, assert_same_result, modadd_pairs

    clean, corrupt, metric = modadd_pairs()
    local = patching_sweep(MODADD, clean, corrupt, metric, pairs_per_task=3)
    remote = patching_sweep(MODADD, clean, corrupt, metric, pairs_per_task=3,
                            executor=RayExecutor(progress=False))
    assert_same_result(remote, local, atol=0, rtol=0)  # same partition: exactly the same cells


@pytest.mark.slow
def test_checkpoint_probe_sweep_on_ray_equals_in_process(ray_cluster, single_thread):
    from probekit.probes import sweep_checkpoints
    from tests.probes.test_checkpoint_sweep import CHECKPOINTS, SITES, SPLITS, modadd_data

    tokens, labels = modadd_data()
    local = sweep_checkpoints(CHECKPOINTS, tokens, labels, SITES, **SPLITS)
    remote = sweep_checkpoints(CHECKPOINTS, tokens, labels, SITES,
                               executor=RayExecutor(progress=False), **SPLITS)
    assert remote.to_dict() == local.to_dict()  # every metric, CI and hyper-parameter
    assert remote.metric("test")[1, 2] >= 0.9


@pytest.mark.slow
def test_train_cli_population_on_a_ray_address(ray_cluster, tmp_path, capsys, single_thread):
    from probekit.train import History
    from probekit.train.cli import main

    address = ray_cluster.get_runtime_context().gcs_address  # HOST:PORT of the test's cluster
    args = ["train", "modular_addition", "--steps", "3", "--seeds", "0", "1", "--no-progress",
            "--set", "task.p=7", "--set", "d_model=16", "--set", "train.n_evals=2"]
    assert main([*args, "--out", str(tmp_path / "local")]) == 0
    assert main([*args, "--out", str(tmp_path / "ray"), "--ray-address", address]) == 0
    capsys.readouterr()
    for s in (0, 1):
        local, remote = (History.read(tmp_path / w / f"seed{s}").records for w in ("local", "ray"))
        assert [{k: v for k, v in r.items() if k != "elapsed_s"} for r in remote] == \
            [{k: v for k, v in r.items() if k != "elapsed_s"} for r in local]
