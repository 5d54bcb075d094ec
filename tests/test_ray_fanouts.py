"""Fan-outs of the toolkit on a local Ray cluster give the in-process results exactly.

Sharded capture, patching sweeps over prompt batches, probe sweeps over checkpoints x sites.

Sharded capture (one Ray task per shard range, manifest merged by the driver) must write the
same bytes as the in-process ``capture_to_store``, also when a worker dies after writing its
shards but before returning (the task is retried and rewrites the same shards). A local
cluster starts inside this module (``ray_cluster`` in conftest: ``ray.init(num_cpus=2)``) and
is shut down after it; skipped without Ray.
"""

from __future__ import annotations

import contextlib
import json
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
    from probekit.cli import main
    from probekit.train import History

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


RAY_DRIVER = """
import sys, time
from functools import partial
import ray
from probekit.capture import capture_sharded
from probekit.capture.sharded import capture_shard_range
from probekit.executors.ray import RayExecutor
from tests.capture.test_sharded import _inputs, _options, _sites
from probekit.models import load_model

def slow(fn, item):  # each shard task takes >= 1 s, so the kill lands mid-run
    out = fn(item)
    time.sleep(1.0)
    return out

class Slow:
    def __init__(self):
        self.ray = RayExecutor(progress=False)

    def map(self, fn, items, desc=None):
        return self.ray.map(partial(slow, fn) if fn is capture_shard_range else fn, items)

ckpt, out = sys.argv[1:3]
ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False,
         runtime_env={"env_vars": {"PYTHONPATH": sys.argv[3]}})
seqs, meta, rule = _inputs(96)
capture_sharded(ckpt, seqs, out, _sites(load_model(ckpt)), executor=Slow(), metadata=meta,
                **_options(rule))
"""


class CountingRay:
    """RayExecutor recording the shard ranges it is asked to capture."""

    def __init__(self) -> None:
        self.ray = RayExecutor(progress=False)
        self.first_shards: list[int] = []

    def map(self, fn, items, *, desc=None):
        items = list(items)
        if fn is capture_shard_range:
            self.first_shards += [t.first_shard for t in items]
        return self.ray.map(fn, items, desc=desc)


@pytest.mark.slow  # a second local cluster in the driver subprocess; ~1 s per shard task
def test_sigkilled_ray_driver_rerun_on_ray_skips_finished_shards(ray_cluster, checkpoint, tmp_path):
    import signal
    import subprocess
    import sys
    import time

    from probekit.store.manifest import PARTS

    root = Path(__file__).resolve().parents[1]
    out = tmp_path / "s"
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(root / "tests")])}
    # own session: the driver's Ray processes (GCS, raylet, agents) share its process group
    proc = subprocess.Popen([sys.executable, "-c", RAY_DRIVER, str(checkpoint), str(out),
                             env["PYTHONPATH"]], cwd=root, env=env, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 300
        while len(list((out / PARTS).glob("shard-*.json"))) < 2:
            assert proc.poll() is None, proc.stderr.read().decode()[-2000:]
            assert time.monotonic() < deadline, "the driver never finished two shards"
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)  # Ray's agents outlive a killed driver otherwise
        proc.stderr.close()
    # a worker killed mid-task may still land its (atomic) shard write: wait until the set settles
    done, settled = set(), time.monotonic()
    while time.monotonic() - settled < 3:
        now = {int(p.stem[6:]) for p in (out / PARTS).glob("shard-*.json")}
        if now != done:
            done, settled = now, time.monotonic()
        time.sleep(0.2)
    assert 2 <= len(done) < 12 and not json.loads((out / "manifest.json").read_text())["complete"]
    seqs, meta, rule = _inputs(96)
    expected = reference_store(checkpoint, tmp_path / "ref", n=96)
    again = CountingRay()
    capture_sharded(checkpoint, seqs, out, _sites(load_model(checkpoint)), executor=again,
                    metadata=meta, **_options(rule))
    assert sorted(again.first_shards) == sorted(set(range(12)) - done)  # finished ones skipped
    assert store_bytes(out) == expected
